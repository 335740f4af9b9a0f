"""The byte-shuffling helpers every kernel builds on: cutting fields out of blocks and packing them back."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from weightkit.quant._block_layout import bitfields, block_bytes, packfields
from weightkit.quant._parallel import Scratch
from weightkit.quant._scale_search import abs_max_rows, row_min_max, signed_absmax

# (shifts, mask) of the layouts ggml uses: nibbles, 2-bit fields, bit planes.
LAYOUTS = [((0, 4), 0x0F), ((0, 2, 4, 6), 0x03), (tuple(range(8)), 0x01)]


@given(
    layout=st.sampled_from(LAYOUTS),
    n=st.integers(1, 40),
    run=st.sampled_from([8, 16, 32, 64]),
    seed=st.integers(0, 2**32 - 1),
)
def test_bitfields_cut_every_field_and_packfields_puts_them_back(layout, n, run, seed):
    shifts, mask = layout
    data = np.random.default_rng(seed).integers(0, 256, (n, run), dtype=np.uint8)
    with Scratch() as scratch:
        fields = bitfields(data, shifts, mask, scratch=scratch)
        expected = np.stack([(data >> s) & mask for s in shifts], axis=1)
        assert np.array_equal(fields, expected)
        assert np.array_equal(packfields(fields.copy(), shifts), data)


@given(
    n=st.integers(0, 50),
    size=st.integers(1, 40),
    data=st.data(),
)
def test_block_bytes_copies_a_slice_of_every_block(n, size, data):
    start = data.draw(st.integers(0, size - 1))
    stop = data.draw(st.integers(start + 1, size))
    blocks = np.random.default_rng(n * size).integers(0, 256, (n, size), dtype=np.uint8)
    fields = block_bytes(blocks[:, start:stop])
    assert fields.flags.c_contiguous and fields.dtype == np.uint8
    assert np.array_equal(fields, blocks[:, start:stop])


def test_block_bytes_takes_fields_that_are_not_a_slice_of_blocks():
    blocks = np.arange(60, dtype=np.uint8).reshape(6, 10)
    every_other = blocks[:, ::2]
    assert np.array_equal(block_bytes(every_other), every_other)


def _ggml_min_max(row: np.ndarray) -> tuple[float, float]:
    """ggml's Q4_1/Q5_1 loop: `if (v < min) min = v; if (v > max) max = v;` from FLT_MAX / -FLT_MAX."""
    lo, hi = np.finfo(np.float32).max, np.finfo(np.float32).min
    for v in row:
        lo, hi = (v if v < lo else lo), (v if v > hi else hi)
    return lo, hi


def _ggml_signed_absmax(row: np.ndarray) -> tuple[float, float]:
    """ggml's loop: `if (amax < fabsf(v)) {amax = fabsf(v); max = v;}` from amax = max = 0."""
    amax = best = np.float32(0)
    for v in row:
        if amax < abs(v):
            amax, best = abs(v), v
    return amax, best


# Values chosen so that rows hold ties of equal magnitude and opposite sign, signed zeros and subnormals.
_VALUES = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3e38, -3e38, 1e-45, -1e-45, 7.0, -7.0], np.float32)


@given(
    width=st.sampled_from([1, 2, 8, 16, 32, 256, 12]),  # 12: not a power of two, numpy's own reduction
    n=st.integers(1, 30),
    seed=st.integers(0, 2**32 - 1),
)
def test_row_reductions_follow_ggml_loops(width, n, seed):
    rng = np.random.default_rng(seed)
    # All the values (ties of +a and -a), or signed zeros and a few others (rows of zeros only, rows whose
    # min or max is a zero of either sign).
    pool = _VALUES if seed % 4 == 1 else np.concatenate([_VALUES[:2], rng.choice(_VALUES[2:], size=seed % 3)])
    x = rng.choice(pool, size=(n, width)) if seed % 2 else rng.standard_normal((n, width)).astype(np.float32)
    amax, signed = signed_absmax(x, axis=1)
    expected = np.array([_ggml_signed_absmax(row) for row in x], np.float32)
    assert np.array_equal(amax.view(np.uint32), expected[:, 0].view(np.uint32))
    assert np.array_equal(signed.view(np.uint32), expected[:, 1].view(np.uint32))
    assert np.array_equal(abs_max_rows(x).view(np.uint32), expected[:, 0].view(np.uint32))
    lo, hi = row_min_max(x)
    expected = np.array([_ggml_min_max(row) for row in x], np.float32)
    assert np.array_equal(lo.view(np.uint32), expected[:, 0].view(np.uint32))
    assert np.array_equal(hi.view(np.uint32), expected[:, 1].view(np.uint32))
