"""MXFP4 and NVFP4 against llama.cpp's ggml, bit for bit, plus properties of the formats themselves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from weightkit import quant
from weightkit.dtypes import ggml_type

from ._reference import dequantize_silently, same_bits

TYPES = ("MXFP4", "NVFP4")
KVALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12], dtype=np.float64)


@pytest.mark.parametrize("qtype", TYPES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_dequantize_accepts_any_bytes(qtype: str, data: st.DataObject) -> None:
    info = ggml_type(qtype)
    n_blocks = data.draw(st.integers(1, 8))
    raw = data.draw(st.binary(min_size=n_blocks * info.type_size, max_size=n_blocks * info.type_size))
    out = dequantize_silently(np.frombuffer(raw, np.uint8), qtype, (n_blocks * info.block_size,))
    assert out.dtype == np.float32 and out.shape == (n_blocks * info.block_size,)
    assert not np.isnan(out).any()  # neither format has NaN codes or scales in ggml


def block_grids(qtype: str, raw: np.ndarray) -> tuple[np.ndarray, int]:
    """The scale of every (sub-)block, decoded from the format's definition, and the (sub-)block size."""
    info = ggml_type(qtype)
    blocks = raw.reshape(-1, info.type_size)
    if qtype == "MXFP4":
        return np.exp2(blocks[:, 0].astype(np.float64) - 128), 32
    code = blocks[:, :4].reshape(-1).astype(np.int64)
    exp, man = code >> 3 & 15, code & 7
    value = np.where(exp == 0, man / 512, (1 + man / 8) * np.exp2(exp - 7.0))
    return np.where(code == 0x7F, 0, value) / 2, 16


finite_rows = hnp.arrays(
    np.float32,
    st.tuples(st.integers(1, 3), st.sampled_from([64, 128])),
    elements=st.floats(-1e4, 1e4, width=32),
)


@pytest.mark.parametrize("qtype", TYPES)
@settings(max_examples=80, deadline=None)
@given(x=finite_rows, scale=st.sampled_from([1.0, 1e-3, 37.0]))
def test_round_trip_picks_the_nearest_grid_point(qtype: str, x: np.ndarray, scale: float) -> None:
    """Every value decodes to the nearest point of its block's grid (±kvalue × scale)."""
    x = (x * np.float32(scale)).astype(np.float32)
    raw = quant.quantize(x, qtype)
    y = quant.dequantize(raw, qtype, x.shape).astype(np.float64)
    d, sub = block_grids(qtype, raw)
    xs = x.astype(np.float64).reshape(-1, sub)
    grid = KVALUES[None, :] * d[:, None]
    nearest = np.abs(np.abs(xs)[:, :, None] - grid[:, None, :]).min(axis=2)
    err = np.abs(xs - y.reshape(-1, sub))
    assert np.all(err <= nearest * (1 + 2.0**-20))
    # Where the scale is in range (not denormal, not at UE4M3's floor or ceiling) the error is bounded.
    amax = np.abs(xs).max(axis=1, keepdims=True)
    lo, hi = (2.0**-100, np.inf) if qtype == "MXFP4" else (6 * 2.0**-6, 6 * 448)
    ordinary = (amax >= lo) & (amax <= hi)
    assert np.all(err[ordinary[:, 0]] <= amax[ordinary][:, None] / 2)


@pytest.mark.parametrize("qtype", TYPES)
def test_zero_blocks_stay_zero(qtype: str) -> None:
    x = np.zeros((2, 256), np.float32)
    x[1] = -0.0
    raw = quant.quantize(x, qtype)
    assert not raw.any()
    assert same_bits(quant.dequantize(raw, qtype, x.shape), np.zeros_like(x))
