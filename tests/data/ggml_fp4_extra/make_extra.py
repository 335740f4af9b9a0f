"""Make the extra ggml reference vectors in this folder: edge cases the fixtures in tests/data/ggml rarely or never hit.

Run with llama-cpp-python installed (its ggml is the reference), from the repo root:
    python tests/data/ggml_fp4_extra/make_extra.py
It writes `inputs.npz` (float32 rows of 256 per case, quantized to every type) and `<TYPE>.npz` for MXFP4,
NVFP4, TQ1_0 and TQ2_0 with, per case, `<case>.quantized` (what `ggml_quantize_chunk` wrote) and
`<case>.dequantized` (ggml's `to_float` of it), plus `codes.quantized` / `codes.dequantized`: hand-made
blocks covering every scale byte and code.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "tools"))
import ggml_oracle  # noqa: E402

TYPES = {"MXFP4": 39, "NVFP4": 40, "TQ1_0": 34, "TQ2_0": 35}
F32 = np.float32
KVALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12], F32)
MIDPOINTS = (KVALUES[1:] + KVALUES[:-1]) / 2


def ulps(v: float, n: int) -> np.ndarray:
    """`v` and its n float32 neighbours on each side."""
    bits = np.array(v, F32).view(np.int32) + np.arange(-n, n + 1, dtype=np.int32)
    return bits.view(F32)


def specials(rng: np.random.Generator) -> list[np.ndarray]:
    """Rows of 256 that every type should survive: zeros, denormals, huge values, inf and NaN."""
    g = rng.standard_normal(256).astype(F32)
    rows = [np.zeros(256, F32), np.full(256, -0.0, F32)]
    rows.append((rng.choice([-1, 1], 256) * 2.0 ** rng.uniform(-149, -126, 256)).astype(F32))
    rows.append(np.where(np.arange(256) == 7, F32(2.0**-149), F32(0)))
    for big in (3.4e38, -3.4e38, 1e30, 2.0**127, 65504.0, 65520.0, 1e6):
        r = g.copy()
        r[rng.integers(0, 256, 3)] = big
        rows.append(r)
    for special in (np.inf, -np.inf, np.nan):
        for where in (0, 5, 31, 63, 200, 255):
            r = g.copy()
            r[where] = special
            rows.append(r)
    r = g.copy()
    r[[3, 100, 255]] = [np.nan, 40.0, np.nan]
    rows.append(r)
    r = g.copy()
    r[[3, 100]] = [np.nan, np.inf]
    rows.append(r)
    rows.append(np.full(256, np.nan, F32))
    rows.append(np.full(256, np.inf, F32))
    rows.append(g * F32(1e-30))
    rows.append(g * F32(1e-40))
    return rows


def pow2_bits(k: int) -> int:
    """The float32 bit pattern of 2**k (2**128 gives inf's)."""
    return (k + 127) << 23 if k >= -126 else 1 << (k + 149)


def log2f_thresholds() -> list[float]:
    """For each binade [2**(k-1), 2**k), the smallest float32 whose floorf(log2f()) is already k (glibc's
    log2f rounds up to the integer just below powers of two), where there is one."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    libm.log2f.restype, libm.log2f.argtypes = ctypes.c_float, [ctypes.c_float]
    out = []
    for k in range(-148, 129):
        lo, hi = pow2_bits(k - 1), pow2_bits(k)
        while lo < hi:  # first bit pattern whose log2f floors to k
            mid = (lo + hi) // 2
            if np.floor(libm.log2f(float(np.array(mid, np.uint32).view(F32)))) >= k:
                hi = mid
            else:
                lo = mid + 1
        if lo < pow2_bits(k):
            out.append(float(np.array(lo, np.uint32).view(F32)))
    return out


def mxfp4_rows(rng: np.random.Generator) -> list[np.ndarray]:
    """Block maxima at and just below powers of two and at the points from which log2f rounds up to the
    power, and values on the midpoints."""
    blocks = []
    for threshold in log2f_thresholds():
        for amax in ulps(threshold, 1):
            b = np.zeros(32, F32)
            b[rng.integers(0, 32, 6)] = rng.uniform(-1, 1, 6) * amax
            b[rng.integers(0, 32)] = amax * rng.choice([-1, 1])
            blocks.append(b)
    for k in range(-149, 128):
        for amax in ulps(2.0**k, 2):
            if not np.isfinite(amax) or amax <= 0:
                continue
            b = np.zeros(32, F32)
            b[rng.integers(0, 32, 6)] = rng.uniform(-1, 1, 6) * amax
            b[rng.integers(0, 32)] = amax * rng.choice([-1, 1])
            blocks.append(b)
    top = np.finfo(F32).max  # log2f rounds it to 128: e = 253, and 8d, 12d overflow to inf
    for amax in ulps(float(top), 2)[:3]:
        fractions = np.array([1, -1, 0.99, -0.9, 0.8, 0.75, -0.7, 0.6, 0.5, 0.45, -0.3, 0.2, 0.1, 0.01], F32)
        b = np.zeros(32, F32)
        b[: fractions.size] = fractions * amax
        b[16:] = rng.uniform(-1, 1, 16) * amax
        blocks.append(b)
    for k in (-130, -126, -20, 0, 3, 50, 124):
        d = F32(2.0 ** (k - 3))
        vals = np.concatenate([ulps(float(m * d), 1) for m in MIDPOINTS])
        vals = np.concatenate([vals, -vals, ulps(float(12 * d), 1), ulps(float(15.99 * d), 1)])
        for start in range(0, vals.size, 31):
            b = np.zeros(32, F32)
            b[0] = F32(2.0**k)
            chunk = vals[start : start + 31]
            b[1 : 1 + chunk.size] = chunk
            blocks.append(b)
    return blocks


def nvfp4_rows(rng: np.random.Generator) -> list[np.ndarray]:
    """Sub-block maxima whose amax/6 sits on UE4M3 rounding boundaries, and values on the grid midpoints."""
    targets = [(m + 0.5) / 512 for m in range(9)]  # subnormal scales (and the cap at mantissa 7)
    targets += [(1 + m / 8 + 1 / 16) * 2.0**e for e in range(-6, 9) for m in range(8)]
    targets += [240.0, 256.0, 300.0, 447.0, 448.0, 449.0, 480.0, 1e4, 2.0**-6, 2.0**-7]
    blocks = []
    for t in targets:
        for amax in ulps(float(F32(t) * F32(6)), 2):
            b = np.zeros(16, F32)
            b[rng.integers(0, 16, 4)] = rng.uniform(-1, 1, 4) * amax
            b[rng.integers(0, 16)] = amax
            blocks.append(b)
    for amax in (6.0, 0.75, 1e-3, 3000.0):
        s = float(F32(amax) / F32(6))
        d = F32(s / 2)  # exact when amax/6 is a UE4M3 value
        vals = np.concatenate([ulps(float(m * d), 1) for m in MIDPOINTS])
        vals = np.concatenate([vals, -vals])
        for start in range(0, vals.size, 15):
            b = np.zeros(16, F32)
            b[0] = amax
            chunk = vals[start : start + 15]
            b[1 : 1 + chunk.size] = chunk
            blocks.append(b)
    return blocks


def ternary_rows(rng: np.random.Generator) -> list[np.ndarray]:
    """Values exactly at half the block max (lroundf rounds half away from zero) and around it."""
    rows = []
    for amax in (1.0, 3.0, 0.1, 1e-7, 7e4, 1e-42):
        vals = np.concatenate([ulps(amax * 0.5, 2), -ulps(amax * 0.5, 2), ulps(amax, 1), -ulps(amax, 1)])
        r = rng.choice(vals, 256).astype(F32)
        r[0] = amax
        rows.append(r)
    return rows


def pad_rows(blocks: list[np.ndarray]) -> np.ndarray:
    flat = np.concatenate(blocks)
    flat = np.concatenate([flat, np.zeros(-flat.size % 256, F32)])
    return flat.reshape(-1, 256)


def code_blocks(name: str) -> np.ndarray:
    """Blocks that cover every scale byte and every code in both nibbles or positions."""
    if name == "MXFP4":
        qs = np.arange(16) | ((15 - np.arange(16)) << 4)
        return np.column_stack([np.arange(256), np.tile(qs, (256, 1))]).astype(np.uint8)
    if name == "NVFP4":
        qs = np.tile(np.arange(16) | ((15 - np.arange(16)) << 4), 2)
        return np.column_stack([np.arange(256).reshape(64, 4), np.tile(qs, (64, 1))]).astype(np.uint8)
    size = {"TQ1_0": 52, "TQ2_0": 64}[name]
    scales = np.array([1.0, -2.5, 0.0, -0.0, 6e-8, 65504, np.inf, -np.inf, np.nan], np.float16)
    d = scales[np.arange(256) % scales.size].view(np.uint8).reshape(256, 2)
    return np.column_stack([np.repeat(np.arange(256, dtype=np.uint8)[:, None], size, axis=1), d])


def main() -> None:
    rng = np.random.default_rng(20260821)
    edge_inputs = {
        "specials": np.stack(specials(rng)),
        "ternary_ties": np.stack(ternary_rows(rng)),
        "mxfp4_scales": pad_rows(mxfp4_rows(rng)),
        "nvfp4_scales": pad_rows(nvfp4_rows(rng)),
    }
    np.savez_compressed(HERE / "inputs.npz", **edge_inputs)
    for name, t in TYPES.items():
        arrays = {}
        for case, x in edge_inputs.items():
            q = ggml_oracle.quantize(t, x)
            arrays[f"{case}.quantized"] = q
            arrays[f"{case}.dequantized"] = ggml_oracle.dequantize(t, q, x.size).reshape(x.shape)
        raw = code_blocks(name)
        n = raw.shape[0] * ggml_oracle.traits(t).blck_size
        arrays["codes.quantized"] = raw.reshape(-1)
        arrays["codes.dequantized"] = ggml_oracle.dequantize(t, raw.reshape(-1), n)
        np.savez_compressed(HERE / f"{name}.npz", **arrays)


if __name__ == "__main__":
    main()
