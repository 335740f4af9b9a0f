"""Shared bits of the benchmark scripts: the real test model, and best-of-N timing."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def gemma_path() -> Path:
    """The real Gemma 3 270M Q4_K_M GGUF, assembled once from its PyPI package into weightkit's cache."""
    from weightkit.cli.demo import demo_model_path

    return demo_model_path()


def best_of(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """The fastest of `repeat` runs in seconds (the least disturbed by the rest of the machine), and the
    last run's result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result
