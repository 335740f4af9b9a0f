"""Parse and validate a safetensors header by the rules of Hugging Face's reference (its Rust core), and
by the format's own rule against duplicate keys, which the reference does not enforce.

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

import json
import struct
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import chain, repeat
from math import prod
from operator import contains, eq, is_, itemgetter, lt, mul
from typing import Any

import numpy as np

from .._io import BufferSource
from ..dtypes import SafetensorsDType
from ..errors import FormatError
from ..model import CodedColumn, TensorInfo, TensorTable

MAX_HEADER_SIZE = 100_000_000
METADATA_KEY = "__metadata__"
_U64 = 2**64
_MAX_DEPTH = 127  # serde_json refuses the 128th level of nesting
_FIELDS = ("dtype", "shape", "data_offsets")
_DTYPES = {t.value: t for t in SafetensorsDType}
_BITS = {t.value: t.bits for t in SafetensorsDType}  # by name: a str hashes in C, an enum member in Python


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


def parse(src: BufferSource) -> ParsedSafetensors:
    """Validate the header of the safetensors file behind `src` and return its tensors."""
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
    header = _decode(src, text)
    metadata = _metadata(src, header.pop(METADATA_KEY, None))
    return ParsedSafetensors(metadata, _tensors(src, header, 8 + n), n)


def _decode(src: BufferSource, text: str) -> dict[str, Any]:
    """The header as JSON objects, refusing what serde_json refuses and any repeated key."""
    try:
        # A custom int parser costs a Python call per number; only "-0" needs it.
        header = json.loads(
            text, object_pairs_hook=_object, parse_constant=_no_constants, parse_int=_int if "-0" in text else None
        )
    except json.JSONDecodeError as e:
        raise src.error(8 + len(text[: e.pos].encode()), f"the header is not valid JSON: {e.msg}") from None
    except _RepeatedKey as e:
        raise src.error(8, f"the key {e.key!r} appears more than once in one JSON object") from None
    except (ValueError, RecursionError) as e:
        raise src.error(8, f"the header is not valid JSON: {e}") from None
    if type(header) is not dict:
        raise src.error(8, f"the header is a JSON {type(header).__name__}, not an object")
    return header


def _check(src: BufferSource, ok: list[bool], message: Callable[[int], str]) -> None:
    """Raise for the first tensor that breaks a rule (its flag in `ok` is False), with `message(its index)`."""
    if not all(ok):
        raise src.error(8, message(ok.index(False)))


def _tensors(src: BufferSource, header: dict[str, Any], base: int) -> TensorTable:
    """Check the tensor entries one rule at a time, each rule one C-speed pass over all of them (the costlier
    ones first over everything at once, then tensor by tensor only to say which breaks it), and lay them
    out in data order."""
    names, infos = list(header), list(header.values())
    if not _encodable("".join(names)):
        _check(src, list(map(_encodable, names)), lambda i: _surrogate(names[i]))
    _check(
        src,
        list(map(is_, map(type, infos), repeat(dict))),
        lambda i: f"tensor {names[i]!r} is a JSON {type(infos[i]).__name__}, not an object",
    )
    dtypes, shapes, offsets = (_column(src, names, infos, field) for field in _FIELDS)

    def unknown(i: int) -> str:
        return f"tensor {names[i]!r} has unknown dtype {dtypes[i]!r}"

    _check(src, list(map(is_, map(type, dtypes), repeat(str))), unknown)  # first: a list cannot be looked up
    _check(src, list(map(contains, repeat(_DTYPES), dtypes)), unknown)
    _uints_each(src, names, shapes, "shape")
    spans = _uints_each(src, names, offsets, "data_offsets")
    _check(
        src,
        list(map(eq, map(len, offsets), repeat(2))),
        lambda i: f"tensor {names[i]!r}: data_offsets must hold 2 numbers, not {len(offsets[i])}",
    )
    if max(map(len, infos), default=0) > len(_FIELDS):
        for name, info in zip(names, infos, strict=True):
            for key, value in info.items():
                if key not in _FIELDS and _depth(value) > _MAX_DEPTH - 2:
                    raise src.error(8, f"tensor {name!r}: field {key!r} nests deeper than JSON parsers allow")
    bits = list(map(mul, map(prod, shapes), map(_BITS.__getitem__, dtypes)))
    _check(
        src,
        list(map(lt, bits, repeat(_U64))),
        lambda i: f"tensor {names[i]!r}: the size of shape {shapes[i]} overflows 64 bits",
    )
    sizes = np.array(bits, dtype=np.uint64)
    _check(
        src,
        (sizes % np.uint64(8) == 0).tolist(),
        lambda i: f"tensor {names[i]!r}: {prod(shapes[i])} {dtypes[i]} elements are not a whole number of bytes",
    )
    return _layout(src, names, dtypes, shapes, spans, sizes // np.uint64(8), base)


def _column(src: BufferSource, names: list[str], infos: list[dict[str, Any]], field: str) -> list[Any]:
    """Every tensor's `field`, which each must have."""
    _check(src, list(map(contains, infos, repeat(field))), lambda i: f"tensor {names[i]!r} has no {field!r}")
    return list(map(itemgetter(field), infos))


def _uints_each(src: BufferSource, names: list[str], lists: list[Any], field: str) -> list[int]:
    """All the values of `lists` (one value of `field` per tensor) in a row, each a list of integers from 0
    to 2^64-1."""
    _check(src, list(map(is_, map(type, lists), repeat(list))), lambda i: _not_uints(names[i], field))
    values = list(chain.from_iterable(lists))
    if not _uints(values):
        _check(src, list(map(_uints, lists)), lambda i: _not_uints(names[i], field))
    return values


def _not_uints(name: str, field: str) -> str:
    return f"tensor {name!r}: {field} must be a list of integers from 0 to 2^64-1"


def _uints(values: list[Any]) -> bool:
    """Whether every value is an integer from 0 to 2^64-1 (not a bool, a float or "-0")."""
    return set(map(type, values)) <= {int} and (not values or (min(values) >= 0 and max(values) < _U64))


def _layout(
    src: BufferSource,
    names: list[str],
    dtypes: list[str],
    shapes: list[list[int]],
    spans: list[int],
    nbytes: np.ndarray,
    base: int,
) -> TensorTable:
    """Sorted by offsets, the tensors must tile the data from 0 to the end of the file, each its own size."""
    m = len(names)
    pairs = np.array(spans, dtype=np.uint64).reshape(m, 2)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    starts, stops, nbytes = pairs[order, 0], pairs[order, 1], nbytes[order]
    ends = np.concatenate((np.zeros(1, np.uint64), stops[:-1]))  # where the tensor before each one ends

    def refuse(k: int, reason: str) -> FormatError:
        start = base + int(starts[k])
        return src.error(start if start <= src.size else None, reason)

    if (bad := np.flatnonzero((starts != ends) | (stops < starts))).size:
        k = int(bad[0])
        raise refuse(
            k,
            f"tensor {names[order[k]]!r} has data offsets [{starts[k]}, {stops[k]}]; the previous tensor ends "
            f"at {ends[k]} (no holes or overlaps allowed)",
        )
    if (bad := np.flatnonzero(stops - starts != nbytes)).size:
        k = int(bad[0])
        i = order[k]
        raise refuse(
            k,
            f"tensor {names[i]!r}: {dtypes[i]} {shapes[i]} takes {nbytes[k]} bytes, "
            f"its data offsets span {stops[k] - starts[k]}",
        )
    end = int(stops[-1]) if m else 0
    if base + end != src.size:
        raise src.error(base + end, f"the tensors cover {end} bytes of data but the file holds {src.size - base}")
    in_order = bool((np.diff(order) == 1).all())  # as writers lay files out; anything else is sorted here
    return TensorTable(
        names if in_order else [names[i] for i in order.tolist()],
        CodedColumn(list(map(_DTYPES.__getitem__, dtypes)), order),
        CodedColumn(list(map(tuple, shapes)), order),
        starts + np.uint64(base),
        nbytes,
    )


def _metadata(src: BufferSource, value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if type(value) is not dict or not all(type(v) is str for v in value.values()):
        raise src.error(8, f"{METADATA_KEY} must map strings to strings")
    for s in (*value.keys(), *value.values()):
        if not _encodable(s):
            raise src.error(8, _surrogate(s))
    return value


def _encodable(s: str) -> bool:
    """serde_json refuses escaped lone surrogates (\\ud800), which Python's json lets through."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _surrogate(s: str) -> str:
    return f"the header holds a lone surrogate escape in {s!r}"


def _depth(value: Any) -> int:
    """Nesting depth of a JSON value (a scalar is 0, [] is 1), without recursion."""
    depth, level = 0, [value]
    while True:
        containers = [v for v in level if isinstance(v, (list, dict))]
        if not containers:
            return depth
        depth += 1
        level = [c for v in containers for c in (v.values() if isinstance(v, dict) else v)]
