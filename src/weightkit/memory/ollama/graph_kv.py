"""Go's unsigned 64-bit arithmetic, and Ollama's typed reading of GGUF metadata (its `KV` helpers).

Ollama keeps every metadata value with the Go type its GGUF type decodes to, and each accessor accepts
exactly one Go type: `KV.Uint` a `uint32`, `KV.Ints` an array of `int32`, the head-count helpers a
`uint32`, an array of `uint32` or an array of `int32`. `OllamaKV` reads a weightkit model's metadata the
same way, with the same defaults when a key is absent.

Where weightkit differs (on purpose, see `weightkit.memory.ollama.graph`): a key that is present with a type
the accessor does not accept, which Ollama silently replaces by the default, raises `FormatError`; so
do a missing or non-string `general.architecture`, a missing `block_count` (or one above `MAX_LAYERS`,
65,536, which only a corrupt file has), and the inputs that make
Ollama's Go code panic (a missing `tokenizer.ggml.tokens`, an empty head-count array).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import FormatError
from ...gguf.constants import GGUFValueType
from ...gguf.values import array_length

_T = GGUFValueType
MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1
_TWO63 = 1 << 63
#: a block count above this is refused (Ollama would try to allocate per-layer slices of that length)
MAX_LAYERS = 1 << 16


class U64(int):
    """A Go `uint64`: `+`, `-`, `*` wrap modulo 2**64, `//` truncates (Go's `/`), `>>` shifts.

    Written so that an expression copied from Go keeps Go's left-to-right evaluation: in
    `e * e * 9 // 16` every intermediate product wraps exactly where Go's would. Mixing in a float is
    a programming error and raises `TypeError`; a zero divisor raises `FormatError`, where Go panics.
    """

    __slots__ = ()

    def __new__(cls, value: int) -> U64:
        return super().__new__(cls, int(value) & MASK64)

    @staticmethod
    def _int(other: Any) -> int:
        if isinstance(other, (bool, float)) or not isinstance(other, (int, np.integer)):
            raise TypeError(f"uint64 arithmetic with a {type(other).__name__}")
        return int(other)

    def __add__(self, other: Any) -> U64:
        return U64(int(self) + self._int(other))

    __radd__ = __add__

    def __sub__(self, other: Any) -> U64:
        return U64(int(self) - self._int(other))

    def __rsub__(self, other: Any) -> U64:
        return U64(self._int(other) - int(self))

    def __mul__(self, other: Any) -> U64:
        return U64(int(self) * self._int(other))

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> U64:
        return U64(_div(int(self), self._int(other) & MASK64))

    def __rfloordiv__(self, other: Any) -> U64:
        return U64(_div(self._int(other) & MASK64, int(self)))

    def __rshift__(self, other: Any) -> U64:
        return U64(int(self) >> self._int(other))

    def __repr__(self) -> str:
        return f"U64({int(self)})"


def _div(a: int, b: int) -> int:
    if b == 0:
        raise FormatError(None, None, "integer division by zero in Ollama's estimate (its Go code panics here)")
    return a // b


def u64_to_f64(x: int) -> float:
    """Go's `float64(x)` for a uint64: rounded to nearest, ties to even (Python's int -> float is too)."""
    return float(int(x) & MASK64)


def f64_to_u64(x: float) -> U64:
    """Go's `uint64(x)` for a non-negative float64, as Go lowers it on amd64.

    Below 2**63 it truncates toward zero; in [2**63, 2**64) it is exact; at 2**64 and above the Go spec
    leaves the result to the implementation, and amd64 gives 2**63 (the truncation of `x - 2**63`
    overflows to 0x8000000000000000, then the top bit is or-ed in). Only a KV cache of 16 EiB per layer
    gets there.
    """
    if x != x or x < 0:  # never produced by the estimate: inputs are unsigned
        raise FormatError(None, None, f"cannot convert {x!r} to uint64")
    if x < 2.0**64:
        return U64(int(x))
    return U64(_TWO63)


# what each GGUF value type decodes to in Ollama's reader, by name of the Go type
_GO_SCALAR = {
    _T.UINT8: "uint8", _T.INT8: "int8", _T.UINT16: "uint16", _T.INT16: "int16",
    _T.UINT32: "uint32", _T.INT32: "int32", _T.UINT64: "uint64", _T.INT64: "int64",
    _T.FLOAT32: "float32", _T.FLOAT64: "float64", _T.BOOL: "bool", _T.STRING: "string",
}  # fmt: skip
_NP_TYPES = {
    np.dtype(np.uint8): _T.UINT8, np.dtype(np.int8): _T.INT8, np.dtype(np.uint16): _T.UINT16,
    np.dtype(np.int16): _T.INT16, np.dtype(np.uint32): _T.UINT32, np.dtype(np.int32): _T.INT32,
    np.dtype(np.uint64): _T.UINT64, np.dtype(np.int64): _T.INT64, np.dtype(np.float32): _T.FLOAT32,
    np.dtype(np.float64): _T.FLOAT64, np.dtype(np.bool_): _T.BOOL,
}  # fmt: skip


def go_type(kind: GGUFValueType, element: GGUFValueType | None) -> str:
    """How Ollama's reader types a value: `uint32`, `*array[int32]`, ..."""
    if kind == _T.ARRAY:
        inner = "any" if element is None else ("array" if element == _T.ARRAY else _GO_SCALAR[element])
        return f"*array[{inner}]"
    return _GO_SCALAR[kind]


def _typed(metadata: Any, key: str) -> tuple[Any, GGUFValueType, GGUFValueType | None] | None:
    """(value, GGUF type, element type) of a key, or None when absent.

    GGUF metadata (`weightkit.gguf.Metadata`) carries its types. A plain mapping (a model whose
    metadata did not come from GGUF) is typed from its values: an int in uint32 range counts as UINT32,
    a numpy array by its dtype, a list of str as an array of STRING.
    """
    if key not in metadata:
        return None
    typed = getattr(metadata, "typed", None)
    if typed is not None:
        v = typed(key)
        return v.value, v.type, v.element
    value = metadata[key]
    if isinstance(value, str):
        return value, _T.STRING, None
    if isinstance(value, (bool, np.bool_)):
        return bool(value), _T.BOOL, None
    if isinstance(value, (int, np.integer)):
        v = int(value)
        return v, (_T.UINT32 if 0 <= v <= MASK32 else _T.INT64), None
    if isinstance(value, (float, np.floating)):
        return float(value), _T.FLOAT64, None
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return value, _T.ARRAY, _NP_TYPES.get(value.dtype.newbyteorder("="))
    if isinstance(value, (list, tuple)):
        if all(isinstance(s, str) for s in value):
            return list(value), _T.ARRAY, _T.STRING
        return list(value), _T.ARRAY, None
    return value, _T.ARRAY, None


class OllamaKV:
    """Ollama's `KV` accessors over a weightkit model's metadata (see the module docstring)."""

    def __init__(self, metadata: Any, path: Any = None) -> None:
        self.metadata = metadata
        self.path = path
        found = _typed(metadata, "general.architecture")
        if found is None:
            raise self.error("general.architecture is missing (Ollama would estimate nothing for it)")
        value, kind, element = found
        if kind != _T.STRING:
            raise self.error(f"general.architecture is {go_type(kind, element)}, not a string")
        self.architecture: str = value

    def error(self, reason: str) -> FormatError:
        return FormatError(self.path, None, reason)

    def key(self, key: str) -> str:
        """Ollama prefixes every key but `tokenizer.*` and `general.*` with the architecture."""
        if key.startswith(("tokenizer.", "general.")):
            return key
        return f"{self.architecture}.{key}"

    def _bad_type(self, key: str, kind: GGUFValueType, element: GGUFValueType | None, wanted: str):
        return self.error(
            f"{key} is {go_type(kind, element)}; Ollama reads it only as {wanted} "
            "(and would silently use its default instead)"
        )

    # scalars ------------------------------------------------------------------------------------

    def uint(self, key: str, default: int = 0) -> U64:
        """`uint64(kv.Uint(key, default))`: a UINT32 value, else the default (truncated to uint32)."""
        full = self.key(key)
        found = _typed(self.metadata, full)
        if found is None:
            return U64(int(default) & MASK32)
        value, kind, element = found
        if kind != _T.UINT32:
            raise self._bad_type(full, kind, element, "uint32")
        return U64(value)

    def block_count(self) -> U64:
        """`KV.BlockCount`; weightkit requires the key (Ollama would give a model of no layers)."""
        full = self.key("block_count")
        if _typed(self.metadata, full) is None:
            raise self.error(f"{full} is missing")
        count = self.uint("block_count")
        if count > MAX_LAYERS:
            raise self.error(f"{full} is {int(count)}: more layers than weightkit believes ({MAX_LAYERS})")
        return count

    def embedding_length(self) -> U64:
        return self.uint("embedding_length")

    def ints(self, key: str) -> list[int] | None:
        """`KV.Ints`: an array of INT32 values, else nil (None)."""
        full = self.key(key)
        found = _typed(self.metadata, full)
        if found is None:
            return None
        value, kind, element = found
        if kind != _T.ARRAY or element != _T.INT32:
            raise self._bad_type(full, kind, element, "*array[int32]")
        return [int(v) for v in np.asarray(value, dtype=np.int64)]

    def vocab_size(self) -> U64:
        """The length of `tokenizer.ggml.tokens` (Ollama panics when it is missing or not strings)."""
        key = "tokenizer.ggml.tokens"
        if key not in self.metadata:
            raise self.error("tokenizer.ggml.tokens is missing: the vocabulary size comes from its length")
        typed = getattr(self.metadata, "typed", None)  # a GGUF file's types, known without decoding its strings
        kind, element = (typed(key).type, typed(key).element) if typed else _typed(self.metadata, key)[1:]
        if kind != _T.ARRAY or element != _T.STRING:
            raise self._bad_type(key, kind, element, "*array[string]")
        return U64(array_length(self.metadata, key))

    # per-layer values ---------------------------------------------------------------------------

    def uint_or_array(self, key: str, default: int) -> list[int]:
        """`KV.UintOrArrayValueAsArray`: a UINT32 scalar, or an array of UINT32 or INT32 (negatives
        wrap to uint32, as Go's `uint32(v)` does), else `[default]`."""
        full = self.key(key)
        found = _typed(self.metadata, full)
        if found is None:
            return [default]
        value, kind, element = found
        if kind == _T.UINT32:
            return [int(value)]
        if kind == _T.ARRAY and element in (_T.UINT32, _T.INT32):
            values = np.asarray(value, dtype=np.int64) & MASK32
            if values.size == 0:
                raise self.error(f"{full} is an empty array (Ollama's Go code panics on it)")
            return [int(v) for v in values]
        raise self._bad_type(full, kind, element, "uint32, *array[uint32] or *array[int32]")

    def per_layer(self, key: str, n_layers: int) -> list[U64]:
        """`KV.HeadCount`/`HeadCountKV`: one value per layer; a single value is broadcast, a short
        array is padded with 1, a long one cut to the layer count."""
        values = self.uint_or_array(key, 1)
        default = values[0] if len(values) == 1 else 1
        return [U64(values[i] if i < len(values) else default) for i in range(n_layers)]

    def array_min(self, key: str) -> U64:
        """`KV.UintOrMinArrayValue(key, 1)`: over the array as stored (not padded nor cut)."""
        return U64(min(self.uint_or_array(key, 1)))

    def array_max(self, key: str) -> U64:
        return U64(max(self.uint_or_array(key, 1)))

    def head_count_max(self) -> U64:
        return self.array_max("attention.head_count")

    def head_count_min(self) -> U64:
        return self.array_min("attention.head_count")

    def head_count_kv_max(self) -> U64:
        return self.array_max("attention.head_count_kv")

    def head_count_kv_min(self) -> U64:
        return self.array_min("attention.head_count_kv")

    def embedding_head_count_max(self) -> U64:
        """The embedding length over the smallest head count (0 when that is 0)."""
        heads = self.head_count_min()
        if heads > 0:
            return self.embedding_length() // heads
        return U64(0)

    def embedding_head_count_k(self) -> U64:
        return self.uint("attention.key_length", int(self.embedding_head_count_max()) & MASK32)

    def embedding_head_count_v(self) -> U64:
        return self.uint("attention.value_length", int(self.embedding_head_count_max()) & MASK32)
