"""Threads that follow a download's file as its parts are written: one takes its sha256, one starts the disk
writes early. Neither holds up the threads reading the network (sha256 is one core's work, and the kernel makes
a writer that asks for writeback wait while the disk's queue is full)."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

from .._io import start_writeback
from ..errors import RegistryError

# Bytes hashed at a time, and written to a part since its writeback last started that start it again; a
# writer wakes the followers each time it crosses a multiple of it.
STEP = 2 << 20


class Follower:
    """A thread that catches up with a file being written each time `advanced()` says more of it is (the
    writer says so at each multiple of `STEP`, and at the end of a part). `finish()` has it catch up once
    more, then ends it and raises what it raised; `stop()` ends it sooner."""

    def __init__(self, name: str) -> None:
        self._wake = threading.Condition()
        self._pending = True
        self._finishing = self.stopped = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def advanced(self) -> None:
        with self._wake:
            self._pending = True
            self._wake.notify()

    def finish(self) -> None:
        with self._wake:
            self._finishing = True
        self._join()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        with self._wake:
            self.stopped = True
        self._join()

    def catch_up(self) -> None:
        """Do what the bytes written so far allow (watching `stopped` if that takes long)."""
        raise NotImplementedError

    def _join(self) -> None:
        with self._wake:
            self._wake.notify()
        self._thread.join()

    def _run(self) -> None:
        try:
            while True:
                with self._wake:
                    while not (self._pending or self._finishing or self.stopped):
                        self._wake.wait()
                    last, self._pending = self._finishing, False
                if self.stopped:
                    return
                self.catch_up()
                if last:
                    return
        except BaseException as e:  # raised by `finish`
            self._error = e


class PrefixHasher(Follower):
    """The sha256 of the file open as `fd`, taken from its start as far as `ready()` says it is written, reading
    the bytes back from the page cache (with pread: a fault on a mapped page would wait while writeback holds
    it); `digest()` once all of them are."""

    def __init__(self, fd: int, path: Path, ready: Callable[[], int]) -> None:
        self._fd, self._path, self._ready = fd, path, ready
        self._hash = hashlib.sha256()
        self._hashed = 0
        self._buffer = memoryview(bytearray(STEP))
        super().__init__("weightkit-sha256")

    def digest(self) -> str:
        self.finish()
        return "sha256:" + self._hash.hexdigest()

    def catch_up(self) -> None:
        ready = self._ready()
        while self._hashed < ready and not self.stopped:
            n = os.preadv(self._fd, [self._buffer[: min(STEP, ready - self._hashed)]], self._hashed)
            if not n:
                raise RegistryError(f"{self._path} shrank while it was being downloaded")
            self._hash.update(self._buffer[:n])
            self._hashed += n


class Writeback(Follower):
    """Starts the disk writes of each part `written()` lists (start, written up to, end) when `STEP`
    more of it is written, or the rest of it, so the fsync that the store waits for has little left to do."""

    def __init__(self, fd: int, written: Callable[[], list[tuple[int, int, int]]]) -> None:
        self._fd, self._written = fd, written
        self._started: dict[int, int] = {}  # range start: where writeback was last started up to
        super().__init__("weightkit-writeback")

    def catch_up(self) -> None:
        for start, upto, end in self._written():
            begun = self._started.get(start, start)
            if (upto - begun >= STEP or upto == end > begun) and not self.stopped:
                start_writeback(self._fd, begun, upto - begun)
                self._started[start] = upto
