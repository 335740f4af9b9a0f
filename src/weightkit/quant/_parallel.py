"""One shared thread pool for the kernels: numpy releases the GIL, so threads use every core."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
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
    if n <= 1 or in_task():
        for item in items:
            fn(item)
        return
    if _pool is None or _pool._max_workers != workers() - 1:
        _pool = ThreadPoolExecutor(max_workers=workers() - 1, thread_name_prefix="weightkit")
    queue = iter(items)
    lock = threading.Lock()

    def drain() -> None:
        with serial():
            while (item := _next(queue, lock)) is not _DONE:
                fn(item)

    helpers = [_pool.submit(drain) for _ in range(n - 1)]
    try:
        drain()
    finally:
        errors = [future.exception() for future in helpers]  # waits: no helper still writes when we return
    for error in errors:
        if error is not None:
            raise error


def in_task() -> bool:
    """Is this thread running one task of a parallel call? (Then work it starts runs on it alone.)"""
    return getattr(_local, "in_task", False)


@contextmanager
def serial() -> Iterator[None]:
    """Within the block, this thread runs one task of a parallel call: nested parallel calls run serially."""
    outer = in_task()
    _local.in_task = True
    try:
        yield
    finally:
        _local.in_task = outer


def _next(queue, lock: threading.Lock):
    with lock:
        return next(queue, _DONE)


_DONE = object()


class _Arena(threading.local):
    """One thread's scratch memory: for each nesting depth of open `Scratch` blocks, the buffers that blocks
    at that depth hand out, in the order they ask for them."""

    def __init__(self) -> None:
        self.levels: list[list[np.ndarray]] = []
        self.depth = 0


_arena = _Arena()
_NO_BUFFER = np.empty(0, np.uint8)


class Scratch:
    """Uninitialized arrays for the body of one `with Scratch() as s:` block, in memory the calling thread
    reuses from call to call.

    glibc hands large freed blocks back to the OS, so a fresh temporary page-faults on every call, which
    can cost more than the arithmetic on it. Kernels take their big per-chunk temporaries from here instead.

    No two arrays in use at once share memory: each `empty` call of a block gets a buffer of its own, and a
    block opened inside another (a callee's) draws from buffers of its own. The memory is handed out again
    once the block ends, so an array must not outlive its block (return a copy); asking for one after the
    block ended, or from another thread, raises.
    """

    __slots__ = ("_buffers", "_depth", "_taken", "_thread")

    def __init__(self) -> None:
        self._buffers: list[np.ndarray] | None = None

    def __enter__(self) -> Scratch:
        if self._buffers is not None:
            raise RuntimeError("this Scratch block is already open")
        arena = _arena
        self._depth = arena.depth
        if self._depth == len(arena.levels):
            arena.levels.append([])
        self._buffers = arena.levels[self._depth]
        self._taken = 0
        self._thread = threading.get_ident()
        arena.depth = self._depth + 1
        return self

    def __exit__(self, *exc_info: object) -> None:
        _arena.depth = self._depth
        self._buffers = None

    def empty(self, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An uninitialized array of `shape` and `dtype`, valid until the block ends."""
        buffers = self._buffers
        if buffers is None or threading.get_ident() != self._thread:
            raise RuntimeError("scratch arrays are handed out only inside their block, on the thread that opened it")
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        i = self._taken
        self._taken = i + 1
        if i == len(buffers):
            buffers.append(_NO_BUFFER)
        buf = buffers[i]
        if buf.size < nbytes:
            buf = buffers[i] = np.empty(nbytes, np.uint8)
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
