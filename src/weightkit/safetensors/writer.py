"""Write safetensors files as the reference does, streaming and atomically.

Layout choices follow Hugging Face's writer so files come out byte for byte the same: tensors ordered by
descending dtype (the order of its `Dtype` enum) then by name, `__metadata__` first in the header, the
header compact JSON padded with spaces to a multiple of 8 bytes.

Torch tensors are written with their true values: a non-contiguous tensor is copied, conjugate and negative
views are resolved (the reference writes the memory beneath them, before the sign flip), and a
float4_e2m1fn_x2 tensor is F4 with its last dimension doubled, as the reference writes it.
"""

from __future__ import annotations

import json
import operator
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._io import atomic_write
from .._torch import from_torch, is_packed_fp4, is_torch_tensor, packed_fp4_bytes
from ..dtypes import DataSource, SafetensorsDType, as_bytes, exact_bytes, safetensors_dtype_of_numpy
from ..errors import ArgumentError, ArgumentTypeError, UnsupportedError
from .reader import MAX_HEADER_SIZE, METADATA_KEY


@dataclass
class SafetensorsTensor:
    """A tensor to write: its dtype and shape now, its data (or a callable giving it) when written."""

    name: str
    dtype: SafetensorsDType
    shape: tuple[int, ...]
    data: DataSource

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        bits = n * self.dtype.bits
        if bits % 8:
            raise ArgumentError(f"tensor {self.name!r}: {n} {self.dtype.value} values are not a whole number of bytes")
        return bits // 8


def tensor_from(
    name: str, data: DataSource, dtype: SafetensorsDType | str | None = None, shape=None
) -> SafetensorsTensor:
    """Describe a tensor from a numpy array (or torch tensor), or from raw bytes with `dtype` and `shape`."""
    if not isinstance(name, str):
        raise ArgumentTypeError(f"tensor names are strings, not {type(name).__name__} ({name!r})")
    what = f"tensor {name!r}"
    if not (isinstance(data, np.ndarray) or callable(data) or is_torch_tensor(data) or _bytes_like(data)):
        raise _not_data(data, what)
    if dtype is None and shape is None:
        if is_packed_fp4(data):
            packed = packed_fp4_bytes(data, what)
            if not packed.ndim:
                raise UnsupportedError(f"{what}: a 0-dimensional float4_e2m1fn_x2 has no last dimension for F4 pairs")
            return SafetensorsTensor(name, SafetensorsDType.F4, (*packed.shape[:-1], 2 * packed.shape[-1]), packed)
        data = from_torch(data, what)
        if not isinstance(data, np.ndarray):
            raise ArgumentError(f"{what}: raw bytes and callables need dtype= and shape=")
        try:
            return SafetensorsTensor(name, safetensors_dtype_of_numpy(data.dtype), data.shape, data)
        except ValueError as e:  # a dtype safetensors lacks (strings, objects, complex128, ...)
            raise ArgumentTypeError(f"{what}: {e}") from None
    if dtype is None or shape is None:
        raise ArgumentError(f"{what}: give both dtype= and shape=, or neither (for an array or torch tensor)")
    try:
        dtype = SafetensorsDType(dtype)
    except ValueError:
        names = ", ".join(t.value for t in SafetensorsDType)
        raise ArgumentError(f"{what}: dtype {dtype!r} is not a safetensors dtype ({names})") from None
    return SafetensorsTensor(name, dtype, _shape(shape, what), data)


def _shape(shape, what: str) -> tuple[int, ...]:
    try:
        dims = tuple(map(operator.index, shape))
    except TypeError:
        raise ArgumentTypeError(f"{what}: shape {shape!r} is not a sequence of integers") from None
    if any(d < 0 for d in dims):
        raise ArgumentError(f"{what}: shape {list(dims)} has a negative dimension")
    return dims


def _bytes_like(data) -> bool:
    try:
        memoryview(data)
    except TypeError:
        return False
    return True


def _not_data(data, what: str) -> ArgumentTypeError:
    expected = "a numpy array, torch tensor, bytes or a callable giving one"
    return ArgumentTypeError(f"{what}: expected {expected}, not {type(data).__name__}")


def described(tensors: Mapping[str, DataSource] | Iterable[SafetensorsTensor]) -> list[SafetensorsTensor]:
    """The tensors to write, from a mapping of names to data or an iterable of `tensor_from()` descriptions."""
    if isinstance(tensors, Mapping):
        return [tensor_from(name, data) for name, data in tensors.items()]
    if isinstance(tensors, (str, bytes)) or not isinstance(tensors, Iterable):
        raise ArgumentTypeError(
            f"tensors: expected a mapping of names to tensors or a list of SafetensorsTensor, "
            f"not {type(tensors).__name__}"
        )
    tensors = list(tensors)
    for t in tensors:
        if not isinstance(t, SafetensorsTensor):
            raise ArgumentTypeError(f"tensors: a list holds SafetensorsTensor (tensor_from), not {type(t).__name__}")
    return tensors


def reference_order(tensors: Iterable[SafetensorsTensor]) -> list[SafetensorsTensor]:
    """The order the reference writes tensors in: descending dtype, then name."""
    return sorted(tensors, key=lambda t: (-t.dtype.rank, t.name))


def encode_header(tensors: list[SafetensorsTensor], metadata: Mapping[str, str] | None) -> bytes:
    """The 8-byte length and the padded JSON header for `tensors` laid out in the given order."""
    header: dict = {}
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            kind = type(metadata).__name__
            raise ArgumentTypeError(f"metadata: expected a mapping of strings to strings, not {kind}")
        for k, v in metadata.items():
            if not (isinstance(k, str) and isinstance(v, str)):
                raise ArgumentTypeError(f"metadata: safetensors maps strings to strings, not {k!r}: {v!r}")
        header[METADATA_KEY] = dict(metadata)
    offset = 0
    for t in tensors:
        if t.name == METADATA_KEY:
            raise ArgumentError(f"tensors: the name {METADATA_KEY!r} is reserved for the metadata")
        if t.name in header:
            raise ArgumentError(f"tensors: the name {t.name!r} is given twice")
        header[t.name] = {"dtype": t.dtype.value, "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    if len(text) > MAX_HEADER_SIZE:
        raise ArgumentError(f"tensors: the header would be {len(text)} bytes, over the limit of {MAX_HEADER_SIZE}")
    return struct.pack("<Q", len(text)) + text


def data_bytes(t: SafetensorsTensor) -> memoryview:
    """The bytes `t` writes: its data (called, if a callable) converted to its dtype, exactly its size."""
    what = f"tensor {t.name!r}"
    data = t.data() if callable(t.data) else t.data
    data = packed_fp4_bytes(data, what) if is_packed_fp4(data) else from_torch(data, what)
    if not (isinstance(data, np.ndarray) or _bytes_like(data)):
        raise _not_data(data, what)
    if isinstance(data, np.ndarray) and t.dtype.numpy is not None and data.dtype != np.uint8:
        try:
            data = as_bytes(np.asarray(data, dtype=t.dtype.numpy))
        except (TypeError, ValueError) as e:
            raise ArgumentTypeError(f"{what}: numpy {data.dtype} does not convert to {t.dtype.value}: {e}") from None
    return exact_bytes(data, t.nbytes, f"{what}: {t.dtype.value} {t.shape}")


def write_safetensors(
    path: str | os.PathLike[str],
    tensors: Mapping[str, DataSource] | Iterable[SafetensorsTensor],
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write a safetensors file. `tensors` maps names to numpy arrays (or torch tensors), or is a list of
    `tensor_from(...)` descriptions; data is read one tensor at a time, and the file appears only when whole."""
    ordered = reference_order(described(tensors))
    header = encode_header(ordered, metadata)
    with atomic_write(Path(path)) as f:
        f.write(header)
        for t in ordered:
            f.write(data_bytes(t))
