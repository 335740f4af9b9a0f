"""Property tests of the IQ kernels: any bytes decode without error, and quantizing then decoding
stays within each type's usual error."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weightkit.dtypes import ggml_type
from weightkit.quant import dequantize, quantize

# relative RMS error of quantize -> dequantize on Gaussian rows (ggml's own quantizers land a bit
# below these: 0.08 for IQ4, 0.15-0.2 for IQ3, 0.26-0.36 for IQ2, 0.5-0.55 for IQ1)
ERROR_BOUND = {
    "IQ4_NL": 0.1,
    "IQ4_XS": 0.1,
    "IQ3_S": 0.21,
    "IQ3_XXS": 0.25,
    "IQ2_S": 0.31,
    "IQ2_XS": 0.36,
    "IQ2_XXS": 0.42,
    "IQ1_S": 0.6,
    "IQ1_M": 0.7,
}
NEEDS_IMATRIX = {"IQ2_XXS", "IQ2_XS", "IQ1_S"}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(ERROR_BOUND)),
    seed=st.integers(0, 2**32 - 1),
    log_scale=st.floats(-2, 4),  # below ~1e-3 the f16 block scales go subnormal and lose precision, as in ggml
    use_imatrix=st.booleans(),
)
def test_roundtrip_error(name: str, seed: int, log_scale: float, use_imatrix: bool) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((2, 512)) * 10.0**log_scale).astype(np.float32)
    imatrix = rng.uniform(0.1, 2, 512).astype(np.float32) if use_imatrix or name in NEEDS_IMATRIX else None
    y = dequantize(quantize(x, name, imatrix), name, x.shape)
    rel = np.sqrt(np.mean((y - x) ** 2, dtype=np.float64) / np.mean(x.astype(np.float64) ** 2))
    assert rel < ERROR_BOUND[name]


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(sorted(ERROR_BOUND)), data=st.data())
def test_quantize_degenerate_rows(name: str, data: st.DataObject) -> None:
    """Zeros, constants and sparse rows quantize without error, and zeros decode to zeros."""
    value = data.draw(st.sampled_from([0.0, 1.0, -3.5, 1e-20]))
    x = np.full((1, 256), value, dtype=np.float32)
    x[0, data.draw(st.integers(0, 255))] = data.draw(st.floats(-10, 10, width=32))
    q = quantize(x, name, np.ones(256, np.float32))
    assert q.size == ggml_type(name).nbytes(256)
    zeros = dequantize(quantize(np.zeros((1, 256), np.float32), name, np.ones(256, np.float32)), name, (256,))
    assert not zeros.any()
