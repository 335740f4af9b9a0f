"""Make the extra IQ reference vectors in tests/data/ggml_iq_extra/ with llama.cpp's own ggml.

The fixtures in tests/data/ggml quantize each IQ type one way only (with an imatrix for the types that require
one, without for the others) and their random-byte blocks happen to hold only finite scales. These
vectors add what they miss: both quantizer paths wherever ggml accepts both, inputs that reach
ggml's corner cases (all-zero groups, ties, parity flips, tiny and huge magnitudes, other row
lengths), and blocks whose f16 scales are NaN, infinite, zero or subnormal.

Needs llama-cpp-python (it compiles llama.cpp); the oracle is tools/ggml_oracle.py:

    python tests/data/make_ggml_iq_extra.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "ggml_iq_extra"
TYPES = {
    "IQ2_XXS": 16, "IQ2_XS": 17, "IQ3_XXS": 18, "IQ1_S": 19, "IQ4_NL": 20,
    "IQ3_S": 21, "IQ2_S": 22, "IQ4_XS": 23, "IQ1_M": 29,
}  # fmt: skip
SEED = 20240611
# f16 scales that decode to specials: NaNs (quiet, signalling, either sign), infinities, zeros,
# subnormals, the largest finite values and 1.
SPECIAL_F16 = [0x7E00, 0xFE00, 0x7C01, 0xFD55, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0xFBFF, 0x3C00]


def inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Rows of 512 (and one set of 768) weights, each aimed at a corner of the quantizers."""
    r, c = 4, 512
    g = rng.standard_normal((r, c)).astype(np.float32)
    holes16 = g.copy().reshape(r, -1, 16)
    holes16[rng.random(holes16.shape[:2]) < 0.3] = 0  # whole IQ2_XS/IQ2_S/IQ1_M groups at zero
    holes32 = (rng.standard_normal((r, c)) * 0.1).astype(np.float32).reshape(r, -1, 32)
    holes32[rng.random(holes32.shape[:2]) < 0.3] = 0  # IQ3_S skips zero groups without advancing
    return {
        "gaussian": g,
        "student_t": (rng.standard_t(3, (r, c)) * 0.02).astype(np.float32),
        "holes16": holes16.reshape(r, c),
        "holes32": holes32.reshape(r, c),
        # equal magnitudes: odd sign counts flip large weights, make_qp_quants sees negative levels
        "flat": (rng.choice([-1, 1], (r, c)) * rng.uniform(0.9, 1.1, (r, c))).astype(np.float32),
        "ties": np.round(rng.standard_normal((r, c)) * 2).astype(np.float32),
        "tiny": (rng.standard_normal((r, c)) * np.logspace(-12, -6, r)[:, None]).astype(np.float32),
        "huge": (rng.standard_normal((r, c)) * 3e4).astype(np.float32),
        "rows768": rng.standard_normal((3, 768)).astype(np.float32),
    }


def special_blocks(rng: np.random.Generator, name: str, type_size: int, n_blocks: int) -> np.ndarray:
    """Random blocks whose f16 scale cycles through SPECIAL_F16 (every other block keeps a random one)."""
    raw = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    scale = np.array([SPECIAL_F16[i // 2 % len(SPECIAL_F16)] for i in range(0, n_blocks, 2)], dtype=np.uint16)
    if name == "IQ1_M":  # the scale lives in the top nibbles of the 4 uint16 group-scale words
        for k, byte in enumerate((49, 51, 53, 55)):
            raw[::2, byte] = (raw[::2, byte] & 0x0F) | (((scale >> (4 * k)) & 15) << 4).astype(np.uint8)
    else:
        raw[::2, 0:2] = scale.astype("<u2").view(np.uint8).reshape(-1, 2)
    return raw


def main() -> None:
    sys.path.insert(0, str(HERE.parents[1] / "tools"))
    import ggml_oracle as o

    rng = np.random.default_rng(SEED)
    xs = inputs(rng)
    imatrix = {n: rng.uniform(0.1, 2.0, n).astype(np.float32) for n in (512, 768)}
    OUT.mkdir(exist_ok=True)
    np.savez_compressed(OUT / "inputs.npz", **xs, **{f"imatrix{n}": im for n, im in imatrix.items()})
    for name, t in TYPES.items():
        tr = o.traits(t)
        arrays = {}
        modes = ["im"] if o.requires_imatrix(t) else ["none", "im"]
        for case, x in xs.items():
            for mode in modes:
                im = imatrix[x.shape[1]] if mode == "im" else None
                arrays[f"{case}.{mode}"] = o.quantize(t, x, im).reshape(len(x), -1)
        n_blocks = 8192 // tr.blck_size
        raw = special_blocks(rng, name, tr.type_size, n_blocks)
        arrays["special.raw"] = raw
        arrays["special.dequantized"] = o.dequantize(t, raw, n_blocks * tr.blck_size).reshape(n_blocks, -1)
        np.savez_compressed(OUT / f"{name}.npz", **arrays)
        print(name, sorted(arrays))


if __name__ == "__main__":
    main()
