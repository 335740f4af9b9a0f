import os

import numpy as np
import pytest

from weightkit import _io
from weightkit._io import ByteSource, atomic_write
from weightkit.errors import FormatError


def test_byte_source_checks_bounds(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(bytes(range(16)))
    src = ByteSource(p)
    assert src.bytes(2, 3, "x") == b"\x02\x03\x04"
    assert src.array(8, np.uint32, 2, "x").tolist() == [0x0B0A0908, 0x0F0E0D0C]
    with pytest.raises(FormatError, match=r"at byte 12: thing needs 8 bytes but only 4 remain"):
        src.bytes(12, 8, "thing")
    with pytest.raises(FormatError):
        src.array(0, np.uint64, 3, "x")
    view = src.array(0, np.uint8, 16, "x")
    src.close()  # a view is still alive: the map stays until it goes
    assert view[15] == 15


def test_empty_file(tmp_path):
    p = tmp_path / "empty"
    p.write_bytes(b"")
    src = ByteSource(p)
    assert src.size == 0
    with pytest.raises(FormatError):
        src.bytes(0, 1, "x")


def test_atomic_write_replaces_only_on_success(tmp_path):
    p = tmp_path / "out.bin"
    p.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_write(p) as f:
        f.write(b"half of the new")
        raise RuntimeError("interrupted")
    assert p.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out.bin"]
    with atomic_write(p) as f:
        f.write(b"new")
    assert p.read_bytes() == b"new"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_atomic_write_starts_the_disk_writes_as_it_goes(tmp_path, monkeypatch):
    """Each WRITEBACK_BYTES written have their disk writes started, flushed first, in order, covering all but
    the last few bytes (the closing fsync's); the file is what was written."""
    started = []
    monkeypatch.setattr(_io, "WRITEBACK_BYTES", 10)

    def start_writeback(fd: int, offset: int, length: int) -> None:
        started.append((offset, length, os.fstat(fd).st_size))  # the bytes are in the file by then

    monkeypatch.setattr(_io, "start_writeback", start_writeback)
    p = tmp_path / "out.bin"
    with atomic_write(p) as f:
        for piece in (b"a" * 4, b"b" * 7, b"c" * 25, np.arange(3, dtype=np.float32), b"d"):
            f.write(piece)
    assert p.read_bytes() == b"a" * 4 + b"b" * 7 + b"c" * 25 + np.arange(3, dtype=np.float32).tobytes() + b"d"
    assert started == [(0, 11, 11), (11, 25, 36), (36, 12, 48)]


def test_atomic_write_keeps_mode(tmp_path):
    p = tmp_path / "out.bin"
    p.write_bytes(b"old")
    p.chmod(0o640)
    with atomic_write(p) as f:
        f.write(b"new")
    assert p.stat().st_mode & 0o777 == 0o640


def test_atomic_write_into_missing_folder_names_the_destination(tmp_path):
    target = tmp_path / "missing" / "out.bin"
    with pytest.raises(FileNotFoundError) as e, atomic_write(target):
        pass
    assert e.value.filename == str(target)
    assert ".tmp" not in str(e.value)
