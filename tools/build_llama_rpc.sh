#!/bin/sh
# Build the llama.cpp that llama-cpp-python 0.3.36 bundles with ggml's RPC backend, for
# tools/llama_devices_oracle.py: libllama, libggml-rpc and llama-fit-params land in $OUT/bin.
# About 15 minutes on 2 cores. Then: export LLAMA_CPP_LIB_PATH=$OUT/bin
set -eu
OUT=${1:-${WEIGHTKIT_CACHE:-$HOME/.cache/weightkit}/llama-rpc}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
pip download --no-binary :all: --no-deps --dest "$WORK" llama-cpp-python==0.3.36
tar -xzf "$WORK"/llama_cpp_python-0.3.36.tar.gz -C "$WORK"
cmake -S "$WORK/llama_cpp_python-0.3.36/vendor/llama.cpp" -B "$OUT" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_RPC=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
cmake --build "$OUT" --target llama-fit-params -j "$(nproc)"
echo "built: export LLAMA_CPP_LIB_PATH=$OUT/bin"
