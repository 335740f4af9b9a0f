"""Write safetensors files as the reference does, streaming and atomically.

Layout choices follow Hugging Face's writer so files come out byte for byte the same: tensors ordered by
descending dtype (the order of its `Dtype` enum) then by name, `__metadata__` first in the header, the
header compact JSON padded with spaces to a multiple of 8 bytes.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._io import atomic_write
from .._torch import from_torch
from ..dtypes import DataSource, SafetensorsDType, as_bytes, exact_bytes, safetensors_dtype_of_numpy
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
            raise ValueError(f"{self.name}: {n} {self.dtype.value} elements are not a whole number of bytes")
        return bits // 8


def tensor_from(
    name: str, data: DataSource, dtype: SafetensorsDType | str | None = None, shape=None
) -> SafetensorsTensor:
    """Describe a tensor from a numpy array (or torch tensor), or from raw bytes with `dtype` and `shape`."""
    data = from_torch(data)
    if isinstance(data, np.ndarray) and dtype is None:
        return SafetensorsTensor(name, safetensors_dtype_of_numpy(data.dtype), data.shape, data)
    if dtype is None or shape is None:
        raise ValueError(f"{name}: raw bytes and callables need dtype= and shape=")
    dtype = dtype if isinstance(dtype, SafetensorsDType) else SafetensorsDType(dtype)
    return SafetensorsTensor(name, dtype, tuple(int(d) for d in shape), data)


def reference_order(tensors: Iterable[SafetensorsTensor]) -> list[SafetensorsTensor]:
    """The order the reference writes tensors in: descending dtype, then name."""
    return sorted(tensors, key=lambda t: (-t.dtype.rank, t.name))


def encode_header(tensors: list[SafetensorsTensor], metadata: Mapping[str, str] | None) -> bytes:
    """The 8-byte length and the padded JSON header for `tensors` laid out in the given order."""
    header: dict = {}
    if metadata is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("safetensors metadata maps strings to strings")
        header[METADATA_KEY] = dict(metadata)
    offset = 0
    for t in tensors:
        if t.name == METADATA_KEY or t.name in header:
            raise ValueError(f"tensor name {t.name!r} is reserved or repeated")
        header[t.name] = {"dtype": t.dtype.value, "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    if len(text) > MAX_HEADER_SIZE:
        raise ValueError(f"the header would be {len(text)} bytes, over the limit of {MAX_HEADER_SIZE}")
    return struct.pack("<Q", len(text)) + text


def data_bytes(t: SafetensorsTensor) -> memoryview:
    data = from_torch(t.data() if callable(t.data) else t.data)
    if isinstance(data, np.ndarray) and t.dtype.numpy is not None and data.dtype != np.uint8:
        data = as_bytes(np.asarray(data, dtype=t.dtype.numpy))
    return exact_bytes(data, t.nbytes, f"tensor {t.name!r}: {t.dtype.value} {t.shape}")


def write_safetensors(
    path: str | os.PathLike[str],
    tensors: Mapping[str, DataSource] | Iterable[SafetensorsTensor],
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write a safetensors file. `tensors` maps names to numpy arrays (or torch tensors), or is a list of
    `tensor_from(...)` descriptions; data is read one tensor at a time, and the file appears only when whole."""
    if isinstance(tensors, Mapping):
        tensors = [tensor_from(name, data) for name, data in tensors.items()]
    ordered = reference_order(tensors)
    header = encode_header(ordered, metadata)
    with atomic_write(Path(path)) as f:
        f.write(header)
        for t in ordered:
            f.write(data_bytes(t))
