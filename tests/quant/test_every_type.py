"""Properties every quantizable GGML type must have, whatever its family."""

from __future__ import annotations

import numpy as np
import pytest

from weightkit import quant

TYPES = sorted(t.name for t in quant.QUANTIZERS)
ONES = np.ones(512, np.float32)  # an importance matrix, for the types ggml cannot quantize without one


@pytest.mark.parametrize("name", TYPES)
def test_non_finite_input_does_not_crash(name):
    """ggml gives no meaningful bytes for inf/NaN input either; it only must not raise."""
    x = np.random.default_rng(0).standard_normal((2, 512)).astype(np.float32)
    x[0, ::7], x[0, 3::7], x[1, 5::11], x[1, 1::13] = np.inf, -np.inf, np.nan, 3e38
    raw = quant.quantize(x, name, ONES)
    assert quant.dequantize(raw, name, x.shape).shape == x.shape


@pytest.mark.parametrize("name", TYPES)
def test_all_zero_rows_round_trip_to_zero(name):
    x = np.zeros((2, 512), np.float32)
    assert not quant.dequantize(quant.quantize(x, name, ONES), name, x.shape).any()
