"""llama.cpp's memory, from a GGUF's metadata and tensor infos: KV cache, recurrent state, output and compute
buffers as the llama.cpp that llama-cpp-python 0.3.36 bundles allocates them."""
