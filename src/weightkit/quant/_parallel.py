"""One shared thread pool for the kernels: numpy releases the GIL, so threads use every core."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_pool: ThreadPoolExecutor | None = None
_local = threading.local()


def workers() -> int:
    """Threads to use: WEIGHTKIT_THREADS if set, else every core this process may run on."""
    env = os.environ.get("WEIGHTKIT_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def map_chunks(fn: Callable[[int], None], starts: Sequence[int]) -> None:
    """Call `fn(start)` for every start, in parallel when there is more than one chunk."""
    global _pool
    n = workers()
    if len(starts) <= 1 or n == 1:
        for s in starts:
            fn(s)
        return
    if _pool is None or _pool._max_workers != n:
        _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="weightkit")
    for future in [_pool.submit(fn, s) for s in starts]:
        future.result()


def scratch(key: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialized array owned by the calling thread, reusing the memory of its last `key` request.

    glibc hands large freed blocks back to the OS, so a fresh temporary page-faults on every call (in this
    VM that costs more than the arithmetic on it, and how much depends on what ran before). Kernels keep
    their big per-chunk temporaries here instead. The array stays valid until the same thread asks for
    `key` again, so each call site uses its own key.
    """
    buffers = _local.__dict__.setdefault("buffers", {})
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    buf = buffers.get(key)
    if buf is None or buf.size < nbytes:
        buf = buffers[key] = np.empty(max(nbytes, 1), np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)
