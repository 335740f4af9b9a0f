"""Threads for network transfers: a few connections' worth, each taking the next item until none is left."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")


def drain(items: Iterable[T], handle: Callable[[T], None], threads: int, stop: threading.Event) -> None:
    """`handle(item)` for each item, on up to `threads` threads taking items in order. The first exception
    (or an interrupt) sets `stop`, which `handle` watches to end early; it is raised once every thread ended."""
    work: queue.SimpleQueue[T] = queue.SimpleQueue()
    count = 0
    for item in items:
        work.put(item)
        count += 1
    if not count:
        return

    def worker() -> None:
        while not stop.is_set():
            try:
                item = work.get_nowait()
            except queue.Empty:
                return
            handle(item)

    with ThreadPoolExecutor(min(threads, count), thread_name_prefix="weightkit-transfer") as pool:
        futures = [pool.submit(worker) for _ in range(min(threads, count))]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        except BaseException:
            stop.set()
            raise
        failed = [f.exception() for f in done if f.exception() is not None]
        if failed:
            stop.set()
    if failed:
        raise failed[0]
