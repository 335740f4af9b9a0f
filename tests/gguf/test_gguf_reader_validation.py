"""gguf-py's tests/test_gguf_reader_validation.py (llama.cpp's gguf-py, as llama-cpp-python 0.3.36 bundles it):
the malformed files gguf-py's reader must refuse, which weightkit refuses with a FormatError at the byte that is
wrong."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from weightkit.errors import FormatError
from weightkit.gguf import GGUFFile


def write_gguf(path, n_dims_field, dims):
    """Upstream's `_write_gguf`: one F32 tensor 'bad_tensor' with the given dimension count and dimensions."""
    name = b"bad_tensor"
    buf = b"GGUF" + struct.pack("<IQQ", 3, 1, 0)
    buf += struct.pack("<Q", len(name)) + name
    buf += struct.pack("<I", n_dims_field) + b"".join(struct.pack("<Q", d) for d in dims)
    buf += struct.pack("<IQ", 0, 0) + b"\x00" * 64
    path.write_bytes(buf)


def test_n_dims_upper_bound(tmp_path):
    """A file claiming 1,000,000 dimensions is refused, not read past its end."""
    path = tmp_path / "evil_ndims.gguf"
    write_gguf(path, 1_000_000, [1] * 8)
    with pytest.raises(FormatError, match="1000000 dimensions; ggml allows at most 4") as e:
        GGUFFile(path)
    assert e.value.offset == 4 + 4 + 8 + 8 + 8 + len("bad_tensor")


def test_dims_product_no_uint64_wraparound(tmp_path):
    """Dimensions whose product wraps to 4 in uint64 are refused, not taken for a 4-element tensor."""
    dims = [4194305, 4194305, 211106198978564]
    assert int(np.prod(np.array(dims, dtype=np.uint64))) == 4  # the wrap bug
    path = tmp_path / "evil_overflow.gguf"
    write_gguf(path, len(dims), dims)
    with pytest.raises(FormatError, match="more than 2\\^63 elements") as e:
        GGUFFile(path)
    assert e.value.offset == 4 + 4 + 8 + 8 + 8 + len("bad_tensor") + 4
