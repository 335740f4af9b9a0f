"""Parse a GGUF file's header, metadata and tensor infos from a memory map, checking every number.

Every count, length and offset read from the file is checked against the bytes that remain before it is
used, so a hostile file costs at most its own size in memory and raises `FormatError` at the byte where
it goes wrong. Large arrays are parsed with numpy; string arrays are checked by one tight loop and decoded
when first used.
"""

from __future__ import annotations

import itertools
import math
import mmap
import struct
from dataclasses import dataclass

import numpy as np

from .._io import BufferSource
from ..dtypes import GGML_TYPES, GGMLType
from ..errors import FormatError
from ..model import TensorInfo
from .constants import (
    DEFAULT_ALIGNMENT,
    KEY_ALIGNMENT,
    MAGIC,
    MAX_ARRAY_NESTING,
    MAX_DIMS,
    SCALAR_CODES,
    GGUFValueType,
)
from .values import ReadStrings, Value

_T = GGUFValueType
_INT64_MAX = 2**63 - 1
_UINT64_MAX = 2**64 - 1
# Smallest possible encodings, used to refuse counts the remaining bytes cannot hold.
_MIN_KV_BYTES = 8 + 1 + 4 + 1  # key length, a 1-byte key, value type, a 1-byte value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # name length, n_dims, type, offset
_MIN_ELEMENT_BYTES = {_T.STRING: 8, _T.ARRAY: 12}


@dataclass
class ParsedGGUF:
    """Everything in a GGUF file but the tensor data."""

    version: int
    byte_order: str
    metadata: dict[str, Value]
    tensors: dict[str, TensorInfo]
    alignment: int
    data_offset: int  # where the tensor data section starts
    value_spans: dict[str, tuple[int, int]]  # where each metadata value's bytes (after its type tag) lie
    # Read header-only: the tensors whose data the file does not (wholly) hold, and how many bytes each lacks.
    missing: dict[str, int]


class _Parser:
    def __init__(self, src: BufferSource) -> None:
        self.src = src
        self.pos = 0

    @property
    def buf(self) -> mmap.mmap | bytes:
        """The bytes the source holds (a remote source holds more after a `need`: never keep it across one)."""
        return self.src.buffer

    def fail(self, reason: str, offset: int | None = None) -> FormatError:
        return self.src.error(self.pos if offset is None else offset, reason)

    def header(self) -> tuple[int, int, int]:
        src = self.src
        if src.size < 4 or src.bytes(0, 4, "magic") != MAGIC:
            head = src.bytes(0, min(4, src.size), "magic")
            raise self.fail(f"not a GGUF file: starts with {head!r}, expected {MAGIC!r}", 0)
        (version,) = src.unpack(struct.Struct("<I"), 4, "the GGUF version")
        self.order = "<"
        if version & 0xFFFF == 0 and version:  # written on a big-endian machine: every number is swapped
            self.order = ">"
            version = int.from_bytes(version.to_bytes(4, "little"), "big")
        if version == 1:
            raise self.fail("GGUF version 1 is no longer supported (re-convert the model)", 4)
        if version not in (2, 3):
            raise self.fail(f"unsupported GGUF version {version} (weightkit reads versions 2 and 3)", 4)
        self.u32 = struct.Struct(self.order + "I")
        self.u64 = struct.Struct(self.order + "Q")
        self.scalars = {t: struct.Struct(self.order + code) for t, code in _STRUCT_CODES.items()}
        self.pos = 8
        n_tensors = self.read(self.u64, "the tensor count")
        n_kv = self.read(self.u64, "the metadata key count")
        remain = src.size - self.pos
        if n_kv * _MIN_KV_BYTES + n_tensors * _MIN_TENSOR_INFO_BYTES > remain:
            raise self.fail(
                f"header claims {n_kv} metadata keys and {n_tensors} tensors, "
                f"more than the {remain} remaining bytes can hold",
                8,
            )
        return version, n_tensors, n_kv

    def read(self, fmt: struct.Struct, what: str) -> int:
        (value,) = self.src.unpack(fmt, self.pos, what)
        self.pos += fmt.size
        return value

    def string(self, what: str) -> str:
        start = self.pos
        n = self.read(self.u64, f"the length of {what}")
        if n > self.src.size - self.pos:
            raise self.fail(f"{what} claims {n} bytes; only {self.src.size - self.pos} remain", start)
        self.src.need(self.pos, n, what)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        return raw.decode("utf-8", "surrogateescape")

    def value_type(self, what: str) -> GGUFValueType:
        start = self.pos
        t = self.read(self.u32, what)
        try:
            return GGUFValueType(t)
        except ValueError:
            raise self.fail(f"{what} is {t}, not a GGUF value type (0-12)", start) from None

    def value(self, t: GGUFValueType, key: str, depth: int = 0) -> Value:
        if t == _T.ARRAY:
            return self.array(key, depth)
        if t == _T.STRING:
            return Value(self.string(f"the value of {key!r}"), t)
        start = self.pos
        v = self.read(self.scalars[t], f"the value of {key!r}")
        if t == _T.BOOL:  # written back as 0 or 1, as ggml writes a bool (`edit_gguf` copies the stored byte)
            return Value(v != 0, t)
        return Value(v, t, encoded=(self.order, bytes(self.buf[start : self.pos])))

    def array(self, key: str, depth: int) -> Value:
        if depth >= MAX_ARRAY_NESTING:
            raise self.fail(f"{key!r}: arrays nested more than {MAX_ARRAY_NESTING} deep")
        element = self.value_type(f"the element type of {key!r}")
        count_at = self.pos
        n = self.read(self.u64, f"the element count of {key!r}")
        remain = self.src.size - self.pos
        size = _MIN_ELEMENT_BYTES.get(element) or np.dtype(SCALAR_CODES[element]).itemsize
        if n * size > remain:
            raise self.fail(
                f"{key!r}: {n} {element.name} elements cannot fit in the {remain} remaining bytes", count_at
            )
        # A source holding part of its file holds (or refuses) the smallest encoding of every element before
        # the list of them is made: the file's size a server claims would not bound that allocation.
        self.src.need(self.pos, n * size, f"the elements of {key!r}")
        if element == _T.STRING:
            return self.strings(n, key, count_at - 4)
        if element == _T.ARRAY:  # each item is itself (element type, count, items)
            return Value([self.array(key, depth + 1) for _ in range(n)], _T.ARRAY, element)
        raw = np.frombuffer(self.buf, np.dtype(self.order + SCALAR_CODES[element]), n, self.pos)
        self.pos += n * size
        arr = raw != 0 if element == _T.BOOL else raw.astype(raw.dtype.newbyteorder("="))
        return Value(arr, _T.ARRAY, element)

    def strings(self, n: int, key: str, head: int) -> ReadStrings:
        """The array of `n` length-prefixed strings whose element type is at `head`, its lengths checked here
        and its text decoded when first used. The hot loop of every vocabulary (262,144 tokens for Gemma 3)
        skips from length to length unchecked; if it runs past the bytes held, `_check_strings` finds where."""
        unpack, buf, pos = self.u64.unpack_from, self.buf, self.pos
        try:
            for _ in itertools.repeat(None, n):
                pos += 8 + unpack(buf, pos)[0]
            held = pos <= self.src.held
        except (struct.error, OverflowError):  # a length led past the end of the buffer
            held = False
        self.pos = pos if held else self._check_strings(n, key)
        return ReadStrings(encoded=(self.order, bytes(self.buf[head : self.pos])))

    def _check_strings(self, n: int, key: str) -> int:
        """Where `n` strings from `pos` end, string by string: where one runs past the bytes held, the source
        fetches more (or refuses, naming the string) and the loop goes on from that string."""
        unpack = self.u64.unpack_from
        pos, first = self.pos, 0
        while True:
            buf, end = self.buf, self.src.held
            try:
                for i in range(first, n):
                    (length,) = unpack(buf, pos)
                    stop = pos + 8 + length
                    if stop > end:
                        reason = f"{key!r}: string {i} claims {length} bytes; only {self.src.size - pos - 8} remain"
                        break
                    pos = stop
                else:
                    return pos
            except struct.error:  # not even the 8-byte length is held
                stop, reason = pos + 8, f"{key!r}: the file ends inside string {i} of {n}"
            first = i
            self.src.reach(stop, pos, reason)

    def metadata(self, n_kv: int) -> tuple[dict[str, Value], dict[str, tuple[int, int]]]:
        """The values, and the span of each one's bytes, for copying them untouched."""
        values: dict[str, Value] = {}
        spans: dict[str, tuple[int, int]] = {}
        for i in range(n_kv):
            start = self.pos
            key = self.string(f"metadata key {i}")
            if not key:
                raise self.fail(f"metadata key {i} is empty", start)
            if key in values:
                raise self.fail(f"duplicate metadata key {key!r}", start)
            t = self.value_type(f"the value type of {key!r}")
            at = self.pos
            values[key] = self.value(t, key)
            spans[key] = (at, self.pos)
        return values, spans

    def tensor_infos(self, n: int) -> list[tuple[str, GGMLType, tuple[int, ...], int, int, int]]:
        """(name, type, numpy shape, relative offset, nbytes, position of the entry) for every tensor.

        The hot loop (`_tensor_infos_held`) reads the entries from the bytes held and tests only that each is
        well formed; at anything else `_check_tensor_infos` reads them again, number by number, to say where
        the file goes wrong (or to fetch the bytes a partial source does not hold yet)."""
        start = self.pos
        try:
            infos = self._tensor_infos_held(n)
        except (struct.error, ZeroDivisionError):  # an entry ran past the bytes held; a type with no blocks
            infos = None
        if infos is not None:
            return infos
        self.pos = start
        return self._check_tensor_infos(n)

    def _tensor_infos_held(self, n: int) -> list[tuple[str, GGMLType, tuple[int, ...], int, int, int]] | None:
        """`tensor_infos` from the buffer as it is, or None at the first entry that is not plainly valid."""
        buf, held, pos = self.buf, self.src.held, self.pos
        length_of, dims_of = self.u64.unpack_from, self.u32.unpack_from
        shapes = [struct.Struct(f"{self.order}{k}Q").unpack_from for k in range(MAX_DIMS + 1)]
        type_and_offset = struct.Struct(self.order + "IQ").unpack_from
        infos, seen = [], set()
        for _ in itertools.repeat(None, n):
            start = pos
            end = pos + 8 + length_of(buf, pos)[0]
            if end > held:
                return None
            name = buf[pos + 8 : end].decode("utf-8", "surrogateescape")
            (n_dims,) = dims_of(buf, end)
            if n_dims > MAX_DIMS or name in seen:
                return None
            ne = shapes[n_dims](buf, end + 4)
            pos = end + 4 + 8 * n_dims
            type_id, offset = type_and_offset(buf, pos)
            pos += 12
            count = math.prod(ne)
            tinfo = GGML_TYPES.get(type_id)  # type: ignore[call-overload]
            # a zero dimension (allowed) goes the careful way: its product hides the others' sizes
            if not 0 < count <= _INT64_MAX or tinfo is None or tinfo.removed or (ne[0] if ne else 1) % tinfo.block_size:
                return None
            seen.add(name)
            infos.append((name, tinfo.type, tuple(reversed(ne)), offset, tinfo.nbytes(count), start))
        self.pos = pos
        return infos

    def _check_tensor_infos(self, n: int) -> list[tuple[str, GGMLType, tuple[int, ...], int, int, int]]:
        """`tensor_infos` number by number, each checked against the bytes left: raises where one is wrong."""
        infos = []
        seen: set[str] = set()
        for i in range(n):
            start = self.pos
            name = self.string(f"the name of tensor {i}")
            if name in seen:
                raise self.fail(f"duplicate tensor name {name!r}", start)
            seen.add(name)
            n_dims = self.read(self.u32, f"the dimension count of {name!r}")
            if n_dims > MAX_DIMS:
                raise self.fail(
                    f"tensor {name!r} has {n_dims} dimensions; ggml allows at most {MAX_DIMS}", self.pos - 4
                )
            dims_at = self.pos
            ne = self.src.unpack(struct.Struct(f"{self.order}{n_dims}Q"), dims_at, f"the dimensions of {name!r}")
            self.pos += 8 * n_dims
            count = 1
            for d in ne:  # a zero dimension is allowed, as in ggml: the tensor holds no elements
                if d > _INT64_MAX:
                    raise self.fail(f"tensor {name!r} has a negative dimension {list(ne)}", dims_at)
                count *= d
                if count > _INT64_MAX:
                    raise self.fail(f"tensor {name!r} has more than 2^63 elements {list(ne)}", dims_at)
            type_at = self.pos
            type_id = self.read(self.u32, f"the type of {name!r}")
            try:
                tinfo = GGML_TYPES[GGMLType(type_id)]
            except ValueError:
                raise self.fail(f"tensor {name!r} has unknown GGML type id {type_id}", type_at) from None
            if tinfo.removed:
                raise self.fail(
                    f"tensor {name!r} uses GGML type {tinfo.name} (id {type_id}), which ggml "
                    "removed; re-convert the model",
                    type_at,
                )
            row = ne[0] if ne else 1
            if row % tinfo.block_size:
                raise self.fail(
                    f"tensor {name!r}: rows of {row} elements are not a whole number of "
                    f"{tinfo.name} blocks of {tinfo.block_size}",
                    dims_at,
                )
            offset = self.read(self.u64, f"the data offset of {name!r}")
            infos.append((name, tinfo.type, tuple(reversed(ne)), offset, tinfo.nbytes(count), start))
        return infos


_STRUCT_CODES = {
    _T.UINT8: "B",
    _T.INT8: "b",
    _T.UINT16: "H",
    _T.INT16: "h",
    _T.UINT32: "I",
    _T.INT32: "i",
    _T.FLOAT32: "f",
    _T.BOOL: "B",
    _T.UINT64: "Q",
    _T.INT64: "q",
    _T.FLOAT64: "d",
}


def parse(src: BufferSource, *, header_only: bool = False) -> ParsedGGUF:
    """Parse and validate everything but the tensor data of the GGUF file behind `src`.

    `header_only` accepts tensor data cut short (a partial download, a header written by ggml's
    `only_meta`) and lists what is missing instead of refusing the file."""
    p = _Parser(src)
    version, n_tensors, n_kv = p.header()
    metadata, spans = p.metadata(n_kv)
    alignment = _alignment(src, metadata, spans)
    raw_infos = p.tensor_infos(n_tensors)
    data_offset = -(-p.pos // alignment) * alignment
    tensors, missing = _place_tensors(src, raw_infos, data_offset, alignment, header_only)
    return ParsedGGUF(version, p.order, metadata, tensors, alignment, data_offset, spans, missing)


def _alignment(src: BufferSource, metadata: dict[str, Value], spans: dict[str, tuple[int, int]]) -> int:
    value = metadata.get(KEY_ALIGNMENT)
    if value is None:
        return DEFAULT_ALIGNMENT
    at = spans[KEY_ALIGNMENT][0] - 4  # its type tag
    if value.type != _T.UINT32:
        raise src.error(at, f"{KEY_ALIGNMENT} must be a UINT32, not {value.type.name}")
    a = value.value
    if a == 0 or a & (a - 1):
        raise src.error(at, f"{KEY_ALIGNMENT} is {a}, not a power of two")
    return a


def _place_tensors(
    src: BufferSource, raw_infos, data_offset: int, alignment: int, header_only: bool
) -> tuple[dict[str, TensorInfo], dict[str, int]]:
    """Turn relative offsets into absolute ones, refusing misaligned or overlapping tensors, and truncated
    ones unless `header_only` (then they are listed with the bytes each lacks)."""
    tensors: dict[str, TensorInfo] = {}
    missing: dict[str, int] = {}
    for name, t, shape, rel, nbytes, entry in raw_infos:
        if rel % alignment:
            raise src.error(
                entry, f"tensor {name!r} starts at data offset {rel}, not a multiple of the alignment {alignment}"
            )
        if rel + -(-nbytes // alignment) * alignment > _UINT64_MAX:
            raise src.error(
                entry, f"tensor {name!r} of {nbytes} bytes at data offset {rel} ends past 2^64 bytes (ggml refuses it)"
            )
        start = data_offset + rel
        if nbytes and start + nbytes > src.size:  # a zero-element tensor lacks nothing, wherever it starts
            if not header_only:
                raise src.error(
                    entry,
                    f"tensor {name!r} occupies bytes {start}..{start + nbytes} but the file ends at {src.size} "
                    "(cut short? header_only=True reads its metadata and tensor infos)",
                )
            missing[name] = min(nbytes, start + nbytes - src.size)
        tensors[name] = TensorInfo(name, t, shape, start, nbytes)
    spans = sorted((i.offset, i.offset + i.nbytes, i.name) for i in tensors.values() if i.nbytes)
    for (_, end_a, name_a), (start_b, _, name_b) in itertools.pairwise(spans):
        if start_b < end_a:
            raise src.error(start_b, f"tensors {name_a!r} and {name_b!r} overlap")
    return tensors, missing
