"""Bytes moved so far, from any thread, for a progress bar."""

from __future__ import annotations

import threading
from collections.abc import Callable

#: `(bytes done, bytes in all, what is happening)`: the shape of weightkit's byte progress bars.
ProgressCallback = Callable[[int, int, str], None]


class ByteProgress:
    """A running count of bytes out of `total`, reported to `callback` as it changes (from any thread)."""

    def __init__(self, total: int, callback: ProgressCallback | None, description: str = "") -> None:
        self.total = total
        self.done = 0
        self.description = description
        self._callback = callback
        self._lock = threading.Lock()
        self._report()

    def add(self, n: int) -> None:
        """`n` more bytes done (negative: bytes that must be sent again)."""
        with self._lock:
            self.done += n
        self._report()

    def describe(self, text: str) -> None:
        self.description = text
        self._report()

    def _report(self) -> None:
        if self._callback is not None:
            self._callback(self.done, self.total, self.description)
