"""The metadata of the GGUF being made, with gguf-py's `GGUFWriter` rules for adding keys.

Those rules decide the bytes: a key set again keeps its first position (the value is replaced), empty strings
and empty arrays are not written, and an array's element type is that of its first element.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import FormatError
from ...gguf import GGUFValueType, Value

_T = GGUFValueType


def _element_type(item: Any) -> GGUFValueType:
    """gguf-py's `GGUFValueType.get_type` (float is tested before bool, bool before int)."""
    if isinstance(item, (str, bytes)):
        return _T.STRING
    if isinstance(item, float):
        return _T.FLOAT32
    if isinstance(item, bool):
        return _T.BOOL
    if isinstance(item, int):
        return _T.INT32
    raise TypeError(type(item).__name__)


class KV:
    """Ordered GGUF metadata under construction (`values` maps keys to typed `Value`s)."""

    def __init__(self, architecture: str) -> None:
        self.architecture = architecture  # the prefix of the architecture's own keys
        self.values: dict[str, Value] = {}
        self.string("general.architecture", architecture)

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def _set(self, key: str, value: Value) -> None:
        self.values[key] = value  # a dict keeps a replaced key where it first was, as gguf-py's does

    def string(self, key: str, value: str | None) -> None:
        """`add_string`: nothing for None or ""."""
        if value:
            self._set(key, Value(value, _T.STRING))

    def u32(self, key: str, value: int) -> None:
        self._set(key, Value(int(value), _T.UINT32))

    def i32(self, key: str, value: int) -> None:
        self._set(key, Value(int(value), _T.INT32))

    def f32(self, key: str, value: float) -> None:
        self._set(key, Value(float(np.float32(value)), _T.FLOAT32))

    def bool(self, key: str, value: bool) -> None:
        self._set(key, Value(bool(value), _T.BOOL))

    def strings(self, key: str, values: Sequence[str]) -> None:
        """A string array (token lists, merges), already known to hold only strings."""
        if len(values):
            self._set(key, Value(list(values), _T.ARRAY, _T.STRING))

    def int32s(self, key: str, values: np.ndarray | Sequence[int]) -> None:
        """An INT32 array (token types), already known to hold only ints."""
        if len(values):
            self._set(key, Value(np.asarray(values, dtype=np.int32), _T.ARRAY, _T.INT32))

    def float32s(self, key: str, values: np.ndarray | Sequence[float]) -> None:
        """A FLOAT32 array (token scores), already known to hold only numbers."""
        if len(values):
            self._set(key, Value(np.asarray(values, dtype=np.float32), _T.ARRAY, _T.FLOAT32))

    def array(self, key: str, values: Sequence[Any], source: str) -> None:
        """`add_array` of values read from a file (`source`, for the error): typed by the first element, all
        elements of that type, or a FormatError."""
        if not len(values):
            return
        try:
            element = _element_type(values[0])
            if any(_element_type(v) is not element for v in values[1:]):
                raise TypeError("mixed")
        except TypeError:
            raise FormatError(source, None, f"{key}: the values {list(values)[:4]!r} are not all strings, "
                                            "all numbers or all booleans") from None  # fmt: skip
        if element == _T.STRING:
            self._set(key, Value([str(v) for v in values], _T.ARRAY, _T.STRING))
        else:
            dtype = {_T.FLOAT32: np.float32, _T.BOOL: np.bool_, _T.INT32: np.int32}[element]
            self._set(key, Value(np.asarray(values, dtype=dtype), _T.ARRAY, element))

    def remove(self, key: str) -> None:
        self.values.pop(key, None)
