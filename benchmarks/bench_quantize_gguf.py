"""Re-quantize the whole Gemma 3 270M GGUF with weightkit and with llama.cpp's llama-quantize, and compare.

For each file type: seconds for `weightkit.convert.quantize_gguf` and for libllama's `llama_model_quantize`
(from llama-cpp-python, both cores, requantizing allowed), their ratio, and whether the two outputs have the
same tensor types and bytes (and are the same file).

    python benchmarks/bench_quantize_gguf.py [--types Q4_K_M,Q8_0,...] [--repeat N]
"""

from __future__ import annotations

import argparse
import ctypes
import filecmp
import tempfile
from pathlib import Path

import numpy as np

import weightkit
from _common import best_of, gemma_path
from weightkit.convert import quantize_gguf
from weightkit.convert.mixes import file_type

DEFAULT = "Q4_K_M,Q5_K_M,Q3_K_M,Q4_K_S,Q2_K,Q4_0,Q6_K,Q8_0"


def llama_quantize(src: Path, dst: Path, ftype: int) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    params.allow_requantize = True  # the source is already quantized
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama_model_quantize failed for file type {ftype}")


def same_tensors(a: Path, b: Path) -> bool:
    with weightkit.open(a) as x, weightkit.open(b) as y:
        if list(x.tensors) != list(y.tensors):
            return False
        return all(x.tensors[n].dtype == y.tensors[n].dtype and np.array_equal(x.raw(n), y.raw(n)) for n in x.tensors)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--types", default=DEFAULT, help="comma-separated llama-quantize file types")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the best counts")
    args = parser.parse_args(argv)
    try:
        import llama_cpp
    except ImportError:
        llama_cpp = None
        print("llama-cpp-python is not installed: timing weightkit alone")
    else:
        quiet = llama_cpp.llama_log_callback(lambda level, text, data: None)
        llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))
    src = gemma_path()
    print(f"{src.name}: {src.stat().st_size / 2**20:.0f} MiB")
    print(f"{'type':<10} {'weightkit':>10} {'llama.cpp':>10} {'ratio':>7}  same output")
    with tempfile.TemporaryDirectory() as tmp:
        ours, theirs = Path(tmp) / "weightkit.gguf", Path(tmp) / "llama.gguf"
        for name in args.types.split(","):
            t_ours, _ = best_of(lambda n=name: quantize_gguf(src, ours, n, mix=True), args.repeat)
            if llama_cpp is None:
                print(f"{name:<10} {t_ours:>9.2f}s")
                continue
            t_ref, _ = best_of(lambda n=name: llama_quantize(src, theirs, file_type(n).id), args.repeat)
            same = "file identical" if filecmp.cmp(ours, theirs, shallow=False) else (
                "tensors identical" if same_tensors(ours, theirs) else "DIFFERENT"
            )  # fmt: skip
            print(f"{name:<10} {t_ours:>9.2f}s {t_ref:>9.2f}s {t_ref / t_ours:>6.2f}x  {same}")


if __name__ == "__main__":
    main()
