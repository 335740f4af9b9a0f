"""The kernels' reusable scratch memory: arrays in use at the same time never share memory."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from weightkit.quant._block_layout import bitfields
from weightkit.quant._parallel import Scratch


def test_arrays_of_one_block_and_of_nested_blocks_never_overlap():
    with Scratch() as outer:
        a = outer.empty((1000,), np.float32)
        b = outer.empty((1000,), np.float32)
        with Scratch() as inner:  # a callee's block, while the caller's arrays are in use
            c = inner.empty((1000,), np.float32)
            d = inner.empty((250, 4), np.float32)
        e = outer.empty((10,), np.uint64)
        arrays = [a, b, c, d, e]
        for i, x in enumerate(arrays):
            for y in arrays[i + 1 :]:
                assert not np.shares_memory(x, y)


def test_the_next_block_reuses_the_memory():
    """What scratch is for: the same requests in the next call get the same (already touched) pages."""
    addresses = []
    for _ in range(3):
        with Scratch() as scratch:
            small = scratch.empty((10,), np.uint8)
            big = scratch.empty((1 << 20,), np.float32)
            addresses.append((small.ctypes.data, big.ctypes.data))
    assert addresses[0] == addresses[1] == addresses[2]


def test_two_live_results_of_one_helper_get_their_own_memory():
    """The mistake the old per-key scratch made easy: a kernel holding two results of one helper."""
    data = np.arange(64, dtype=np.uint8).reshape(2, 32)
    with Scratch() as scratch:
        low = bitfields(data, (0,), 0x0F, scratch=scratch)
        high = bitfields(data, (4,), 0x0F, scratch=scratch)
        assert not np.shares_memory(low, high)
        assert np.array_equal(low[:, 0], data & 0x0F) and np.array_equal(high[:, 0], data >> 4)


def test_asking_after_the_block_or_from_another_thread_raises():
    with Scratch() as scratch:
        errors = []

        def other_thread():
            try:
                scratch.empty((4,), np.uint8)
            except RuntimeError as e:
                errors.append(e)

        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert len(errors) == 1
    with pytest.raises(RuntimeError, match="only inside their block"):
        scratch.empty((4,), np.uint8)
    with pytest.raises(RuntimeError, match="already open"), scratch, scratch:
        pass


def test_each_thread_has_its_own_memory():
    addresses: dict[str, int] = {}
    barrier = threading.Barrier(2)

    def work(name: str) -> None:
        with Scratch() as scratch:
            addresses[name] = scratch.empty((1 << 16,), np.uint8).ctypes.data
            barrier.wait()  # both blocks open at once

    threads = [threading.Thread(target=work, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert addresses["a"] != addresses["b"]


def test_zero_sized_arrays():
    with Scratch() as scratch:
        assert scratch.empty((0, 3), np.uint64).shape == (0, 3)
