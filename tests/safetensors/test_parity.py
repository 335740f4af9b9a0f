"""weightkit accepts exactly the safetensors files Hugging Face's reference accepts, and reads them the same, except
that it refuses duplicate keys, which the format disallows and the reference takes."""

from __future__ import annotations

import json
import re
import struct
from math import prod
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import SafetensorError, safe_open

from weightkit.errors import FormatError
from weightkit.safetensors import SafetensorsFile

from ..conftest import overwrite


def st_file(header: str | bytes, data: bytes = b"", length: int | None = None) -> bytes:
    h = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(h) if length is None else length) + h + data


def tensor(dtype="F32", shape="[1]", offsets="[0,4]", extra=""):
    return f'{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}{extra}}}'


OK = '{"a":' + tensor() + "}"
BYTE_TYPES = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ"]
CORPUS = {
    "valid": st_file(OK, bytes(4)),
    "leading space": st_file(" " + OK, bytes(4)),
    "trailing spaces": st_file(OK + "   ", bytes(4)),
    "trailing newline, tab, cr": st_file(OK + "\n\t\r", bytes(4)),
    "trailing nul": st_file(OK + "\0", bytes(4)),
    "empty header object": st_file("{}"),
    "empty file": b"",
    "7 bytes": b"\x01" * 7,
    "header too large": struct.pack("<Q", 100_000_001) + b"{}",
    "header at the limit but short file": struct.pack("<Q", 100_000_000) + b"{}",
    "header length past end": st_file(OK, bytes(4), length=1000),
    "header length 2^64-1": st_file(OK, bytes(4), length=2**64 - 1),
    "not utf-8": st_file(b'{"\xff":' + tensor().encode() + b"}", bytes(4)),
    "not json": st_file("{a}", b""),
    "json array": st_file("[]"),
    "json string": st_file('"x"'),
    "bom": st_file("\ufeff{}"),
    "NaN in shape": st_file('{"a":' + tensor(shape="[NaN]") + "}", bytes(4)),
    "float shape": st_file('{"a":' + tensor(shape="[1.0]") + "}", bytes(4)),
    "exponent shape": st_file('{"a":' + tensor(shape="[1e0]") + "}", bytes(4)),
    "negative shape": st_file('{"a":' + tensor(shape="[-1]") + "}", bytes(4)),
    "minus zero shape": st_file('{"a":' + tensor(shape="[-0]", offsets="[0,0]") + "}"),
    "bool shape": st_file('{"a":' + tensor(shape="[true]") + "}", bytes(4)),
    "string shape": st_file('{"a":' + tensor(shape='["1"]') + "}", bytes(4)),
    "shape 2^64": st_file('{"a":' + tensor(shape="[18446744073709551616]") + "}", bytes(4)),
    "shape overflow": st_file('{"a":' + tensor(shape="[4294967296,4294967296]") + "}", bytes(4)),
    "zero times 2^64": st_file('{"a":' + tensor(shape="[0,18446744073709551616]", offsets="[0,0]") + "}"),
    "zero times huge": st_file('{"a":' + tensor(shape="[0,18446744073709551615]", offsets="[0,0]") + "}"),
    "bits overflow": st_file('{"a":' + tensor("F64", shape="[2305843009213693952]") + "}", bytes(4)),
    "unknown dtype": st_file('{"a":' + tensor("F99") + "}", bytes(4)),
    "dtype a list": st_file('{"a":' + tensor().replace('"F32"', '["F32"]') + "}", bytes(4)),
    "dtype a number": st_file('{"a":' + tensor().replace('"F32"', "32") + "}", bytes(4)),
    "dtype null": st_file('{"a":' + tensor().replace('"F32"', "null") + "}", bytes(4)),
    "shape null": st_file('{"a":' + tensor(shape="null") + "}", bytes(4)),
    "bool offset": st_file('{"a":' + tensor(offsets="[false,4]") + "}", bytes(4)),
    "minus zero offset": st_file('{"a":' + tensor(offsets="[-0,4]") + "}", bytes(4)),
    "minus zero in a name": st_file('{"a-0":' + tensor() + "}", bytes(4)),
    "second tensor bad": st_file('{"a":' + tensor() + ',"b":' + tensor("F32", "[1.5]", "[4,8]") + "}", bytes(8)),
    "lowercase dtype": st_file('{"a":' + tensor("f32") + "}", bytes(4)),
    "missing dtype": st_file('{"a":{"shape":[1],"data_offsets":[0,4]}}', bytes(4)),
    "missing shape": st_file('{"a":{"dtype":"F32","data_offsets":[0,4]}}', bytes(4)),
    "missing offsets": st_file('{"a":{"dtype":"F32","shape":[1]}}', bytes(4)),
    "three offsets": st_file('{"a":' + tensor(offsets="[0,4,4]") + "}", bytes(4)),
    "one offset": st_file('{"a":' + tensor(offsets="[0]") + "}", bytes(4)),
    "offsets a number": st_file('{"a":' + tensor(offsets="4") + "}", bytes(4)),
    "offsets not a list": st_file('{"a":' + tensor(offsets='{"0":4}') + "}", bytes(4)),
    "tensor not an object": st_file('{"a":5}'),
    "tensor is null": st_file('{"a":null}'),
    "extra field": st_file('{"a":' + tensor(extra=',"x":[1,{"y":null}]') + "}", bytes(4)),
    "repeated field": st_file('{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}', bytes(4)),
    "repeated tensor, hole": st_file('{"a":' + tensor() + ',"a":' + tensor(offsets="[4,8]") + "}", bytes(8)),
    "metadata": st_file('{"__metadata__":{"k":"v","é":"ü"},"a":' + tensor() + "}", bytes(4)),
    "metadata null": st_file('{"__metadata__":null,"a":' + tensor() + "}", bytes(4)),
    "metadata int value": st_file('{"__metadata__":{"k":1},"a":' + tensor() + "}", bytes(4)),
    "metadata nested": st_file('{"__metadata__":{"k":{"x":"y"}},"a":' + tensor() + "}", bytes(4)),
    "metadata a list": st_file('{"__metadata__":["k"],"a":' + tensor() + "}", bytes(4)),
    "metadata repeated": st_file('{"__metadata__":{},"__metadata__":{},"a":' + tensor() + "}", bytes(4)),
    "metadata lone surrogate": st_file('{"__metadata__":{"k":"\\udc00"},"a":' + tensor() + "}", bytes(4)),
    "metadata surrogate pair": st_file('{"__metadata__":{"k":"\\ud83d\\ude00"},"a":' + tensor() + "}", bytes(4)),
    "metadata minus zero": st_file('{"__metadata__":{"k":-0},"a":' + tensor() + "}", bytes(4)),
    "lone surrogate in name": st_file('{"\\ud800":' + tensor() + "}", bytes(4)),
    "surrogate pair in name": st_file('{"\\ud83d\\ude00":' + tensor() + "}", bytes(4)),
    "escaped name": st_file('{"\\u00e9\\n":' + tensor() + "}", bytes(4)),
    "raw control char in name": st_file('{"a\x01":' + tensor() + "}", bytes(4)),
    "empty tensor": st_file('{"a":' + tensor(shape="[0,3]", offsets="[0,0]") + "}"),
    "scalar": st_file('{"a":' + tensor(shape="[]") + "}", bytes(4)),
    "hole at start": st_file('{"a":' + tensor(offsets="[4,8]") + "}", bytes(8)),
    "overlap": st_file('{"a":' + tensor("F32", "[2]", "[0,8]") + ',"b":' + tensor(offsets="[4,8]") + "}", bytes(8)),
    "end before start": st_file(
        '{"a":' + tensor(shape="[0]", offsets="[0,0]") + ',"b":' + tensor(offsets="[4,0]") + "}", bytes(4)
    ),
    "size mismatch": st_file('{"a":' + tensor(shape="[2]") + "}", bytes(4)),
    "trailing data": st_file(OK, bytes(5)),
    "missing data": st_file(OK, bytes(3)),
    "out of order in header": st_file('{"b":' + tensor(offsets="[4,8]") + ',"a":' + tensor() + "}", bytes(8)),
    "F4 odd count": st_file('{"a":' + tensor("F4", "[3]", "[0,2]") + "}", bytes(2)),
    "F4 even count": st_file('{"a":' + tensor("F4", "[4]", "[0,2]") + "}", bytes(2)),
    "F6 four": st_file('{"a":' + tensor("F6_E2M3", "[4]", "[0,3]") + "}", bytes(3)),
    "every dtype": st_file(
        "{" + ",".join(f'"{d}":' + tensor(d, "[8]", f"[{8 * i},{8 * i + 8}]") for i, d in enumerate(BYTE_TYPES)) + "}",
        bytes(64),
    ),
    "nested 125 deep": st_file('{"a":' + tensor(extra=',"x":' + "[" * 125 + "]" * 125) + "}", bytes(4)),
    "nested 126 deep": st_file('{"a":' + tensor(extra=',"x":' + "[" * 126 + "]" * 126) + "}", bytes(4)),
    "nested 5000 deep": st_file('{"a":' + tensor(extra=',"x":' + "[" * 5000 + "]" * 5000) + "}", bytes(4)),
    "huge integer": st_file('{"a":' + tensor(extra=',"x":' + "9" * 5000) + "}", bytes(4)),
}


# The format says "Duplicate keys are disallowed"; the reference takes these files anyway (the last key wins,
# or an ignored field's), weightkit refuses them, naming the key. Each case: (file, the repeated key).
DUPLICATES = {
    "repeated tensor, same entry": (st_file('{"a":' + tensor() + ',"a":' + tensor() + "}", bytes(4)), "a"),
    # the reference reads b at [0, 4] and the second a at [4, 8]; a first-wins reader would see a at [0, 8]
    "repeated tensor, other entry": (
        st_file(
            '{"a":' + tensor("F32", "[2]", "[0,8]") + ',"b":' + tensor() + ',"a":' + tensor(offsets="[4,8]") + "}",
            bytes(8),
        ),
        "a",
    ),
    "repeated extra field": (st_file('{"a":' + tensor(extra=',"x":1,"x":2') + "}", bytes(4)), "x"),
    "repeated key inside an extra field": (
        st_file('{"a":' + tensor(extra=',"x":[{"y":1,"y":2}]') + "}", bytes(4)),
        "y",
    ),
    "metadata key repeated": (st_file('{"__metadata__":{"k":"1","k":"2"}}'), "k"),
    "metadata key repeated, spaced": (
        st_file('{"__metadata__": {"é": "1", "é": "1"}, "a": ' + tensor() + "}", bytes(4)),
        "é",
    ),
}


def reference_reads(path) -> tuple[list, dict | None] | None:
    """What the reference makes of a file: (tensor names, metadata), or None if it refuses it."""
    try:
        with safe_open(str(path), framework="np") as f:
            return sorted(f.keys()), f.metadata()
    except (SafetensorError, OSError):
        return None


def weightkit_reads(path) -> tuple[list, dict | None] | None:
    try:
        with SafetensorsFile(path) as f:
            return sorted(f.tensors), (dict(f.metadata) if f.metadata else None)
    except FormatError:
        return None


def normalize(result):
    if result is None:
        return None
    names, md = result
    return names, md or None


@pytest.mark.parametrize("case", CORPUS, ids=list(CORPUS))
def test_same_verdict_as_reference(tmp_path, case):
    path = tmp_path / "x.safetensors"
    path.write_bytes(CORPUS[case])
    ours, theirs = weightkit_reads(path), reference_reads(path)
    assert normalize(ours) == normalize(theirs), f"weightkit {ours} vs reference {theirs}"


@pytest.mark.parametrize("case", DUPLICATES, ids=list(DUPLICATES))
def test_duplicate_keys_refused_though_the_reference_takes_them(tmp_path, case):
    raw, key = DUPLICATES[case]
    path = tmp_path / "x.safetensors"
    path.write_bytes(raw)
    assert reference_reads(path) is not None
    with pytest.raises(FormatError, match=f"the key {re.escape(repr(key))} appears more than once"):
        SafetensorsFile(path)


def repeats_a_key(raw: bytes) -> bool:
    """Whether the header of `raw` (JSON the reference took) repeats a key in some object, found without weightkit."""
    repeated = []

    def pairs_hook(pairs):
        repeated.append(len({k for k, _ in pairs}) != len(pairs))
        return dict(pairs)

    json.loads(raw[8 : 8 + struct.unpack("<Q", raw[:8])[0]], object_pairs_hook=pairs_hook)
    return any(repeated)


# What weightkit says about some refused corpus files: each rule names the tensor that breaks it.
MESSAGES = {
    "tensor not an object": "tensor 'a' is a JSON int, not an object",
    "missing shape": "tensor 'a' has no 'shape'",
    "dtype a list": r"tensor 'a' has unknown dtype \['F32'\]",
    "unknown dtype": "tensor 'a' has unknown dtype 'F99'",
    "second tensor bad": r"tensor 'b': shape must be a list of integers from 0 to 2\^64-1",
    "minus zero offset": r"tensor 'a': data_offsets must be a list of integers",
    "offsets a number": r"tensor 'a': data_offsets must be a list of integers",
    "three offsets": "tensor 'a': data_offsets must hold 2 numbers, not 3",
    "nested 126 deep": "tensor 'a': field 'x' nests deeper than JSON parsers allow",
    "bits overflow": r"tensor 'a': the size of shape \[2305843009213693952\] overflows 64 bits",
    "F4 odd count": "tensor 'a': 3 F4 elements are not a whole number of bytes",
    "size mismatch": r"tensor 'a': F32 \[2\] takes 8 bytes, its data offsets span 4",
    "overlap": r"tensor 'b' has data offsets \[4, 8\]; the previous tensor ends at 8",
    "lone surrogate in name": "lone surrogate escape",
    "metadata int value": "__metadata__ must map strings to strings",
}


@pytest.mark.parametrize("case", MESSAGES, ids=list(MESSAGES))
def test_refusals_say_which_tensor_and_rule(tmp_path, case):
    path = tmp_path / "x.safetensors"
    path.write_bytes(CORPUS[case])
    with pytest.raises(FormatError, match=MESSAGES[case]):
        SafetensorsFile(path)


def test_errors_name_file_offset_and_rule(tmp_path):
    path = tmp_path / "x.safetensors"
    path.write_bytes(CORPUS["hole at start"])
    with pytest.raises(FormatError) as e:
        SafetensorsFile(path)
    header_len = struct.unpack("<Q", CORPUS["hole at start"][:8])[0]
    assert e.value.path == str(path) and e.value.offset == 8 + header_len + 4
    assert "no holes or overlaps" in str(e.value)
    path.write_bytes(CORPUS["trailing data"])
    with pytest.raises(FormatError, match="cover 4 bytes of data but the file holds 5"):
        SafetensorsFile(path)


SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I8": 1, "U8": 1, "F64": 8, "BOOL": 1, "F4": 0.5}


@st.composite
def headers(draw):
    """A header in one of several writers' styles, valid or subtly not, and the data size it describes."""
    names = draw(st.lists(st.text(min_size=0, max_size=6), min_size=1, max_size=6))
    entries, offset = [], 0
    for name in names:
        dtype = draw(st.sampled_from(list(SIZES)))
        shape = draw(st.lists(st.integers(0, 5), max_size=3))
        size = int(prod(shape) * SIZES[dtype]) + draw(st.sampled_from([0] * 15 + [1]))
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
    obj.update(entries)  # a repeated name is dropped here: no header repeats a key
    separators = (", ", ": ") if style == "spaced" else (",", ":")
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()), separators=separators)
    text += " " * draw(st.integers(0, 7))
    return text, offset + draw(st.sampled_from([0] * 7 + [2]))


@pytest.fixture(scope="module")
def header_path(tmp_path_factory) -> Path:
    """One file that each generated header overwrites (a folder for each cost more than the reading)."""
    return tmp_path_factory.mktemp("h") / "h.safetensors"


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(case=headers())
def test_generated_headers_read_as_the_reference_reads_them(header_path, case):
    text, data_size = case
    path = header_path
    path.write_bytes(st_file(text, bytes(data_size)))
    try:
        with safe_open(str(path), framework="np") as f:
            theirs = {name: (f.get_slice(name).get_dtype(), f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118
    except SafetensorError:
        theirs = None
    try:
        with SafetensorsFile(path) as f:
            tensors = dict(f.tensors)
    except FormatError:
        tensors = None
    assert (tensors is None) == (theirs is None)
    if tensors is not None:
        assert {name: (t.dtype.value, list(t.shape)) for name, t in tensors.items()} == theirs
        header = json.loads(text)
        for name, t in tensors.items():
            start, stop = header[name]["data_offsets"]
            assert (t.offset, t.nbytes) == (8 + len(text.encode()) + start, stop - start)
        assert [t.offset for t in tensors.values()] == sorted(t.offset for t in tensors.values())  # data order


@pytest.fixture(scope="module")
def valid_bytes():
    return st_file(
        '{"__metadata__":{"format":"pt"},"a":' + tensor("F16", "[2,3]", "[0,12]") + ',"b":'
        + tensor("I8", "[4]", "[12,16]") + ',"c":' + tensor("BF16", "[0]", "[16,16]") + "}",
        bytes(range(16)),
    )  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_corruption_same_verdict(tmp_path, valid_bytes, data):
    raw = bytearray(valid_bytes)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.sampled_from([0, 0x20, ord("{"), ord("}"), ord('"'), ord("0"), ord("9"), ord(","),
                                              ord("["), 0xFF, data.draw(st.integers(0, 255))]))  # fmt: skip
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    path = tmp_path / "r.safetensors"
    overwrite(path, raw)
    ours, theirs = weightkit_reads(path), reference_reads(path)
    if ours is None and theirs is not None:
        assert repeats_a_key(bytes(raw))  # the one deliberate departure
    else:
        assert normalize(ours) == normalize(theirs)


def test_truncation_anywhere(tmp_path, valid_bytes):
    path = tmp_path / "t.safetensors"
    for size in range(len(valid_bytes)):
        overwrite(path, valid_bytes[:size])
        assert weightkit_reads(path) is None and reference_reads(path) is None
    overwrite(path, valid_bytes)
    assert weightkit_reads(path) == (["a", "b", "c"], {"format": "pt"})
