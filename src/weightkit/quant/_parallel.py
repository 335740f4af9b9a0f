"""One shared thread pool for the kernels: numpy releases the GIL, so threads use every core."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

T = TypeVar("T")

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


def map_chunks(fn: Callable[[T], None], items: Iterable[T]) -> None:
    """Call `fn(item)` for every item, on every worker thread when there is more than one item.

    The threads (this one included) take items from one shared queue until it is empty, so hundreds of
    small items cost no more hand-offs than a few large ones. Called from inside a task, it runs serially:
    the pool's threads are busy with the outer call.
    """
    global _pool
    items = list(items)
    n = min(workers(), len(items))
    if n <= 1 or getattr(_local, "in_task", False):
        for item in items:
            fn(item)
        return
    if _pool is None or _pool._max_workers != workers() - 1:
        _pool = ThreadPoolExecutor(max_workers=workers() - 1, thread_name_prefix="weightkit")
    queue = iter(items)
    lock = threading.Lock()

    def drain() -> None:
        _local.in_task = True
        try:
            while (item := _next(queue, lock)) is not _DONE:
                fn(item)
        finally:
            _local.in_task = False

    helpers = [_pool.submit(drain) for _ in range(n - 1)]
    try:
        drain()
    finally:
        errors = [future.exception() for future in helpers]  # waits: no helper still writes when we return
    for error in errors:
        if error is not None:
            raise error


def _next(queue, lock: threading.Lock):
    with lock:
        return next(queue, _DONE)


_DONE = object()


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


def readonly(a: np.ndarray) -> np.ndarray:
    """Freeze a module-level table: kernels run on many threads and must never write to shared state."""
    a.flags.writeable = False
    return a


_iota = readonly(np.arange(0))


def iota(n: int) -> np.ndarray:
    """np.arange(n) as a read-only view of one shared array, grown when a longer one is asked for: big
    searches want it on every call, and a fresh one page-faults each time."""
    global _iota
    ramp = _iota
    if len(ramp) < n:
        ramp = _iota = readonly(np.arange(max(n, 2 * len(ramp))))
    return ramp[:n]
