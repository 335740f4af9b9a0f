"""TQ1_0 and TQ2_0 against llama.cpp's ggml, bit for bit, plus properties of the formats themselves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from weightkit import quant
from weightkit.dtypes import ggml_type

from ._reference import dequantize_silently, same_bits

TYPES = ("TQ1_0", "TQ2_0")


@pytest.mark.parametrize("qtype", TYPES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_dequantize_accepts_any_bytes(qtype: str, data: st.DataObject) -> None:
    info = ggml_type(qtype)
    n_blocks = data.draw(st.integers(1, 4))
    raw = data.draw(st.binary(min_size=n_blocks * info.type_size, max_size=n_blocks * info.type_size))
    out = dequantize_silently(np.frombuffer(raw, np.uint8), qtype, (n_blocks, info.block_size))
    assert out.dtype == np.float32 and out.shape == (n_blocks, info.block_size)
    d = np.frombuffer(raw, np.uint8).reshape(n_blocks, -1)[:, -2:].copy().view(np.float16).astype(np.float32)
    finite = np.isfinite(d[:, 0])
    # TQ1_0 decodes every byte to trits in {-1, 0, 1}; TQ2_0's 2-bit codes also reach 2.
    top = 1 if qtype == "TQ1_0" else 2
    assert np.all(np.abs(out[finite]) <= top * np.abs(d[finite]))


@pytest.mark.parametrize("qtype", TYPES)
@settings(max_examples=80, deadline=None)
@given(x=hnp.arrays(np.float32, st.tuples(st.integers(1, 3), st.just(256)), elements=st.floats(-1e4, 1e4, width=32)))
def test_round_trip_error_is_bounded(qtype: str, x: np.ndarray) -> None:
    """Each value becomes the nearest of {-1, 0, 1} x its block's max |x| (stored as f16)."""
    y = quant.dequantize(quant.quantize(x, qtype), qtype, x.shape).astype(np.float64)
    amax = np.abs(x).astype(np.float64).max(axis=1, keepdims=True)
    f16_error = np.maximum(amax * 2.0**-11, 2.0**-25)  # the scale's rounding to f16, normal or subnormal
    assert np.all(np.abs(x - y) <= amax * (0.5 + 2.0**-20) + f16_error)


@pytest.mark.parametrize("qtype", TYPES)
@settings(max_examples=60, deadline=None)
@given(
    trits=hnp.arrays(np.int8, st.tuples(st.integers(1, 3), st.just(256)), elements=st.integers(-1, 1)),
    scale=st.floats(1e-3, 1e3).map(lambda s: float(np.float16(s))),
)
def test_ternary_weights_survive_exactly(qtype: str, trits: np.ndarray, scale: float) -> None:
    trits[:, 0] = 1  # every block's max is then exactly `scale`, which f16 holds
    x = trits.astype(np.float32) * np.float32(scale)
    assert same_bits(quant.dequantize(quant.quantize(x, qtype), qtype, x.shape), x)
