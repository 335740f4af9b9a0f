"""Parse and validate a safetensors header exactly as Hugging Face's reference (its Rust core) does.

The reference accepts and rejects by these rules, which weightkit follows one for one (tested against it):
- 8-byte little-endian header length N, at most 100,000,000, and 8 + N within the file;
- the header is UTF-8 JSON (serde_json's dialect: no NaN/Infinity, no lone surrogates, nesting under 128
  levels, whitespace allowed before and after), an object whose keys are tensor names, plus the optional
  `__metadata__`, a map of strings to strings (or null);
- a tensor is an object with `dtype` (one of the reference's names), `shape` (integers 0..2^64-1) and
  `data_offsets` (exactly two such integers); other fields are ignored;
- sorted by offsets, the tensors tile the data buffer from 0 with no hole or overlap, each exactly
  elements x bits / 8 bytes long (whole bytes, no overflow past 2^64), and the buffer ends where the file does.

One deliberate departure: the format says "Duplicate keys are disallowed", and weightkit refuses a key
repeated in any JSON object of the header (a tensor name, a field of a tensor, a key of `__metadata__`,
a key inside an ignored field). The reference refuses only a repeated known field or `__metadata__`; a
repeated tensor name or metadata key it takes, the last one winning, so two readers of the same file
could disagree about its contents.
"""

from __future__ import annotations

import gc
import json
import re
import struct
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from math import prod
from typing import Any

import numpy as np

from .._io import ByteSource
from ..dtypes import SafetensorsDType
from ..model import CodedColumn, TensorInfo, TensorTable

MAX_HEADER_SIZE = 100_000_000
METADATA_KEY = "__metadata__"
_U64 = 2**64
_MAX_DEPTH = 127  # serde_json refuses the 128th level of nesting
_FIELDS = ("dtype", "shape", "data_offsets")
_DTYPE_LIST = list(SafetensorsDType)
_DTYPE_CODES = {t.value: k for k, t in enumerate(_DTYPE_LIST)}  # a dtype's name -> its place in the list


class _RepeatedKey(Exception):
    """Raised from inside json.loads: an object of the header holds `key` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, refusing a repeated key (which a dict would silently keep the last of)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _RepeatedKey(next(k for k, n in Counter(k for k, _ in pairs).items() if n > 1))
    return obj


def _int(literal: str) -> int | float:
    """serde_json reads "-0" as a float, which no size or offset may be."""
    return -0.0 if literal == "-0" else int(literal)


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


@dataclass
class ParsedSafetensors:
    metadata: dict[str, str] | None
    tensors: Mapping[str, TensorInfo]  # in data order
    header_size: int


def parse(src: ByteSource) -> ParsedSafetensors:
    """Validate the header of the safetensors file behind `src` and return its tensors."""
    collecting = gc.isenabled()
    gc.disable()  # tens of thousands of new objects, none cyclic: collecting them mid-parse only costs time
    try:
        return _parse(src)
    finally:
        if collecting:
            gc.enable()


def _parse(src: ByteSource) -> ParsedSafetensors:
    if src.size < 8:
        raise src.error(0, f"file of {src.size} bytes is too small for the 8-byte header length")
    (n,) = src.unpack(struct.Struct("<Q"), 0, "the header length")
    if n > MAX_HEADER_SIZE:
        raise src.error(0, f"header length {n} is over the limit of {MAX_HEADER_SIZE} bytes")
    if 8 + n > src.size:
        raise src.error(0, f"header length {n} runs past the end of the file ({src.size} bytes)")
    raw = src.bytes(8, n, "the header")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise src.error(8 + e.start, "the header is not valid UTF-8") from None
    metadata, tensors = _parse_common_case(src, text, 8 + n) or _parse_exactly(src, text, 8 + n)
    return ParsedSafetensors(metadata, tensors, n)


def _parse_exactly(src: ByteSource, text: str, base: int) -> tuple[dict[str, str] | None, dict[str, TensorInfo]]:
    """Every rule checked one value at a time, with the precise error; for headers the bulk path declines."""
    try:
        header = json.loads(text, object_pairs_hook=_object, parse_constant=_no_constants, parse_int=_int)
    except json.JSONDecodeError as e:
        raise src.error(8 + len(text[: e.pos].encode()), f"the header is not valid JSON: {e.msg}") from None
    except _RepeatedKey as e:
        raise src.error(8, f"the key {e.key!r} appears more than once in one JSON object") from None
    except (ValueError, RecursionError) as e:
        raise src.error(8, f"the header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise src.error(8, f"the header is a JSON {type(header).__name__}, not an object")
    metadata = _metadata(src, header.pop(METADATA_KEY, None))
    entries = sorted(((_tensor(src, name, info), name) for name, info in header.items()), key=lambda e: e[0][2])
    tensors: dict[str, TensorInfo] = {}
    end = 0
    for (dtype, shape, (start, stop)), name in entries:
        if start != end or stop < start:
            raise src.error(
                base + start if base + start <= src.size else None,
                f"tensor {name!r} has data offsets [{start}, {stop}]; the previous tensor ends at {end} "
                "(no holes or overlaps allowed)",
            )
        count = 1
        for d in shape:
            count *= d
        bits = count * dtype.bits
        if count >= _U64 or bits >= _U64:
            raise src.error(8, f"tensor {name!r}: the size of shape {shape} overflows 64 bits")
        if bits % 8:
            raise src.error(8, f"tensor {name!r}: {count} {dtype.value} elements are not a whole number of bytes")
        if stop - start != bits // 8:
            raise src.error(
                base + start if base + start <= src.size else None,
                f"tensor {name!r}: {dtype.value} {shape} takes {bits // 8} bytes, its data offsets span {stop - start}",
            )
        tensors[name] = TensorInfo(name, dtype, tuple(shape), base + start, stop - start)
        end = stop
    if base + end != src.size:
        raise src.error(base + end, f"the tensors cover {end} bytes of data but the file holds {src.size - base}")
    return metadata, tensors


# What plain json.loads accepts but serde_json refuses or reads otherwise: "-0", and \ud800-\udfff escapes.
_NEEDS_CARE = re.compile(r"-0(?![0-9.eE])|\\u[dD][89a-fA-F]")
_DTYPE_BITS = np.array([t.bits for t in _DTYPE_LIST], dtype=np.uint64)
_UINT = "(?:0|[1-9][0-9]*+)"  # possessive (*+, ++) where nothing could match otherwise: a third faster
_FIELD_PATTERNS = {
    "dtype": r'"dtype":"[A-Z0-9_]++"',
    "shape": rf'"shape":\[(?:{_UINT}(?:,{_UINT})*+)?\]',
    "data_offsets": rf'"data_offsets":\[{_UINT},{_UINT}\]',
}
_METADATA_START = '{"' + METADATA_KEY + '":'
_DECODER = json.JSONDecoder(parse_constant=_no_constants, object_pairs_hook=_object)


@dataclass(frozen=True)
class _Layout:
    """One compact way of writing the tensor entries, fields in a fixed order: the reference's serde
    writes dtype, shape, data_offsets; writers that sort keys (Go, nlohmann::json) data_offsets, dtype, shape.

    Split at its quotes, an entry is ten tokens: the strings (the name, the field names, the dtype) and
    the text between them, which holds the shape and offsets lists. `tokens` maps each field to the
    position of its value's token within an entry.
    """

    pattern: re.Pattern[str]
    tokens: dict[str, int]

    @classmethod
    def of(cls, order: tuple[str, ...]) -> _Layout:
        name = r'"[^"\\\x00-\x1f]*+"'  # no escapes or control characters: every quote is a delimiter
        entry = name + r":\{" + ",".join(_FIELD_PATTERNS[f] for f in order) + r"\}"
        tokens, position = {}, 3  # 1: the name, 2: ':{', 3: the first field's name
        for field in order:
            tokens[field] = position + (2 if field == "dtype" else 1)
            position += 4 if field == "dtype" else 2
        return cls(re.compile(rf"(?:{entry},)*+{entry}\}}[ ]*+"), tokens)


_LAYOUTS = [_Layout.of(("dtype", "shape", "data_offsets")), _Layout.of(("data_offsets", "dtype", "shape"))]
_NOT_DIGITS = str.maketrans("", "", ":}[] ")
# A shape whose element count reaches this might overflow 64 bits once multiplied by a dtype's bits.
_MAX_FAST_COUNT = 2**64 // 64


def _numbers(tokens: list[str]) -> np.ndarray:
    """Every integer in `tokens` (':[1,2],', ':[3,4]},', ...), in order, parsed in one C call.

    The layout's pattern has checked that they are plain decimal integers; one of 2^64 or more reads
    as 2^64-1, which no offset in a file can be, so the tiling check then sends the header down the exact path.
    """
    return np.fromstring("".join(tokens).translate(_NOT_DIGITS).rstrip(","), dtype=np.uint64, sep=",")


def _parse_common_case(src: ByteSource, text: str, base: int) -> tuple[dict[str, str] | None, TensorTable] | None:
    """Validate a compactly written header in bulk (one regex match, C-speed splits, numpy checks).

    Returns None whenever anything is unusual (whitespace between tokens, escapes in names, other field
    orders, repeated names, a layout error): the exact path then gives the verdict and the precise message.
    Whatever this accepts, the exact path accepts too, with the same result.
    """
    metadata, body = None, 1
    if text.startswith(_METADATA_START):
        try:
            metadata, end = _DECODER.raw_decode(text, len(_METADATA_START))
        except (ValueError, RecursionError, _RepeatedKey):
            return None
        if (
            text[end : end + 1] != ","
            or not (metadata is None or (type(metadata) is dict and set(map(type, metadata.values())) <= {str}))
            or _NEEDS_CARE.search(text, 0, end)  # the tensors' pattern below admits neither
        ):
            return None
        body = end + 1
    elif not text.startswith("{"):
        return None
    layout = next((lay for lay in _LAYOUTS if lay.pattern.fullmatch(text, body)), None)
    if layout is None:
        return None
    tokens = text[body:].split('"')
    names = tokens[1::10]
    m = len(names)
    shape_texts = tokens[layout.tokens["shape"] :: 10]
    # Models repeat a few dtypes and shapes thousands of times: each distinct one is parsed once and the
    # rows hold its number.
    shape_codes = {t: k for k, t in enumerate(set(shape_texts))}
    shapes = [tuple(json.loads(t.translate(_NOT_DIGITS).rstrip(",").join("[]"))) for t in shape_codes]
    counts = list(map(prod, shapes))
    if max(counts) >= _MAX_FAST_COUNT or max(chain.from_iterable(shapes), default=0) >= _U64:
        return None  # a dimension of 2^64 or more, even beside a zero, is not a u64: the exact path refuses it
    try:
        dtype_codes = np.fromiter(map(_DTYPE_CODES.__getitem__, tokens[layout.tokens["dtype"] :: 10]), np.intp, m)
    except KeyError:
        return None
    shape_rows = np.fromiter(map(shape_codes.__getitem__, shape_texts), np.intp, m)
    bits = _DTYPE_BITS[dtype_codes] * np.array(counts, dtype=np.uint64)[shape_rows]
    spans = _numbers(tokens[layout.tokens["data_offsets"] :: 10]).reshape(m, 2)
    order = np.lexsort((spans[:, 1], spans[:, 0]))
    starts, ends, bits = spans[order, 0], spans[order, 1], bits[order]
    if (
        starts[0] != 0
        or (starts[1:] != ends[:-1]).any()
        or (ends < starts).any()
        or (bits % 8).any()
        or ((ends - starts) != bits // 8).any()
        or base + int(ends[-1]) != src.size
    ):
        return None
    if not (np.diff(order) == 1).all():  # writers lay files out in header order; others get sorted here
        names = [names[i] for i in order.tolist()]
        dtype_codes, shape_rows = dtype_codes[order], shape_rows[order]
    try:
        table = TensorTable(
            names,
            CodedColumn(_DTYPE_LIST, dtype_codes),
            CodedColumn(shapes, shape_rows),
            starts + np.uint64(base),
            ends - starts,
        )
    except ValueError:  # a repeated name
        return None
    return (metadata, table) if METADATA_KEY not in table else None


def _metadata(src: ByteSource, value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise src.error(8, f"{METADATA_KEY} must map strings to strings")
    for s in (*value.keys(), *value.values()):
        _check_text(src, s)
    return dict(value)


def _check_text(src: ByteSource, s: str) -> None:
    """serde_json refuses escaped lone surrogates (\\ud800), which Python's json lets through."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise src.error(8, f"the header holds a lone surrogate escape in {s!r}") from None


def _tensor(src: ByteSource, name: str, info: Any) -> tuple[SafetensorsDType, list[int], tuple[int, int]]:
    _check_text(src, name)
    if not isinstance(info, dict):
        raise src.error(8, f"tensor {name!r} is a JSON {type(info).__name__}, not an object")
    for field in _FIELDS:
        if field not in info:
            raise src.error(8, f"tensor {name!r} has no {field!r}")
    dtype = info["dtype"]
    if not isinstance(dtype, str) or dtype not in _DTYPE_CODES:
        raise src.error(8, f"tensor {name!r} has unknown dtype {dtype!r}")
    shape = _uints(src, name, "shape", info["shape"])
    offsets = _uints(src, name, "data_offsets", info["data_offsets"])
    if len(offsets) != 2:
        raise src.error(8, f"tensor {name!r}: data_offsets must hold 2 numbers, not {len(offsets)}")
    for key, value in info.items():
        if key not in _FIELDS and _depth(value) > _MAX_DEPTH - 2:
            raise src.error(8, f"tensor {name!r}: field {key!r} nests deeper than JSON parsers allow")
    return _DTYPE_LIST[_DTYPE_CODES[dtype]], shape, (offsets[0], offsets[1])


def _uints(src: ByteSource, name: str, field: str, value: Any) -> list[int]:
    if not isinstance(value, list) or not all(type(v) is int and 0 <= v < _U64 for v in value):
        raise src.error(8, f"tensor {name!r}: {field} must be a list of integers from 0 to 2^64-1")
    return value


def _depth(value: Any) -> int:
    """Nesting depth of a JSON value (a scalar is 0, [] is 1), without recursion."""
    depth, level = 0, [value]
    while True:
        containers = [v for v in level if isinstance(v, (list, dict))]
        if not containers:
            return depth
        depth += 1
        level = [c for v in containers for c in (v.values() if isinstance(v, dict) else v)]
