"""Shared bits of the benchmark scripts: the real test model, and best-of-N timing."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path


def gemma_path() -> Path:
    """The real Gemma 3 270M Q4_K_M GGUF, assembled once from its PyPI package into weightkit's cache."""
    from weightkit.cli.demo import demo_model_path

    return demo_model_path()


def best_of(fn: Callable[[], object], repeat: int, before: Callable[[], None] | None = None) -> tuple[float, object]:
    """The fastest of `repeat` runs in seconds (the least disturbed by the rest of the machine), and the
    last run's result. With `before`, the last result is dropped and `before()` runs, untimed, ahead of
    each run."""
    best, result = float("inf"), None
    for _ in range(repeat):
        if before is not None:
            result = None
            before()
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def release_freed_memory() -> None:
    """Hand the memory freed so far back to the OS (glibc's malloc_trim), so the next run's new arrays are
    new pages, page faults and all, as when a model is loaded for real. Without it, glibc recycles freed
    blocks of up to 32 MiB: one side's "fresh" outputs are then the warm pages the side before it just
    freed (ggml's Q4_K measured 3.9 Gelem/s on such pages, 0.4 on new ones)."""
    gc.collect()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).malloc_trim(0)
