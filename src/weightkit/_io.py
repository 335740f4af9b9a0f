"""Bounds-checked, read-only views of files, and atomic file writing.

Every parser reads through a `ByteSource`, so no length, count or offset taken from a file is used before
it is checked against the bytes that are really there.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np

from .errors import FormatError


class ByteSource:
    """A read-only memory map of one file with checked access.

    Views handed out (`array`) stay valid after `close()`: the mapping is released when the last view is
    garbage-collected. They are read-only, unless `copy_on_write`: then writes go to private copies of
    the pages touched, never to the file (for frameworks such as torch that want writable memory).
    """

    def __init__(self, path: str | os.PathLike[str], *, copy_on_write: bool = False) -> None:
        self.path = Path(path)
        access = mmap.ACCESS_COPY if copy_on_write else mmap.ACCESS_READ
        with open(self.path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            # mmap refuses empty files; an empty bytes object behaves the same for every read.
            self._buf: mmap.mmap | bytes = mmap.mmap(f.fileno(), 0, access=access) if self.size else b""

    @property
    def buffer(self) -> mmap.mmap | bytes:
        """The raw mapped bytes, for hot loops that have already checked their bounds."""
        return self._buf

    def error(self, offset: int | None, reason: str) -> FormatError:
        return FormatError(self.path, offset, reason)

    def need(self, offset: int, length: int, what: str) -> None:
        """Raise FormatError unless `length` bytes starting at `offset` lie inside the file."""
        if offset < 0 or length < 0 or offset + length > self.size:
            remain = max(self.size - offset, 0)
            raise self.error(offset, f"{what} needs {length} bytes but only {remain} remain in the file")

    def unpack(self, fmt: struct.Struct, offset: int, what: str) -> tuple:
        self.need(offset, fmt.size, what)
        return fmt.unpack_from(self._buf, offset)

    def bytes(self, offset: int, length: int, what: str) -> bytes:
        self.need(offset, length, what)
        return self._buf[offset : offset + length]

    def array(self, offset: int, dtype: np.dtype, count: int, what: str) -> np.ndarray:
        """A zero-copy, read-only numpy view of `count` items of `dtype` at `offset`."""
        dtype = np.dtype(dtype)
        self.need(offset, count * dtype.itemsize, what)
        if count == 0:
            return np.empty(0, dtype=dtype)
        return np.frombuffer(self._buf, dtype=dtype, count=count, offset=offset)

    def close(self) -> None:
        buf, self._buf = self._buf, b""
        if isinstance(buf, mmap.mmap):
            # Views still exported: the map is unmapped once they are gone.
            with contextlib.suppress(BufferError):
                buf.close()


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """Write `path` all or nothing: a temp file in the same folder, fsync, then rename over `path`.

    If the body raises (or the process dies), the destination is untouched and the temp file removed.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as e:  # name the file the user asked for, not our temp file
        raise type(e)(e.errno, e.strerror, str(path)) from None
    try:
        os.chmod(tmp, _final_mode(path))
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def _final_mode(path: Path) -> int:
    """Keep the mode of a file being replaced; otherwise what a plain open() would have given."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_UMASK


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable; not every platform lets a folder be opened, which is fine."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
