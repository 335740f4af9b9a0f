"""Write GGUF files as a stream: header and tensor infos first, then each tensor's data, atomically.

The layout matches ggml and gguf-py byte for byte: metadata in insertion order, tensor infos in order,
zero padding to the alignment after the infos and after every tensor, tensor offsets contiguous.
"""

from __future__ import annotations

import contextlib
import math
import os
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from .._io import atomic_write
from .._torch import from_torch
from ..dtypes import DataSource, GGMLType, TensorData, exact_bytes, ggml_type, ggml_type_of_numpy
from ..errors import ArgumentError, ArgumentTypeError, StateError
from .constants import (
    DEFAULT_ALIGNMENT,
    KEY_ALIGNMENT,
    MAGIC,
    MAX_DIMS,
    MAX_NAME,
    SCALAR_CODES,
    VERSION,
    GGUFValueType,
)
from .values import Value, infer

_T = GGUFValueType


@dataclass
class PlannedTensor:
    """A tensor declared to the writer: its info now, its bytes later."""

    name: str
    type: GGMLType
    shape: tuple[int, ...]  # numpy order
    nbytes: int
    offset: int = 0  # relative to the data section
    data: DataSource | None = None


def plan_tensor(name: str, shape: Iterable[int], dtype: GGMLType | int | str, data: DataSource | None = None):
    """Check a tensor's declaration (ggml's rules: a name of at most 63 bytes, up to 4 dims, none negative
    (zero is allowed: the tensor holds no elements), whole blocks per row)."""
    info = ggml_type(dtype)
    shape = tuple(int(d) for d in shape)
    size = len(name.encode("utf-8", "surrogateescape"))
    if size >= MAX_NAME:
        raise ArgumentError(
            f"{name}: tensor names are at most {MAX_NAME - 1} bytes (ggml's GGML_MAX_NAME with its NUL), not {size}"
        )
    if info.removed:
        raise ArgumentError(f"{name}: GGML type {info.name} was removed from ggml")
    if len(shape) > MAX_DIMS:
        raise ArgumentError(f"{name}: GGUF tensors have at most {MAX_DIMS} dimensions, not {len(shape)}")
    if any(d < 0 for d in shape):
        raise ArgumentError(f"{name}: no dimension may be negative, got {shape}")
    row = shape[-1] if shape else 1
    if row % info.block_size:
        raise ArgumentError(f"{name}: rows of {row} are not whole {info.name} blocks of {info.block_size}")
    n = math.prod(shape)
    return PlannedTensor(name, info.type, shape, info.nbytes(n), data=data)


def encode_value(value: Value, order: str = "<") -> bytes:
    """The bytes of one metadata value (after its type tag): the bytes it was read as, if it was read in `order`."""
    if value.encoded is not None and value.encoded[0] == order:
        return value.encoded[1]
    if value.type == _T.STRING:
        raw = value.value.encode("utf-8", "surrogateescape")
        return struct.pack(order + "Q", len(raw)) + raw
    if value.type == _T.ARRAY:
        head = struct.pack(order + "IQ", value.element, len(value.value))
        if value.element == _T.STRING:
            return head + encode_strings(value.value, order)
        if value.element == _T.ARRAY:
            return head + b"".join(encode_value(v, order) for v in value.value)
        if value.element == _T.BOOL:
            return head + np.asarray(value.value, dtype=np.bool_).astype(np.uint8).tobytes()
        return head + np.asarray(value.value).astype(order + SCALAR_CODES[value.element]).tobytes()
    code = SCALAR_CODES[value.type]
    return np.array(value.value, dtype=order + code).tobytes()


def encode_strings(strings: list[str], order: str = "<") -> bytes:
    """Strings as a GGUF string array's elements (each its UTF-8 byte count, then its bytes), encoded in bulk: a
    262k-token vocabulary's strings one by one take a second. Unpaired surrogates are bytes `surrogateescape` kept."""
    if not strings:
        return b""
    text = "".join(strings)
    data = np.frombuffer(text.encode("utf-8", "surrogateescape"), dtype=np.uint8)
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    extra = (points >= 0x80).view(np.uint8) + (points >= 0x800) + (points >= 0x10000)  # UTF-8 bytes beyond one
    extra[(points >= 0xD800) & (points < 0xE000)] = 0  # a surrogate that encoded at all is one escaped byte
    extra_before = np.concatenate(([0], extra.astype(np.int64).cumsum()))  # by character
    char_ends = np.cumsum(np.fromiter(map(len, strings), dtype=np.int64, count=len(strings)))
    sizes = np.diff(char_ends + extra_before[char_ends], prepend=0)
    is_data = np.repeat(np.tile([False, True], len(strings)), np.column_stack((np.full_like(sizes, 8), sizes)).ravel())
    out = np.empty(is_data.size, dtype=np.uint8)
    out[is_data] = data
    out[~is_data] = sizes.astype(order + "u8").view(np.uint8)
    return out.tobytes()


def encode_header(metadata: Mapping[str, Value], tensors: list[PlannedTensor], alignment: int, order: str) -> bytes:
    """Everything before the tensor data, padding included; fills in each tensor's relative offset."""
    parts = [MAGIC, struct.pack(order + "IQQ", VERSION, len(tensors), len(metadata))]
    for key, value in metadata.items():
        k = key.encode("utf-8", "surrogateescape")
        parts += [struct.pack(order + "Q", len(k)), k, struct.pack(order + "I", value.type), encode_value(value, order)]
    offset = 0
    for t in tensors:
        t.offset = offset
        name = t.name.encode("utf-8", "surrogateescape")
        ne = tuple(reversed(t.shape))
        parts += [
            struct.pack(order + "Q", len(name)),
            name,
            struct.pack(f"{order}I{len(ne)}QIQ", len(ne), *ne, t.type, offset),
        ]
        offset += _pad(t.nbytes, alignment)
    header = b"".join(parts)
    return header + bytes(_pad(len(header), alignment) - len(header))


def _pad(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def tensor_bytes(t: PlannedTensor, data: TensorData, order: str = "<") -> memoryview:
    """`data` as the exact bytes of tensor `t`: numpy arrays are cast (or quantized) to its type."""
    info = ggml_type(t.type)
    data = from_torch(data)
    if isinstance(data, np.ndarray) and data.dtype != np.uint8:  # values, not bytes
        if info.numpy is not None:
            data = np.ascontiguousarray(data, dtype=info.numpy.newbyteorder(order))
        else:
            from .. import quant

            data = quant.quantize(np.asarray(data).reshape(t.shape), info.type)
    return exact_bytes(data, t.nbytes, f"tensor {t.name!r}: {info.name} {t.shape}")


#: Values in each piece of a large tensor made and written a group of rows at a time (an F32 piece: 64 MiB), by the
#: converter and by llama-quantize's streaming: what bounds the memory its bytes take on the way to the file.
PIECE_VALUES = 1 << 24


def row_groups(n_rows: int, row_length: int) -> Iterator[tuple[int, int]]:
    """The (start, stop) row ranges a tensor of `n_rows` rows of `row_length` values is written in, a piece each."""
    step = max(1, PIECE_VALUES // max(1, row_length))
    for start in range(0, n_rows, step):
        yield start, min(start + step, n_rows)


def _write_pieces(f: IO[bytes], t: PlannedTensor, pieces: Iterator[TensorData]) -> None:
    """Write tensor `t` given as consecutive pieces of its bytes (buffers or uint8 arrays), each as it is made,
    checking that they add up to the tensor."""
    written = 0
    for piece in pieces:
        if isinstance(piece, np.ndarray) and piece.dtype != np.uint8:
            raise ArgumentTypeError(f"tensor {t.name!r}: pieces of a tensor are its bytes, not {piece.dtype} values")
        view = memoryview(np.ascontiguousarray(piece) if isinstance(piece, np.ndarray) else piece).cast("B")
        written += view.nbytes
        if written > t.nbytes:
            break
        f.write(view)
    if written != t.nbytes:
        info = ggml_type(t.type)
        raise ArgumentError(f"tensor {t.name!r}: {info.name} {t.shape} takes {t.nbytes} bytes, its pieces give "
                            f"{'more' if written > t.nbytes else written}")  # fmt: skip


class GGUFWriter:
    """Stream a GGUF file: declare metadata and tensors, then hand over tensor data in order.

    Nothing appears at `path` until `close()` succeeds; an exception inside a `with` block, or an
    interrupted process, leaves the destination as it was.

        with GGUFWriter("out.gguf", {"general.architecture": "llama"}) as w:
            w.add_tensor("a", np.zeros((4, 8), np.float32))        # data now (or a callable for later)
            w.add_tensor_info("b", (4, 256), "Q4_K")               # data later ...
            w.write_tensor("b", raw_bytes)                          # ... in declaration order
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        metadata: Mapping[str, Any] | None = None,
        *,
        alignment: int | None = None,
        byte_order: str = "<",
    ) -> None:
        if byte_order not in "<>":
            raise ArgumentError("byte_order is '<' or '>'")
        self.path = Path(path)
        self.order = byte_order
        self.metadata: dict[str, Value] = {}
        self.tensors: list[PlannedTensor] = []
        self._names: set[str] = set()
        self._next = 0  # index of the next tensor whose data goes to the file
        self._file: IO[bytes] | None = None
        self._ctx = None
        self._done = False
        for key, value in (metadata or {}).items():
            self.set(key, value)
        if alignment is not None:
            self.set(KEY_ALIGNMENT, Value(alignment, _T.UINT32))

    @property
    def alignment(self) -> int:
        value = self.metadata.get(KEY_ALIGNMENT)
        return DEFAULT_ALIGNMENT if value is None else value.value

    def set(self, key: str, value: Any, type: GGUFValueType | None = None) -> None:
        """Set a metadata key; `type` forces the GGUF type (else inferred, see `values.infer`)."""
        self._before_data()
        typed = infer(value, type, key)
        if key == KEY_ALIGNMENT:
            a = typed.value
            if typed.type != _T.UINT32 or a <= 0 or a & (a - 1):
                raise ArgumentError(f"{KEY_ALIGNMENT} must be a UINT32 power of two, got {a!r} ({typed.type.name})")
        self.metadata[key] = typed

    def add_tensor_info(self, name: str, shape: Iterable[int], dtype: GGMLType | int | str) -> PlannedTensor:
        """Declare a tensor whose data `write_tensor` will provide."""
        return self.add_planned(plan_tensor(name, shape, dtype))

    def add_tensor(
        self,
        name: str,
        data: DataSource,
        *,
        dtype: GGMLType | int | str | None = None,
        shape: Iterable[int] | None = None,
    ) -> PlannedTensor:
        """Declare a tensor with its data: a numpy array or torch tensor (type from its dtype unless `dtype`
        says otherwise; float arrays with a quantized `dtype` are quantized), raw bytes with `dtype` and
        `shape`, or a callable returning either, called when the tensor's turn to be written comes."""
        data = from_torch(data)
        if dtype is None:
            if not isinstance(data, np.ndarray):
                raise ArgumentError(f"{name}: raw bytes and callables need dtype= and shape=")
            dtype = ggml_type_of_numpy(data.dtype)
        if shape is None:
            if not isinstance(data, np.ndarray) or data.dtype == np.uint8:
                raise ArgumentError(f"{name}: shape= is needed unless data is an array of the tensor's values")
            shape = data.shape
        return self.add_planned(plan_tensor(name, shape, dtype, data))

    def add_planned(self, t: PlannedTensor) -> PlannedTensor:
        """Declare a tensor made by `plan_tensor` (with or without its data)."""
        self._before_data()
        if t.name in self._names:
            raise ArgumentError(f"duplicate tensor name {t.name!r}")
        self._names.add(t.name)
        self.tensors.append(t)
        return t

    def _before_data(self) -> None:
        if self._file is not None:
            raise StateError("metadata and tensor infos are fixed once tensor data has been written")

    def _open(self) -> IO[bytes]:
        if self._done:
            raise StateError(f"the writer of {self.path} is closed")
        if self._file is None:
            self._ctx = atomic_write(self.path)
            self._file = self._ctx.__enter__()
            self._file.write(encode_header(self.metadata, self.tensors, self.alignment, self.order))
        return self._file

    def write_tensor(self, name: str, data: TensorData) -> None:
        """Write the data of the next declared tensor (tensors with data already given go first)."""
        self._flush_ready()
        if self._next >= len(self.tensors) or self.tensors[self._next].name != name:
            expected = self.tensors[self._next].name if self._next < len(self.tensors) else "nothing"
            raise ArgumentError(f"tensors are written in declaration order: expected {expected!r}, got {name!r}")
        self._emit(self.tensors[self._next], data)

    def _flush_ready(self) -> None:
        self._open()
        while self._next < len(self.tensors) and self.tensors[self._next].data is not None:
            t = self.tensors[self._next]
            self._emit(t, t.data() if callable(t.data) else t.data)

    def _emit(self, t: PlannedTensor, data: TensorData | Iterator[TensorData]) -> None:
        f = self._open()
        if isinstance(data, Iterator):
            _write_pieces(f, t, data)
        else:
            f.write(tensor_bytes(t, data, self.order))
        f.write(bytes(_pad(t.nbytes, self.alignment) - t.nbytes))
        t.data = None  # let the caller's array go
        self._next += 1

    def close(self) -> None:
        """Write what remains and move the file into place (on any failure, nothing is moved)."""
        if self._done:
            return
        try:
            self._flush_ready()
            if self._next != len(self.tensors):
                raise ArgumentError(f"tensor {self.tensors[self._next].name!r} was declared but its data never written")
        except BaseException:
            self.abort()
            raise
        self._done = True
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            ctx.__exit__(None, None, None)

    def abort(self) -> None:
        """Give up: remove the partial file, leave the destination untouched."""
        self._done = True
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            with contextlib.suppress(RuntimeError):
                ctx.__exit__(RuntimeError, RuntimeError("aborted"), None)

    def __enter__(self) -> GGUFWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_gguf(
    path: str | os.PathLike[str],
    metadata: Mapping[str, Any],
    tensors: Mapping[str, DataSource] | Iterable[PlannedTensor],
    *,
    alignment: int | None = None,
    byte_order: str = "<",
) -> None:
    """Write a whole GGUF file: `tensors` maps names to numpy arrays, or is a list of `plan_tensor`s."""
    with GGUFWriter(path, metadata, alignment=alignment, byte_order=byte_order) as w:
        if isinstance(tensors, Mapping):
            for name, data in tensors.items():
                w.add_tensor(name, data)
        else:
            for t in tensors:
                w.add_planned(t)


def write_gguf_skeleton(
    path: str | os.PathLike[str],
    metadata: Mapping[str, Any],
    tensors: Iterable[PlannedTensor],
    *,
    alignment: int | None = None,
) -> None:
    """A GGUF with real metadata and tensor infos whose data region is a hole: zeros that take no disk where the
    file system has sparse files. A 70B model's skeleton costs a few KB; everything that reads only metadata
    and tensor infos (memory planning, quantize --dry-run, llama.cpp's no_alloc load) sees the real model."""
    w = GGUFWriter(path, metadata, alignment=alignment)
    for t in tensors:
        w.add_planned(t)
    header = encode_header(w.metadata, w.tensors, w.alignment, w.order)
    with atomic_write(w.path) as f:
        f.write(header)
        f.truncate(len(header) + sum(_pad(t.nbytes, w.alignment) for t in w.tensors))
