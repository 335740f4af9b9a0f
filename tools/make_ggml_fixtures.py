"""Record the ggml reference vectors in tests/data/ggml/: every GGML type quantized and dequantized by ggml.

    pip install llama-cpp-python==0.3.36      # compiles llama.cpp (about 10 minutes on 2 cores)
    python tools/make_ggml_fixtures.py [out_dir] [seed rows cols]

Defaults: tests/data/ggml, seed 1234, 4 rows of 1024 values. One `<TYPE>.npz` per type, with for each case
(`gaussian`, `student_t`, `uniform`, `edge`, `ternary`): `<case>.input` (float32 [rows, cols]),
`<case>.quantized` (the bytes `ggml_quantize_chunk` wrote; Q8_1's reference row quantizer), and
`<case>.dequantized` (ggml's `to_float` of them); `imatrix` (float32 [cols]) where ggml needs importance
weights to quantize; and for block types `random_bytes.quantized` / `.dequantized` (uniformly random
blocks, so every bit pattern of scales and codes appears). `index.json` lists each type's ggml id, block
size, bytes per block, cases, and whether it needs an imatrix. Compare bytes and float bits exactly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ggml_oracle

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "ggml"
TYPES = {
    1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1", 10: "Q2_K", 11: "Q3_K",
    12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL",
    21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
    40: "NVFP4", 41: "Q1_0",
}  # fmt: skip


def cases(rng: np.random.Generator, rows: int, cols: int) -> dict[str, np.ndarray]:
    """The inputs, drawn in a fixed order so that a seed always gives the same arrays."""
    gaussian = rng.standard_normal((rows, cols)).astype(np.float32)
    student_t = (rng.standard_t(3, (rows, cols)) * rng.uniform(1e-3, 3, (rows, 1))).astype(np.float32)
    uniform = rng.uniform(-1, 1, (rows, cols)).astype(np.float32)
    edge = gaussian.copy()
    edge[0, : cols // 2] = 0.0  # an all-zero stretch
    edge[1] *= 1e-6  # tiny values
    edge[2] *= 300.0  # large ones
    edge[3, ::37] = 40.0  # outliers
    levels = rng.integers(-1, 2, (rows, cols)).astype(np.float32)
    ternary = levels * rng.uniform(0.5, 2, (rows, 1)).astype(np.float32)
    return {"gaussian": gaussian, "student_t": student_t, "uniform": uniform, "edge": edge, "ternary": ternary}


def record(out: Path, seed: int, rows: int, cols: int) -> None:
    rng = np.random.default_rng(seed)
    inputs = cases(rng, rows, cols)
    imatrix = rng.uniform(0.1, 2.0, cols).astype(np.float32)
    out.mkdir(parents=True, exist_ok=True)
    index = {}
    for ggml_type, name in TYPES.items():
        traits = ggml_oracle.traits(ggml_type)
        needs_imatrix = ggml_oracle.requires_imatrix(ggml_type)
        arrays: dict[str, np.ndarray] = {}
        recorded = []
        for case, x in inputs.items():
            raw = ggml_oracle.quantize(ggml_type, x, imatrix if needs_imatrix else None)
            arrays[f"{case}.input"] = x
            arrays[f"{case}.quantized"] = raw
            if traits.to_float:
                arrays[f"{case}.dequantized"] = ggml_oracle.dequantize(ggml_type, raw, x.size).reshape(x.shape)
            recorded.append(case)
        if needs_imatrix:
            arrays["imatrix"] = imatrix
        if traits.to_float and traits.is_quantized:
            n_blocks = rows * cols // traits.blck_size
            raw = rng.integers(0, 256, n_blocks * traits.type_size, dtype=np.uint8)
            arrays["random_bytes.quantized"] = raw
            decoded = ggml_oracle.dequantize(ggml_type, raw, n_blocks * traits.blck_size)
            arrays["random_bytes.dequantized"] = decoded.reshape(rows, -1)
            recorded.append("random_bytes")
        np.savez_compressed(out / f"{name}.npz", **arrays)
        index[name] = {
            "ggml_type": ggml_type,
            "block_size": traits.blck_size,
            "type_size": traits.type_size,
            "cases": recorded,
            "quantize_needs_imatrix": needs_imatrix,
            "has_dequantize": bool(traits.to_float),
        }
    (out / "index.json").write_text(json.dumps({"seed": seed, "rows": rows, "cols": cols, "types": index}, indent=1))


if __name__ == "__main__":
    args = sys.argv[1:]
    numbers = [int(a) for a in args[1:4]] if len(args) >= 4 else [1234, 4, 1024]
    record(Path(args[0]) if args else OUT, *numbers)
