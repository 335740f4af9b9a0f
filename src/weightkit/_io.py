"""Bounds-checked, read-only views of files, and atomic file writing.

Every parser reads through a `BufferSource` (a memory map here; the first bytes of a remote file in
`weightkit.remote`), so no length, count or offset taken from a file is used before it is checked against
the bytes that are really there.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import mmap
import os
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Protocol

import numpy as np

from ._libc import libc_function
from .errors import FormatError


class BufferSource:
    """Checked reads from bytes held in memory: here a whole file; a remote file's source holds its first
    `held` bytes and fetches more when a read reaches past them (`need`, `reach`).

    Every length and offset is checked against the file's `size`: past it, the file is malformed.
    """

    def __init__(self, path: str | os.PathLike[str], size: int, buf: mmap.mmap | bytes) -> None:
        self.path = path
        self.size = size
        self._buf = buf

    @property
    def buffer(self) -> mmap.mmap | bytes:
        """The raw bytes held, for hot loops that have already checked their bounds."""
        return self._buf

    @property
    def held(self) -> int:
        """How many of the file's first bytes are in `buffer`."""
        return len(self._buf)

    def error(self, offset: int | None, reason: str) -> FormatError:
        return FormatError(self.path, offset, reason)

    def reach(self, stop: int, offset: int, reason: str) -> None:
        """For hot loops that check their reads against `held` themselves: a read from `offset` ran past the
        bytes held, to `stop`. Past the end of the file that raises the FormatError of `reason`; else the
        source comes to hold those bytes (see `buffer` again after)."""
        if stop > self.size:
            raise self.error(offset, reason)
        self.need(offset, stop - offset, reason)

    def need(self, offset: int, length: int, what: str) -> None:
        """Raise FormatError unless `length` bytes starting at `offset` lie inside the file; a source that
        holds part of its file makes sure it holds them (see `buffer` again after)."""
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
        self._buf = b""


class ByteSource(BufferSource):
    """A read-only memory map of one file with checked access.

    Views handed out (`array`) stay valid after `close()`: the mapping is released when the last view is
    garbage-collected. They are read-only, unless `copy_on_write`: then writes go to private copies of
    the pages touched, never to the file (for frameworks such as torch that want writable memory).
    """

    def __init__(self, path: str | os.PathLike[str], *, copy_on_write: bool = False) -> None:
        access = mmap.ACCESS_COPY if copy_on_write else mmap.ACCESS_READ
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            # mmap refuses empty files; an empty bytes object behaves the same for every read.
            buf = mmap.mmap(f.fileno(), 0, access=access) if size else b""
        super().__init__(Path(path), size, buf)

    def close(self) -> None:
        buf, self._buf = self._buf, b""
        if isinstance(buf, mmap.mmap):
            # Views still exported: the map is unmapped once they are gone.
            with contextlib.suppress(BufferError):
                buf.close()


class Openable(Protocol):
    """A file read from somewhere other than a local path (a remote file), which the readers take wherever
    they take a path: it has a name, finds the files beside it (a split model's shards, a checkpoint's
    index and config) and opens its own source."""

    @property
    def name(self) -> str:
        """The file's own name, the last part of its path."""
        ...

    @property
    def display(self) -> str:
        """What messages call it (its URL, or the URI it was given as)."""
        ...

    def with_name(self, name: str) -> Openable:
        """The file called `name` beside this one."""
        ...

    def open_source(self, *, copy_on_write: bool) -> BufferSource: ...


def open_source(target: str | os.PathLike[str] | Openable, *, copy_on_write: bool = False) -> BufferSource:
    """A memory map of a local path, or the source a remote file opens."""
    if isinstance(target, (str, os.PathLike)):
        return ByteSource(target, copy_on_write=copy_on_write)
    return target.open_source(copy_on_write=copy_on_write)


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
        with _WritingBack(io.FileIO(fd, "wb")) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


#: the bytes an atomic write writes between starts of their disk writes (`start_writeback`)
WRITEBACK_BYTES = 64 << 20


class _WritingBack(io.BufferedWriter):
    """`atomic_write`'s file: the disk writes of each WRITEBACK_BYTES written are started as they come
    (`start_writeback`), while the writer makes the next ones, so the fsync that ends the write waits for the
    last few only, not the whole file (a 1 GB folder's safetensors: 2.3-2.6 -> 0.6-0.7 s here)."""

    begun = written = 0

    def write(self, data) -> int:  # type: ignore[override]
        n = super().write(data)
        self.written += n
        if self.written - self.begun >= WRITEBACK_BYTES:
            self.flush()
            start_writeback(self.fileno(), self.begun, self.written - self.begun)
            self.begun = self.written
        return n


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


_SYNC_FILE_RANGE = libc_function("sync_file_range", (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint))
_SYNC_FILE_RANGE_WRITE = 2


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Have the kernel start writing these bytes of a file to disk now, without waiting for them (Linux's
    sync_file_range; elsewhere nothing): a later fsync then has only the rest to wait for. Not a promise
    that anything is on disk, and failures are left for that fsync to report."""
    if _SYNC_FILE_RANGE is not None:
        _SYNC_FILE_RANGE(fd, offset, length, _SYNC_FILE_RANGE_WRITE)
