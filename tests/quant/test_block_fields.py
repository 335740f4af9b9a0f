"""The byte-shuffling helpers every kernel builds on: cutting fields out of blocks and packing them back."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from weightkit.quant._search import bitfields, block_bytes, packfields

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
    fields = bitfields(data, shifts, mask)
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
