"""Make the extra ggml reference vectors in tests/data/ggml_extra/ (needs llama-cpp-python; CI only reads them).

The fixtures in tests/data/ggml leave out what this covers: the importance-matrix paths of the legacy and K-quant
quantizers, Q2_0 and Q8_K, a single-row tensor, and block scales that decode to inf, NaN or subnormals.

    python tests/data/make_ggml_extra.py [out_dir]

Uses tools/ggml_oracle.py. Q8_K has no `to_float` nor
`ggml_quantize_chunk` support in ggml, so its exported `quantize_row_q8_K_ref` / `dequantize_row_q8_K` are
called directly.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SEED = 20240917

# name: (ggml id, bytes per block, values per block, byte offsets of the float16 scales)
TYPES = {
    "Q4_0": (2, 18, 32, [0]),
    "Q4_1": (3, 20, 32, [0, 2]),
    "Q5_0": (6, 22, 32, [0]),
    "Q5_1": (7, 24, 32, [0, 2]),
    "Q8_0": (8, 34, 32, [0]),
    "Q8_1": (9, 36, 32, [0, 2]),
    "Q1_0": (41, 18, 128, [0]),
    "Q2_0": (42, 18, 64, [0]),
    "Q2_K": (10, 84, 256, [80, 82]),
    "Q3_K": (11, 110, 256, [108]),
    "Q4_K": (12, 144, 256, [0, 2]),
    "Q5_K": (13, 176, 256, [0, 2]),
    "Q6_K": (14, 210, 256, [208]),
    "Q8_K": (15, 292, 256, []),
}
NO_IMATRIX = {"Q8_1", "Q8_K"}  # quantized by ggml's reference row functions, which take no weights
# float16 scales that decode to inf, NaN (quiet, signalling, both signs), subnormals, the largest finite, zeros
SPECIAL_HALVES = np.array(
    [0x7C00, 0xFC00, 0x7C01, 0x7DFF, 0x7E00, 0x7FFF, 0xFE01, 0xFD55, 0x0001, 0x8001, 0x03FF, 0x7BFF, 0, 0x8000],
    dtype=np.uint16,
)
SPECIAL_FLOATS = np.array(  # Q8_K's float32 scale
    [0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00001, 0xFFFFFFFF, 0x00000001, 0x80000001, 0x7F7FFFFF, 0],
    dtype=np.uint32,
)


def inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Cases: name -> (input float32 2-D, imatrix float32 1-D)."""
    rows, cols = 4, 512
    gauss = rng.standard_normal((rows, cols)).astype(np.float32)
    heavy = rng.standard_t(2, (rows, cols)) * np.exp(rng.uniform(-9, 7, (rows, 1)))
    mixed = rng.standard_normal((rows, cols))
    mixed[0, :200] = 0.0  # all-zero blocks and a partly zero one
    mixed[1] *= 1e-7  # scales that underflow float16
    mixed[2] = rng.integers(-8, 9, cols) * 0.25  # exact ties for every rounding
    mixed[3, ::37] = 40.0  # outliers of both signs
    mixed[3, 5::41] = -1e3
    positive = rng.lognormal(0.0, 1.5, (rows, cols))
    single = rng.standard_normal((1, 768)) * 3 + 1
    sparse_im = rng.uniform(0.1, 2.0, cols)
    sparse_im[rng.random(cols) < 0.25] = 0.0  # columns an imatrix never saw
    cases = {
        "gaussian": (gauss, rng.uniform(0.1, 2.0, cols)),
        "heavy": (heavy, rng.exponential(1.0, cols)),
        "mixed": (mixed, sparse_im),
        "positive": (positive, rng.uniform(0.5, 1.5, cols)),
        "single_row": (single, rng.uniform(0.1, 2.0, 768)),
    }
    return {k: (x.astype(np.float32), im.astype(np.float32)) for k, (x, im) in cases.items()}


def main(out_dir: Path) -> None:
    sys.path.insert(0, str(REPO / "tools"))
    import ggml_oracle as oracle

    lib = oracle.lib
    void = ctypes.c_void_p

    def quantize(name: str, x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
        if name == "Q8_K":
            out = np.zeros(x.size // 256 * 292, np.uint8)
            lib.quantize_row_q8_K_ref(void(x.ctypes.data), void(out.ctypes.data), ctypes.c_int64(x.size))
            return out
        return oracle.quantize(TYPES[name][0], x, imatrix)

    def dequantize(name: str, raw: np.ndarray, n: int) -> np.ndarray:
        if name == "Q8_K":
            out = np.empty(n, np.float32)
            raw = np.ascontiguousarray(raw)
            lib.dequantize_row_q8_K(void(raw.ctypes.data), void(out.ctypes.data), ctypes.c_int64(n))
            return out
        return oracle.dequantize(TYPES[name][0], raw, n)

    rng = np.random.default_rng(SEED)
    cases = inputs(rng)
    out_dir.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for case, (x, im) in cases.items():
        arrays[f"{case}.input"] = x
        arrays[f"{case}.imatrix"] = im
    np.savez_compressed(out_dir / "inputs.npz", **arrays)

    for name, (_, type_size, block, scale_offsets) in TYPES.items():
        arrays = {}
        for case, (x, im) in cases.items():
            arrays[f"{case}.quantized"] = quantize(name, x, None)
            if name not in NO_IMATRIX:
                arrays[f"{case}+imatrix.quantized"] = quantize(name, x, im)
        if name != "Q8_1":  # ggml has no to_float for Q8_1
            n_blocks = max(16, 4096 // block)
            raw = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
            arrays["random_bytes.quantized"] = raw.reshape(-1)
            arrays["random_bytes.dequantized"] = dequantize(name, raw, n_blocks * block)
            special = raw.copy()
            for off in scale_offsets:
                special[:, off : off + 2] = rng.choice(SPECIAL_HALVES, n_blocks).view(np.uint8).reshape(-1, 2)
            if name == "Q8_K":
                special[:, :4] = rng.choice(SPECIAL_FLOATS, n_blocks).view(np.uint8).reshape(-1, 4)
            arrays["special_scales.quantized"] = special.reshape(-1)
            arrays["special_scales.dequantized"] = dequantize(name, special, n_blocks * block)
        np.savez_compressed(out_dir / f"{name}.npz", **arrays)
        print(name, sum(a.nbytes for a in arrays.values()), "bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "ggml_extra")
