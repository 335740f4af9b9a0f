"""Quantize a whole GGUF with weightkit and with llama.cpp's llama-quantize, and compare.

For each file type: seconds for `weightkit.llama_quantize.quantize_gguf` and for libllama's `llama_model_quantize`
(from llama-cpp-python, both cores, requantizing allowed), their ratio, and whether the two outputs have the
same tensor types and bytes (and are the same file). The source is the real Gemma 3 270M Q4_K_M file, or
with `--f16-layers N` a llama-shaped F16 model made up for the run (2048 wide, 5632 FFN, 32,000 tokens, N
layers; random weights), which is what users usually quantize from.

    python benchmarks/bench_quantize_gguf.py [--types Q4_K_M,Q8_0,...] [--repeat N] [--f16-layers 8] [--imatrix]
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
from weightkit.gguf import GGUFValueType, Value, write_gguf
from weightkit.llama_quantize import QuantizeOptions, quantize_gguf
from weightkit.llama_quantize.mixes import file_type

DEFAULT = "Q4_K_M,Q5_K_M,Q3_K_M,Q4_K_S,Q2_K,Q4_0,Q6_K,Q8_0"


def llama_quantize(src: Path, dst: Path, ftype: int, imatrix: dict[str, np.ndarray] | None) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = 2
    params.allow_requantize = True  # the source is already quantized
    if imatrix is not None:
        entries = [llama_cpp.llama_model_imatrix_data(n.encode(), v.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                      v.size) for n, v in imatrix.items()]  # fmt: skip
        entries.append(llama_cpp.llama_model_imatrix_data(None, None, 0))
        array = (llama_cpp.llama_model_imatrix_data * len(entries))(*entries)
        params.imatrix = ctypes.cast(array, ctypes.POINTER(llama_cpp.llama_model_imatrix_data))
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama_model_quantize failed for file type {ftype}")


def made_up_imatrix(path: Path) -> dict[str, np.ndarray]:
    """Positive random importance weights for every matrix of the model (one row per expert)."""
    rng = np.random.default_rng(1)
    with weightkit.open(path) as m:
        return {
            name: rng.uniform(0.25, 4, (int(np.prod(info.shape[:-2])), info.shape[-1])).astype(np.float32)
            for name, info in m.tensors.items()
            if len(info.shape) >= 2
        }


def f16_model(path: Path, layers: int) -> None:
    """A llama-shaped F16 GGUF with random weights (norms float32)."""
    embd, ff, vocab, u32 = 2048, 5632, 32000, GGUFValueType.UINT32
    rng = np.random.default_rng(0)

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    md = {"general.architecture": "llama", "llama.block_count": Value(layers, u32),
          "llama.context_length": Value(4096, u32), "llama.embedding_length": Value(embd, u32),
          "llama.feed_forward_length": Value(ff, u32), "llama.attention.head_count": Value(32, u32),
          "llama.attention.head_count_kv": Value(8, u32),
          "llama.attention.layer_norm_rms_epsilon": Value(1e-5, GGUFValueType.FLOAT32)}  # fmt: skip
    tensors = {"token_embd.weight": mat(vocab, embd), "output_norm.weight": np.ones(embd, np.float32),
               "output.weight": mat(vocab, embd)}  # fmt: skip
    for i in range(layers):
        p = f"blk.{i}."
        tensors |= {p + "attn_norm.weight": np.ones(embd, np.float32), p + "ffn_norm.weight": np.ones(embd, np.float32),
                    p + "attn_q.weight": mat(embd, embd), p + "attn_k.weight": mat(512, embd),
                    p + "attn_v.weight": mat(512, embd), p + "attn_output.weight": mat(embd, embd),
                    p + "ffn_gate.weight": mat(ff, embd), p + "ffn_up.weight": mat(ff, embd),
                    p + "ffn_down.weight": mat(embd, ff)}  # fmt: skip
    write_gguf(path, md, tensors)


def same_tensors(a: Path, b: Path) -> bool:
    with weightkit.open(a) as x, weightkit.open(b) as y:
        if list(x.tensors) != list(y.tensors):
            return False
        return all(x.tensors[n].dtype == y.tensors[n].dtype and np.array_equal(x.raw(n), y.raw(n)) for n in x.tensors)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--types", default=DEFAULT, help="comma-separated llama-quantize file types")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the best counts")
    parser.add_argument("--f16-layers", type=int, help="quantize a made-up llama-shaped F16 model of N layers")
    parser.add_argument("--imatrix", action="store_true", help="give both sides made-up importance weights")
    args = parser.parse_args(argv)
    try:
        import llama_cpp
    except ImportError:
        llama_cpp = None
        print("llama-cpp-python is not installed: timing weightkit alone")
    else:
        quiet = llama_cpp.llama_log_callback(lambda level, text, data: None)
        llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))
    with tempfile.TemporaryDirectory() as tmp:
        src = gemma_path()
        if args.f16_layers:
            src = Path(tmp) / f"llama-{args.f16_layers}-layers-f16.gguf"
            f16_model(src, args.f16_layers)
        imatrix = made_up_imatrix(src) if args.imatrix else None
        print(f"{src.name}: {src.stat().st_size / 2**20:.0f} MiB" + (", with an imatrix" if imatrix else ""))
        print(f"{'type':<10} {'weightkit':>10} {'llama.cpp':>10} {'ratio':>7}  same output")
        ours, theirs = Path(tmp) / "weightkit.gguf", Path(tmp) / "llama.gguf"
        for name in args.types.split(","):
            options = QuantizeOptions(name, imatrix=imatrix)
            t_ours, _ = best_of(lambda o=options: quantize_gguf(src, ours, o), args.repeat)
            if llama_cpp is None:
                print(f"{name:<10} {t_ours:>9.2f}s")
                continue
            t_ref, _ = best_of(lambda n=name: llama_quantize(src, theirs, file_type(n).id, imatrix), args.repeat)
            same = "file identical" if filecmp.cmp(ours, theirs, shallow=False) else (
                "tensors identical" if same_tensors(ours, theirs) else "DIFFERENT"
            )  # fmt: skip
            print(f"{name:<10} {t_ours:>9.2f}s {t_ref:>9.2f}s {t_ref / t_ours:>6.2f}x  {same}")


if __name__ == "__main__":
    main()
