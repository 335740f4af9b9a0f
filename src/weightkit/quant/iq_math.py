"""Scalar helpers of ggml's IQ quantizers, vectorized with ggml's exact float32 rounding (the rounding
primitives they share with the K-quants, such as `nearest_int`, are in `_scale_search`)."""

from __future__ import annotations

import numpy as np

from ._scale_search import F32


def fp16_bits(x: np.ndarray) -> np.ndarray:
    """GGML_FP32_TO_FP16 (round to nearest even), as the uint16 bit pattern."""
    return np.asarray(x, dtype=F32).astype(np.float16).view(np.uint16)


def best_index(values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """ggml's `best_index_int8`: index of the entry of the sorted table `values` (float32) nearest
    to `x`, ties (and NaN) going up, below/above the ends clamped. Returns uint8.

    ggml picks between neighbours a < b by `x - a < b - x`. For a table of integers (kvalues_iq4nl) both
    differences are exact wherever they are close, so that is `x < (a + b) / 2` exactly, and the index is
    the number of midpoints `x` is not below: one compare per midpoint over long arrays, far quicker than a
    per-value binary search (`searchsorted`). `not below` also sends NaN up, as C's does.
    """
    if not np.array_equal(values, np.round(values)):
        raise ValueError("best_index works on tables of integers")
    idx = np.full(np.shape(x), len(values) - 1, dtype=np.uint8)
    below = np.empty(np.shape(x), dtype=bool)
    for mid in (values[:-1] + values[1:]) * F32(0.5):
        np.less(x, mid, out=below)
        idx -= below.view(np.uint8)
    return idx
