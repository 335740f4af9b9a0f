"""One shared thread pool for the kernels: numpy releases the GIL, so threads use every core."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

_pool: ThreadPoolExecutor | None = None


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
