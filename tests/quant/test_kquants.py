"""K-quants (Q2_K … Q8_K) and the shared scale-search helpers: exact against ggml, sane on arbitrary input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weightkit import quant
from weightkit.quant import _scale_search

from ._reference import extra_problems, fixture_problems, round_trip_sample, worst_relative_error

WITH_FIXTURES = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
ALL = [*WITH_FIXTURES, "Q8_K"]
# Worst |error| / max|x| over a super-block, measured on thousands of heavy-tailed samples, with margin
# (the searches and the quantized sub-block scales make these empirical rather than exact).
BOUND = {"Q2_K": 0.5, "Q3_K": 0.3, "Q4_K": 0.1, "Q5_K": 0.055, "Q6_K": 0.025, "Q8_K": 0.004}
IMATRIX_BOUND = {"Q2_K": 0.9, "Q3_K": 0.5, "Q4_K": 0.2, "Q5_K": 0.12, "Q6_K": 0.08}


@pytest.mark.parametrize("name", WITH_FIXTURES)
def test_matches_ggml_fixtures(ggml_fixtures, name):
    assert fixture_problems(ggml_fixtures, name) == {}


@pytest.mark.parametrize("name", ALL)
def test_matches_extra_ggml_vectors(name):
    """imatrix paths, Q8_K, a single row, and scales that decode to inf/NaN/subnormals."""
    assert extra_problems(name) == {}


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=10, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    rows=st.integers(1, 2),
    blocks=st.integers(1, 2),
    scale=st.sampled_from([1e-2, 1.0, 300.0]),
    zeros=st.sampled_from([0.0, 0.5]),
    weighted=st.booleans(),
)
def test_round_trip_error_is_bounded(name, seed, rows, blocks, scale, zeros, weighted):
    x, imatrix = round_trip_sample(seed, rows, blocks * 256, scale, zeros, weighted)
    bound = IMATRIX_BOUND.get(name, BOUND[name]) if weighted else BOUND[name]
    assert worst_relative_error(x, name, imatrix, 256) <= bound


def test_q8_k_block_sums():
    x = np.random.default_rng(5).standard_normal((1, 512)).astype(np.float32)
    raw = quant.quantize(x, "Q8_K").reshape(2, 292)
    codes = raw[:, 4:260].view(np.int8).astype(np.int16)
    assert np.array_equal(raw[:, 260:].view(np.int16), codes.reshape(2, 16, 16).sum(axis=2))


# ------------------------------------------------------------------------------------ shared helpers
@pytest.mark.parametrize("m", [1, 2, 3, 64])
@pytest.mark.parametrize("stacked", [False, True])
def test_seq_sum_adds_in_index_order(m, stacked):
    """Must equal a left-to-right float32 loop (numpy's pairwise summation would not)."""
    rng = np.random.default_rng(m)
    a = (rng.standard_normal((3, 32, m)) * np.exp(rng.uniform(-12, 12, (3, 32, m)))).astype(np.float32)
    want = a[:, 0].copy()
    for i in range(1, 32):
        want = want + a[:, i]
    got = _scale_search.seq_sum(a, axis=1) if stacked else np.stack([_scale_search.seq_sum(s) for s in a])
    assert np.array_equal(got, want)


@settings(max_examples=200, deadline=None)
@given(st.floats(-4194303, 4194303, width=32))
def test_nearest_int_rounds_half_to_even(v):
    assert _scale_search.nearest_int(np.array([v], np.float32))[0] == round(v)


def test_nearest_int_wraps_like_c_outside_its_range():
    v = np.array([2.0**23, -(2.0**23), np.inf, np.nan], np.float32)
    # 2^23 + 1.5*2^23 rounds to 5*2^22, whose low 23 mantissa bits are 2^21
    assert _scale_search.nearest_int(v).tolist() == [2**21 - 2**22, -(2**22), -(2**22), 0]


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e9, 1e9, width=32))
def test_roundf_rounds_half_away_from_zero(v):
    want = math.copysign(math.floor(abs(v) + 0.5), v)  # exact: a float32 plus 0.5 fits a double
    got = _scale_search.roundf(np.array([v], np.float32))[0]
    assert got == want


def test_roundf_ties():
    v = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.49999997], np.float32)
    assert _scale_search.roundf(v).tolist() == [1, 2, 3, -1, -3, 0, 0]
