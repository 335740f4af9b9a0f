"""Scalar helpers of ggml's quantizers, vectorized with ggml's exact float32 rounding.

ggml-quants.c is compiled without FMA or fast-math, so every `a*b + c` there rounds twice and every
`sum += ...` loop adds strictly left to right; these helpers keep both properties.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32
_MAGIC = F32(12582912.0)  # 1.5 * 2**23: adding it leaves round-half-even(x) in the low mantissa bits


def nearest_int(x: np.ndarray) -> np.ndarray:
    """ggml's `nearest_int`: round half to even through the 1.5*2**23 trick (int32; garbage, as in
    ggml, for |x| > 2**22)."""
    bits = (np.asarray(x, dtype=F32) + _MAGIC).view(np.int32)
    return (bits & 0x007FFFFF) - 0x00400000


def sequential_sum(terms: np.ndarray, axis: int = -1) -> np.ndarray:
    """Sum along `axis` strictly in order in float32, like a C `float s = 0; for (...) s += t[i];`
    loop (`np.sum` would use pairwise summation and round differently; the final `+ 0` turns an
    all-negative-zero sum into +0, as starting from 0 does)."""
    return np.add.accumulate(terms, axis=axis, dtype=F32).take(-1, axis=axis) + F32(0)


def fp16_bits(x: np.ndarray) -> np.ndarray:
    """GGML_FP32_TO_FP16 (round to nearest even), as the uint16 bit pattern."""
    return np.asarray(x, dtype=F32).astype(np.float16).view(np.uint16)


def best_index(values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """ggml's `best_index_int8`: index of the entry of the sorted table `values` (float32) nearest
    to `x`, ties (and NaN) going up, below/above the ends clamped. Returns uint8."""
    mu = np.clip(np.searchsorted(values, x, side="right"), 1, len(values) - 1)
    below = x - values[mu - 1] < values[mu] - x
    idx = (mu - below).astype(np.uint8)
    idx[x <= values[0]] = 0
    idx[x >= values[-1]] = len(values) - 1
    return idx
