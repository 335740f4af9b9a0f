"""Legacy block types (Q4_0 … Q8_1, Q1_0, Q2_0): exact against ggml, sane on arbitrary input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weightkit import quant
from weightkit.dtypes import ggml_type

from ._reference import extra_problems, fixture_problems, round_trip_sample, worst_relative_error

WITH_FIXTURES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q1_0"]
ALL = [*WITH_FIXTURES, "Q2_0"]
# Worst |error| / max|x| over a block. The reference quantizers stay within half a step (Q4_0 and Q5_0
# lose one level at the positive end, Q1_0 keeps only signs); weighted fits may clip harder.
BOUND = {"Q4_0": 0.13, "Q4_1": 0.07, "Q5_0": 0.065, "Q5_1": 0.036, "Q8_0": 0.0045, "Q8_1": 0.0045}
BOUND |= {"Q1_0": 1.0, "Q2_0": 0.51}
IMATRIX_BOUND = {"Q4_0": 0.3, "Q4_1": 0.3, "Q5_0": 0.15, "Q5_1": 0.15}


@pytest.mark.parametrize("name", WITH_FIXTURES)
def test_matches_ggml_fixtures(ggml_fixtures, name):
    assert fixture_problems(ggml_fixtures, name) == {}


@pytest.mark.parametrize("name", ALL)
def test_matches_extra_ggml_vectors(name):
    """imatrix paths, Q2_0, a single row, and scales that decode to inf/NaN/subnormals."""
    assert extra_problems(name) == {}


def test_q8_1_dequantizes_as_scale_times_code():
    """ggml has no to_float for Q8_1; the block means d * q (s is only a dot-product helper)."""
    x = np.linspace(-3, 5, 64, dtype=np.float32).reshape(1, 64)
    raw = quant.quantize(x, "Q8_1").reshape(2, 36)
    d = raw[:, :2].view(np.float16).astype(np.float32)
    want = raw[:, 4:].view(np.int8) * d
    assert np.array_equal(quant.dequantize(raw, "Q8_1", (64,)).reshape(2, 32), want)


def test_q8_1_stores_scaled_code_sum():
    x = np.random.default_rng(3).standard_normal((2, 64)).astype(np.float32)
    raw = quant.quantize(x, "Q8_1").reshape(-1, 36)
    d = np.abs(x.reshape(-1, 32)).max(axis=1) / np.float32(127)  # before its float16 store, as ggml does
    codes = raw[:, 4:].view(np.int8).astype(np.int32)
    want = (codes.sum(axis=1).astype(np.float32) * d).astype(np.float16)
    assert np.array_equal(raw[:, 2:4].view(np.float16)[:, 0], want)


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    rows=st.integers(1, 3),
    blocks=st.integers(1, 4),
    scale=st.sampled_from([1e-2, 1.0, 300.0]),
    zeros=st.sampled_from([0.0, 0.5]),
    weighted=st.booleans(),
)
def test_round_trip_error_is_bounded(name, seed, rows, blocks, scale, zeros, weighted):
    block = ggml_type(name).block_size
    x, imatrix = round_trip_sample(seed, rows, blocks * block, scale, zeros, weighted)
    bound = IMATRIX_BOUND.get(name, BOUND[name]) if weighted else BOUND[name]
    assert worst_relative_error(x, name, imatrix, block) <= bound
