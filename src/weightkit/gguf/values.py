"""Typed GGUF metadata values, and the read-only mapping a reader exposes.

A value keeps its GGUF type so that a file read and written again comes out byte for byte the same; the
mapping hands out plain Python/numpy values for everyday use.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError, ArgumentTypeError
from .constants import SCALAR_CODES, GGUFValueType

_T = GGUFValueType
_INT_RANGES = {
    _T.UINT8: (0, 2**8),
    _T.INT8: (-(2**7), 2**7),
    _T.UINT16: (0, 2**16),
    _T.INT16: (-(2**15), 2**15),
    _T.UINT32: (0, 2**32),
    _T.INT32: (-(2**31), 2**31),
    _T.UINT64: (0, 2**64),
    _T.INT64: (-(2**63), 2**63),
}


@dataclass(frozen=True, eq=False)
class Value:
    """One metadata value with its GGUF type; `element` is the element type of an array.

    Arrays hold a numpy array (numeric and bool elements), a list of str (strings), or a list of `Value`
    (arrays of arrays). `encoded` is set on scalars and string arrays read from a file: (byte order, the bytes as
    stored), which a writer in that byte order copies instead of encoding `value` again, so a read value is
    written back bit for bit (a float32 signalling NaN becomes a quiet one on its way through a Python float).
    A BOOL has none: it is written back as 0 or 1, as ggml writes it.
    """

    value: Any
    type: GGUFValueType
    element: GGUFValueType | None = None
    encoded: tuple[str, bytes] | None = None

    def plain(self) -> Any:
        """The value without type information: nested arrays become lists of plain values."""
        if self.element == _T.ARRAY:
            return [v.plain() for v in self.value]
        return self.value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Value):
            return NotImplemented
        if (self.type, self.element) != (other.type, other.element):
            return False
        a, b = self.value, other.value
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=a.dtype.kind == "f")
        if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
            return True  # NaN read back as NaN
        return a == b

    __hash__ = None  # type: ignore[assignment]

    def array_length(self) -> int:
        """`len(value)`: for a string array read from a file, without decoding it."""
        return len(self.value)


class ReadStrings(Value):
    """A string array read from a file, its strings decoded on the first use of `value`: a vocabulary's
    tokens and merges (up to 777k strings) take about a second to decode, and most opens never look at them.
    The reader has checked every length; `encoded` holds the array's bytes (element type, count, strings)."""

    def __init__(self, value: Any = None, type: GGUFValueType = _T.ARRAY, element: GGUFValueType | None = _T.STRING,
                 encoded: tuple[str, bytes] | None = None) -> None:  # fmt: skip
        # Value's fields, so that `dataclasses.replace` makes one too (given the decoded strings).
        for name, given in (("type", type), ("element", element), ("encoded", encoded)):
            object.__setattr__(self, name, given)
        if value is not None or encoded is None:
            object.__setattr__(self, "value", value)

    def __getattr__(self, name: str) -> Any:
        """`value`, decoded from `encoded` the first time it is asked for (only then is it not set)."""
        if name != "value" or self.__dict__.get("encoded") is None:
            raise AttributeError(name)
        order, raw = self.__dict__["encoded"]
        unpack = struct.Struct(order + "Q").unpack_from
        (n,) = unpack(raw, 4)
        strings: list[str] = [""] * n
        pos = 12
        for i in range(n):
            (length,) = unpack(raw, pos)
            pos += 8
            strings[i] = raw[pos : pos + length].decode("utf-8", "surrogateescape")
            pos += length
        object.__setattr__(self, "value", strings)
        return strings

    def array_length(self) -> int:
        if "value" in self.__dict__ or self.encoded is None:
            return len(self.value)
        order, raw = self.encoded
        return int.from_bytes(raw[4:12], "little" if order == "<" else "big")


def array_length(metadata: Mapping[str, Any], key: str) -> int:
    """`len(metadata[key])`; a string array of a GGUF file's `Metadata` (a vocabulary) is counted, not decoded."""
    typed = getattr(metadata, "typed", None)
    return typed(key).array_length() if typed is not None else len(metadata[key])


def numpy_dtype(t: GGUFValueType, order: str = "<") -> np.dtype:
    """The numpy dtype of a fixed-size GGUF value type in the given byte order."""
    if t == _T.BOOL:
        return np.dtype(np.bool_)
    return np.dtype(order + SCALAR_CODES[t])


_NUMPY_KINDS = {np.dtype(SCALAR_CODES[t]): t for t in SCALAR_CODES if t != _T.BOOL}
_FLOATS = (_T.FLOAT32, _T.FLOAT64)
_BOOLS = (bool, np.bool_)


def _fits(value: Any, t: GGUFValueType) -> bool:
    """Whether `value` may be stored as type `t`, by gguf-py's writer's rules (`_validate_value_type`): a
    bool is no number, a float no integer, a str no array; bytes are a STRING, or an ARRAY of UINT8."""
    if value is None:
        return False
    if t == _T.STRING:
        return isinstance(value, (str, bytes, bytearray))
    if t == _T.ARRAY:
        return isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, (str, bytearray))
    if t == _T.BOOL:
        return isinstance(value, _BOOLS)
    if t in _FLOATS:
        return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, _BOOLS)
    return isinstance(value, (int, np.integer)) and not isinstance(value, _BOOLS)


def _wrong_type(key: str | None, t: GGUFValueType, value: Any) -> ArgumentTypeError:
    return ArgumentTypeError(f"{_where(key)}expected {t.name}, got {type(value).__name__}: {value!r}")


def infer(value: Any, type: GGUFValueType | None = None, key: str | None = None) -> Value:
    """Turn a Python or numpy value into a typed `Value`, checking it fits the type if one is given (gguf-py's
    rules, see `_fits`); errors name `key`.

    Without a type: bool -> BOOL, int -> INT32 (INT64/UINT64 when it does not fit), float -> FLOAT32,
    str -> STRING, numpy scalars and arrays by their dtype, lists -> arrays of the inferred element type.
    """
    if isinstance(value, Value):
        if type is not None and type != value.type:
            return infer(value.plain(), type, key)
        return value
    if type is not None and not _fits(value, type):
        raise _wrong_type(key, type, value)
    if type == _T.ARRAY and isinstance(value, bytes):
        return Value(np.frombuffer(value, np.uint8).copy(), _T.ARRAY, _T.UINT8)
    if type == _T.ARRAY or (type is None and isinstance(value, (list, tuple, np.ndarray))):
        return _infer_array(value, key)
    if type is None:
        type = _scalar_type(value, key)
    return Value(_coerce_scalar(value, type, key), type)


def _scalar_type(value: Any, key: str | None) -> GGUFValueType:
    if isinstance(value, _BOOLS):
        return _T.BOOL
    if isinstance(value, np.generic):
        return _NUMPY_KINDS[np.dtype(value.dtype).newbyteorder("=")]
    if isinstance(value, int):
        for t in (_T.INT32, _T.INT64, _T.UINT64):
            lo, hi = _INT_RANGES[t]
            if lo <= value < hi:
                return t
        raise ArgumentError(f"{_where(key)}integer {value} does not fit in any GGUF integer type")
    if isinstance(value, float):
        return _T.FLOAT32
    if isinstance(value, (str, bytes)):
        return _T.STRING
    raise ArgumentTypeError(f"{_where(key)}cannot store a {type(value).__name__} in GGUF metadata")


def _where(key: str | None) -> str:
    return "" if key is None else f"key {key!r}: "


def _coerce_scalar(value: Any, t: GGUFValueType, key: str | None) -> Any:
    """`value` (already known to fit `t`) as the Python value a `Value` of type `t` holds."""
    if t == _T.STRING:
        return bytes(value).decode("utf-8", "surrogateescape") if isinstance(value, (bytes, bytearray)) else value
    if t == _T.BOOL:
        return bool(value)
    if t in _FLOATS:
        return float(np.dtype(SCALAR_CODES[t]).type(value))
    v = int(value)
    lo, hi = _INT_RANGES[t]
    if not lo <= v < hi:
        raise ArgumentError(f"{_where(key)}{v} does not fit in GGUF {t.name}")
    return v


def _infer_array(value: Any, key: str | None) -> Value:
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise ArgumentError(f"{_where(key)}GGUF arrays are one-dimensional")
        dt = value.dtype.newbyteorder("=")
        if dt == np.bool_:
            return Value(value.astype(np.bool_), _T.ARRAY, _T.BOOL)
        if dt.kind in "US":
            return Value([_coerce_scalar(v.item(), _T.STRING, key) for v in value], _T.ARRAY, _T.STRING)
        if dt not in _NUMPY_KINDS:
            raise ArgumentTypeError(f"{_where(key)}no GGUF array type for numpy dtype {value.dtype}")
        return Value(value.astype(dt), _T.ARRAY, _NUMPY_KINDS[dt])
    items = list(value)
    if not items:
        return Value(np.empty(0, np.int32), _T.ARRAY, _T.INT32)
    if all(isinstance(v, (list, tuple, np.ndarray)) or (isinstance(v, Value) and v.type == _T.ARRAY)
           for v in items):  # fmt: skip
        return Value([infer(v, _T.ARRAY, key) for v in items], _T.ARRAY, _T.ARRAY)
    if all(isinstance(v, (str, bytes)) for v in items):
        return Value([_coerce_scalar(v, _T.STRING, key) for v in items], _T.ARRAY, _T.STRING)
    types = {_scalar_type(v, key) for v in items}
    if types == {_T.BOOL}:
        return Value(np.array(items, dtype=np.bool_), _T.ARRAY, _T.BOOL)
    if _T.FLOAT32 in types or _T.FLOAT64 in types:
        element = _T.FLOAT64 if _T.FLOAT64 in types else _T.FLOAT32
    else:
        element = max(types, key=[_T.BOOL, _T.INT32, _T.INT64, _T.UINT64].index)
    return typed_array(items, element, key)


def typed_array(items: Any, element: GGUFValueType, key: str | None = None) -> Value:
    """An array `Value` with an explicit element type (every item checked to fit it, as a scalar would be)."""
    if not isinstance(items, np.ndarray):
        for v in items:
            if not _fits(v, element):
                raise _wrong_type(key, element, v)
    if element == _T.STRING:
        return Value([_coerce_scalar(v, _T.STRING, key) for v in items], _T.ARRAY, _T.STRING)
    if element == _T.ARRAY:
        return Value([infer(v, _T.ARRAY, key) for v in items], _T.ARRAY, _T.ARRAY)
    if element in _INT_RANGES:
        for v in items if not isinstance(items, np.ndarray) else ():
            _coerce_scalar(v, element, key)
    return Value(np.asarray(items).astype(numpy_dtype(element, "=")), _T.ARRAY, element)


class Metadata(Mapping[str, Any]):
    """A read-only, ordered mapping of GGUF keys to plain values; `.typed(key)` keeps the GGUF type."""

    def __init__(self, values: Mapping[str, Value]) -> None:
        self._values = dict(values)

    def __getitem__(self, key: str) -> Any:
        return self._values[key].plain()

    def __contains__(self, key: object) -> bool:
        return key in self._values  # Mapping's would make the value (decoding a string array)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Metadata({len(self)} keys)"

    def typed(self, key: str) -> Value:
        return self._values[key]

    def value_type(self, key: str) -> GGUFValueType:
        return self._values[key].type

    def element_type(self, key: str) -> GGUFValueType | None:
        return self._values[key].element

    def typed_items(self) -> Iterator[tuple[str, Value]]:
        return iter(self._values.items())
