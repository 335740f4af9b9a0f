"""The bulk header path (regex + numpy) gives exactly what the one-value-at-a-time path gives, or declines."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.numpy import save_file

from weightkit._io import ByteSource
from weightkit.errors import FormatError
from weightkit.safetensors import reader, write_safetensors

DTYPES = {"F32": 4, "F16": 2, "BF16": 2, "I8": 1, "U8": 1, "F64": 8, "BOOL": 1, "F4": 0.5}


def file_bytes(header: str, data_size: int) -> bytes:
    h = header.encode()
    return struct.pack("<Q", len(h)) + h + bytes(data_size)


def both_paths(tmp_path, raw: bytes):
    """(bulk result or None, exact result or the FormatError it raised) for one file."""
    path = tmp_path / "h.safetensors"
    path.write_bytes(raw)
    src = ByteSource(path)
    try:
        n = struct.unpack("<Q", raw[:8])[0]
        text = raw[8 : 8 + n].decode()
        bulk = reader._parse_common_case(src, text, 8 + n)
        try:
            exact = reader._parse_exactly(src, text, 8 + n)
        except FormatError as e:
            exact = e
        return (None if bulk is None else (bulk[0], dict(bulk[1]))), exact
    finally:
        src.close()


@st.composite
def headers(draw):
    """A header in one of several writers' styles, valid or subtly not, and the data size it describes."""
    names = draw(st.lists(st.text(min_size=0, max_size=6), min_size=1, max_size=6))
    entries, offset = [], 0
    for name in names:
        dtype = draw(st.sampled_from(list(DTYPES)))
        shape = draw(st.lists(st.integers(0, 5), max_size=3))
        size = int(np.prod(shape, dtype=np.int64) * DTYPES[dtype]) + draw(st.sampled_from([0] * 15 + [1]))
        entries.append((name, {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}))
        offset += size
    entries = draw(st.permutations(entries))
    style = draw(st.sampled_from(["serde", "sorted", "spaced", "reversed fields"]))
    if style == "sorted":
        entries = [(k, dict(sorted(v.items()))) for k, v in entries]
    if style == "reversed fields":
        entries = [(k, dict(reversed(v.items()))) for k, v in entries]
    obj = {}
    if draw(st.booleans()):
        obj["__metadata__"] = draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=4), st.text(max_size=4))))
    obj.update(entries)
    separators = (", ", ": ") if style == "spaced" else (",", ":")
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()), separators=separators)
    text += " " * draw(st.integers(0, 7))
    return text, offset + draw(st.sampled_from([0] * 7 + [2]))


@settings(max_examples=300, deadline=None)
@given(case=headers())
def test_bulk_path_agrees_with_exact_path(tmp_path_factory, case):
    text, data_size = case
    bulk, exact = both_paths(tmp_path_factory.mktemp("h"), file_bytes(text, data_size))
    if bulk is not None:
        assert not isinstance(exact, FormatError), exact
        assert bulk == (exact[0], exact[1])
        assert list(bulk[1]) == list(exact[1])  # both in data order


@pytest.mark.parametrize("writer", ["weightkit", "reference"])
def test_bulk_path_takes_what_writers_write(tmp_path, writer):
    tensors = {f"layers.{i}.w": np.zeros((i % 3, 2), np.float16) for i in range(50)}
    tensors["norm"] = np.ones(7, np.float32)
    path = tmp_path / "w.safetensors"
    if writer == "weightkit":
        write_safetensors(path, tensors, metadata={"format": "pt"})
    else:
        save_file(tensors, str(path), metadata={"format": "pt"})
    bulk, exact = both_paths(tmp_path, path.read_bytes())
    assert bulk is not None and bulk == (exact[0], exact[1])


def test_bulk_path_takes_sorted_keys_and_declines_other_layouts(tmp_path):
    sorted_keys = (
        '{"a":{"data_offsets":[0,4],"dtype":"F32","shape":[1]},"b":{"data_offsets":[4,6],"dtype":"F16","shape":[]}}'
    )
    bulk, exact = both_paths(tmp_path, file_bytes(sorted_keys, 6))
    assert bulk is not None and bulk == exact
    assert bulk[1]["b"].shape == () and bulk[1]["b"].offset == 8 + len(sorted_keys) + 4
    for declined in (
        '{"a": {"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',  # a space between tokens
        '{"a\\u0041":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',  # an escape
        '{"a":{"shape":[1],"dtype":"F32","data_offsets":[0,4]}}',  # another field order
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
        '{"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}}',  # a leading zero (serde refuses it)
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551620]}}',  # past 2^64
    ):
        bulk, _ = both_paths(tmp_path, file_bytes(declined, 4))
        assert bulk is None, declined
