"""A corpus of malformed GGUF files: each one must raise FormatError (never another exception), say where
and what, allocate no more than the file's size, and return promptly."""

from __future__ import annotations

import contextlib
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import weightkit
from weightkit.errors import FormatError
from weightkit.gguf import GGUFFile, Value, open_gguf, write_gguf
from weightkit.gguf import GGUFValueType as T

from ..conftest import overwrite


def s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, vtype: int, payload: bytes) -> bytes:
    return s(key) + struct.pack("<I", vtype) + payload


def u32kv(key: str, value: int) -> bytes:
    return kv(key, T.UINT32, struct.pack("<I", value))


def tinfo(name: str, dims: tuple[int, ...], gtype: int, offset: int) -> bytes:
    return s(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, gtype, offset)


def gguf_bytes(kvs: list[bytes], infos: list[bytes], data: bytes = b"", *, version=3, n_kv=None, n_tensors=None):
    head = b"GGUF" + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors,
                                 len(kvs) if n_kv is None else n_kv)  # fmt: skip
    body = head + b"".join(kvs) + b"".join(infos)
    return body + bytes(-len(body) % 32) + data


def open_bytes(tmp_path, raw: bytes):
    p = tmp_path / "bad.gguf"
    p.write_bytes(raw)
    return open_gguf(p)


F32_4x8 = tinfo("w", (8, 4), 0, 0)

CASES = {
    "bad magic": (b"GGML" + bytes(20), "not a GGUF file", 0),
    "empty file": (b"", "not a GGUF file", 0),
    "only magic": (b"GGUF", "GGUF version needs 4 bytes", 4),
    "version 1": (gguf_bytes([], [], version=1), "version 1 is no longer supported", 4),
    "version 4": (gguf_bytes([], [], version=4), "unsupported GGUF version 4", 4),
    "2^60 keys": (gguf_bytes([], [], n_kv=2**60), "metadata keys", 8),
    "2^60 tensors": (gguf_bytes([], [], n_tensors=2**60), "tensors", 8),
    "key length past end": (gguf_bytes([struct.pack("<Q", 2**40)], [], bytes(64)), "claims 1099511627776 bytes", 24),
    "empty key": (gguf_bytes([kv("", T.UINT8, b"\x01")], []), "metadata key 0 is empty", 24),
    "duplicate key": (gguf_bytes([u32kv("a.b", 1), u32kv("a.b", 2)], []), "duplicate metadata key 'a.b'", 43),
    "unknown value type": (gguf_bytes([kv("a", 13, b"")], []), "not a GGUF value type", 33),
    "array of 2^60 u32": (gguf_bytes([kv("a", T.ARRAY, struct.pack("<IQ", T.UINT32, 2**60))], []), "fit", 41),
    "array of 2^60 strings": (gguf_bytes([kv("a", T.ARRAY, struct.pack("<IQ", T.STRING, 2**60))], []), "fit", 41),
    "array of unknown type": (gguf_bytes([kv("a", T.ARRAY, struct.pack("<IQ", 99, 1))], []), "value type", 37),
    "string in array past end": (
        gguf_bytes([kv("a", T.ARRAY, struct.pack("<IQ", T.STRING, 2) + s("x") + struct.pack("<Q", 2**62))], []),
        "string 1 claims",
        58,
    ),
    "nesting too deep": (
        gguf_bytes([kv("a", T.ARRAY, struct.pack("<IQ", T.ARRAY, 1) * 9 + struct.pack("<IQ", T.UINT8, 0))], []),
        "nested more than 8 deep",
        None,
    ),
    "alignment not u32": (gguf_bytes([kv("general.alignment", T.INT32, struct.pack("<i", 32))], []), "UINT32", None),
    "alignment zero": (gguf_bytes([u32kv("general.alignment", 0)], []), "not a power of two", None),
    "alignment 48": (gguf_bytes([u32kv("general.alignment", 48)], []), "not a power of two", None),
    "split.count a bool": (gguf_bytes([kv("split.count", T.BOOL, b"\x01")], []), "must be an integer", None),
    "duplicate tensor": (gguf_bytes([], [F32_4x8, F32_4x8], bytes(256)), "duplicate tensor name 'w'", None),
    "5 dimensions": (gguf_bytes([], [tinfo("w", (1, 1, 1, 1, 1), 0, 0)], bytes(32)), "5 dimensions", None),
    "negative dimension": (gguf_bytes([], [tinfo("w", (8, 2**64 - 1), 0, 0)], bytes(32)), "negative dimension", 37),
    "2^64 elements": (gguf_bytes([], [tinfo("w", (2**32, 2**32), 0, 0)], bytes(32)), "more than 2^63", 37),
    "unknown ggml type": (gguf_bytes([], [tinfo("w", (32,), 43, 0)], bytes(64)), "unknown GGML type id 43", 45),
    "removed ggml type": (gguf_bytes([], [tinfo("w", (32,), 31, 0)], bytes(64)), "(id 31), which ggml removed", 45),
    "row not whole blocks": (gguf_bytes([], [tinfo("w", (33,), 8, 0)], bytes(64)), "whole number of Q8_0", 37),
    "misaligned offset": (gguf_bytes([], [tinfo("w", (4,), 0, 4)], bytes(64)), "alignment 32", 24),
    "tensor past end": (gguf_bytes([], [F32_4x8], bytes(100)), "occupies bytes", 24),
    "tensor offset huge": (gguf_bytes([], [tinfo("w", (4,), 0, 2**63)], bytes(64)), "file ends", 24),
    "overlapping tensors": (
        gguf_bytes([], [tinfo("a", (16,), 0, 0), tinfo("b", (8,), 0, 32)], bytes(96)),
        "tensors 'a' and 'b' overlap",
        None,
    ),
    "truncated tensor infos": (gguf_bytes([], [tinfo("w", (1, 1, 1, 1), 0, 0)])[:60], "dimensions of 'w' needs", 37),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_malformed_file_raises_format_error(tmp_path, case):
    raw, message, offset = CASES[case]
    with pytest.raises(FormatError) as err:
        open_bytes(tmp_path, raw)
    assert message in str(err.value)
    assert err.value.path.endswith("bad.gguf")
    if offset is not None:
        assert err.value.offset == offset, str(err.value)


def test_absurd_counts_allocate_nothing_big(tmp_path):
    """An array claiming 2^27 strings in a tiny file is refused before anything is allocated for it."""
    raw = gguf_bytes([kv("a", T.ARRAY, struct.pack("<IQ", T.STRING, 2**27) + s("x") * 3)], [])
    tracemalloc.start()
    with pytest.raises(FormatError):
        open_bytes(tmp_path, raw)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1 << 20


@pytest.fixture(scope="module")
def valid_file(tmp_path_factory):
    """A small but varied valid file: every kind of metadata and three tensors."""
    path = tmp_path_factory.mktemp("valid") / "valid.gguf"
    md = {
        "general.architecture": "llama",
        "llama.block_count": Value(2, T.UINT32),
        "tokenizer.ggml.tokens": ["<s>", "</s>", "hello", "wörld"],
        "tokenizer.ggml.scores": np.array([0.0, -1.0, -2.5, 3.0], np.float32),
        "nested": [[1, 2], [3]],
        "flag": True,
        "pi": Value(3.14159, T.FLOAT64),
    }
    rng = np.random.default_rng(0)
    tensors = {"a": rng.standard_normal((2, 8)).astype(np.float32), "b": np.arange(8, dtype=np.int16)}
    write_gguf(path, md, tensors)
    raw = path.read_bytes()
    with GGUFFile(path) as f:
        data_end = max(t.offset + t.nbytes for t in f.tensors.values())
        header_end = f.data_offset
    return raw, header_end, data_end


def test_truncated_anywhere_raises_format_error(tmp_path, valid_file):
    raw, _, data_end = valid_file
    p = tmp_path / "t.gguf"
    for size in range(data_end):
        overwrite(p, raw[:size])
        with pytest.raises(FormatError):
            weightkit.open(p)
    overwrite(p, raw[:data_end])  # the padding after the last tensor is not needed
    weightkit.open(p).close()


@pytest.mark.slow
def test_every_header_bit_flip_is_format_error_or_valid(tmp_path, valid_file):
    raw, header_end, _ = valid_file
    p = tmp_path / "f.gguf"
    outcomes = {"ok": 0, "error": 0}
    for pos in range(header_end):
        for bit in range(8):
            mutated = bytearray(raw)
            mutated[pos] ^= 1 << bit
            overwrite(p, mutated)
            try:
                with weightkit.open(p) as m:
                    for name in m.tensors:
                        m.tensor(name)
                outcomes["ok"] += 1
            except FormatError:
                outcomes["error"] += 1
    assert outcomes["error"] > 0 and outcomes["ok"] > 0


@pytest.mark.parametrize("value", [2**63, 2**64 - 1, 2**60, 2**32])
def test_every_length_and_count_set_huge(tmp_path, valid_file, value):
    """Overwrite each aligned 8-byte field of the header with a huge number."""
    raw, header_end, _ = valid_file
    p = tmp_path / "h.gguf"
    for pos in range(8, header_end - 8):
        mutated = bytearray(raw)
        mutated[pos : pos + 8] = struct.pack("<Q", value)
        overwrite(p, mutated)
        with contextlib.suppress(FormatError):
            weightkit.open(p).close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_corruption(tmp_path, valid_file, data):
    raw, header_end, _ = valid_file
    mutated = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, header_end - 1))
        mutated[pos] = data.draw(st.integers(0, 255))
    p = tmp_path / "r.gguf"
    overwrite(p, mutated)
    with contextlib.suppress(FormatError):
        weightkit.open(p).close()
