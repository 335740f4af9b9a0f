"""The interface every opened model shares, whatever its format: metadata, tensor infos, tensors."""

from __future__ import annotations

import abc
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from ._io import BufferSource, Openable, open_source
from .dtypes import GGMLType, TensorDType, numpy_dtype, view_as
from .errors import ArgumentError, UnsupportedError

if TYPE_CHECKING:
    from .net.http import HttpClient

FRAMEWORKS = ("numpy", "torch")
T = TypeVar("T")


class TensorInfo(NamedTuple):
    """Where one tensor lives and what it is (a named tuple: immutable, and cheap to make by the ten
    thousand).

    `shape` is in numpy order (outermost first). `offset` is the absolute byte offset in the file that
    holds the tensor (shard `shard` of a split model), `nbytes` its length.
    """

    name: str
    dtype: TensorDType  # a GGMLType (GGUF) or a SafetensorsDType
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    shard: int = 0

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class CodedColumn(Sequence[T]):
    """A column of few distinct values (dtypes, shapes) stored as one small integer code per row."""

    __slots__ = ("_codes", "_values")

    def __init__(self, values: Sequence[T], codes: np.ndarray) -> None:
        self._values, self._codes = values, codes

    def __getitem__(self, i):  # rows one at a time: TensorTable reads no slices
        return self._values[self._codes[i]]

    def __len__(self) -> int:
        return len(self._codes)


class TensorTable(Mapping[str, TensorInfo]):
    """Read-only tensor infos kept as columns, each TensorInfo made when asked for: a header of ten
    thousand tensors opens without building ten thousand objects that may never be read."""

    __slots__ = ("_dtypes", "_index", "_nbytes", "_offsets", "_shapes")

    def __init__(
        self,
        names: Sequence[str],
        dtypes: Sequence[TensorDType],
        shapes: Sequence[tuple[int, ...]],
        offsets: Sequence[int] | np.ndarray,
        nbytes: Sequence[int] | np.ndarray,
    ) -> None:
        if not len(names) == len(dtypes) == len(shapes) == len(offsets) == len(nbytes):
            raise ValueError("every column needs one entry per tensor")
        self._index = dict(zip(names, range(len(names)), strict=True))
        if len(self._index) != len(names):
            raise ValueError("tensor names must be unique")
        self._dtypes, self._shapes, self._offsets, self._nbytes = dtypes, shapes, offsets, nbytes

    def __getitem__(self, name: str) -> TensorInfo:
        i = self._index[name]
        return TensorInfo(name, self._dtypes[i], self._shapes[i], int(self._offsets[i]), int(self._nbytes[i]))

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


class ModelFile(abc.ABC):
    """An opened model: `.metadata`, `.tensors`, `.tensor(name)`, `.raw(name)`, `close()`."""

    format: str = ""
    display_name: str | None = None  # how to call it when not by its file name (a stored model's name)
    framework: str = "numpy"  # what tensor() returns: "numpy" arrays or "torch" tensors

    #: Set on a model read over HTTP: the client it reads through, which counts the bytes fetched.
    remote: HttpClient | None = None

    def __init__(self, path: Path | str, metadata: Mapping[str, Any], tensors: Mapping[str, TensorInfo]) -> None:
        """`path` is the file or folder; for a remote model, its URL as given."""
        self.path = path
        self.metadata = metadata
        self.tensors: Mapping[str, TensorInfo] = (
            tensors if isinstance(tensors, TensorTable) else MappingProxyType(dict(tensors))
        )

    @abc.abstractmethod
    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes as a read-only uint8 view of the mapped file (no copy)."""

    def row_source(self, name: str) -> Callable[[int, int], np.ndarray]:
        """A maker of rows `start:stop` of the tensor's bytes (rows along its last axis) as uint8 arrays of
        rows, safe to call from several threads: views of `raw()` here; a model that makes its tensors when
        read makes only the rows asked for, or the whole tensor once, held by the maker."""
        info = self.tensors[name]
        n_rows = info.n_elements // info.shape[-1] if info.shape[-1] else math.prod(info.shape[:-1])
        rows = self.raw(name).reshape(n_rows, info.nbytes // n_rows if n_rows else 0)  # zero-element tensors too
        return lambda start, stop: rows[start:stop]

    @property
    def byte_order(self) -> str:
        """'<' or '>': the byte order of the tensor data."""
        return "<"

    def tensor(self, name: str, dtype: np.dtype | type | str | None = None):
        """The tensor: plain types as stored (a zero-copy view), quantized ones dequantized to float32;
        with `dtype`, converted to it. A numpy array, or a torch tensor when opened with framework="torch"."""
        return self._hand_out(self._array(name), dtype)

    def _array(self, name: str) -> np.ndarray:
        """The tensor as numpy, before any conversion: what `tensor()` hands out. Models with packed types
        of their own decode them here."""
        from . import quant  # the kernels load on first use: plain reads never pay for them

        info = self.tensors[name]
        plain = numpy_dtype(info.dtype)
        if plain is not None:
            return view_as(self.raw(name), plain, self.byte_order).reshape(info.shape)
        return quant.dequantize(self._quantized_raw(info), info.dtype, info.shape)

    def load(self, names: Iterable[str] | None = None, dtype: np.dtype | type | str | None = None) -> dict[str, Any]:
        """Several tensors (all by default), each as `tensor(name, dtype)` gives it, in one go.

        The quantized ones decode together (`quant.dequantize_many`): one queue of work for every core and
        one float32 allocation whose views they are. For a whole model that is much faster than a
        `tensor()` call each.
        """
        from . import quant

        names = list(self.tensors if names is None else names)
        infos = [self.tensors[name] for name in names]
        # Only GGML types go to the shared decode; any other packed type is the subclass's `_array()`'s
        # (a tensor-blob model's MLX modes) or its error.
        quantized = [info for info in infos if isinstance(info.dtype, GGMLType) and numpy_dtype(info.dtype) is None]
        decoded = quant.dequantize_many((self._quantized_raw(i), i.dtype, i.shape) for i in quantized)
        arrays = dict(zip((info.name for info in quantized), decoded, strict=True))
        return {n: self._hand_out(arrays[n], dtype) if n in arrays else self.tensor(n, dtype) for n in names}

    def _quantized_raw(self, info: TensorInfo) -> np.ndarray:
        """The bytes of a tensor that needs decoding, once it is known the kernels can read them."""
        if not isinstance(info.dtype, GGMLType):
            raise UnsupportedError(f"{self.path}: {info.name!r} is packed {info.dtype.name}; read its bytes with raw()")
        if self.byte_order != "<":
            raise UnsupportedError(f"{self.path}: cannot dequantize {info.dtype.name} tensors of a big-endian file")
        return self.raw(info.name)

    def _hand_out(self, arr: np.ndarray, dtype: np.dtype | type | str | None):
        if dtype is not None:
            arr = arr.astype(dtype)
        if self.framework == "torch":
            from ._torch import numpy_to_torch

            return numpy_to_torch(arr)
        return arr

    @abc.abstractmethod
    def close(self) -> None:
        """Release the file. Arrays already handed out stay valid."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {str(self.path)!r}: {len(self.metadata)} keys, {len(self.tensors)} tensors>"


class MappedModelFile(ModelFile):
    """A model held in one file (`_src`, memory-mapped, or remote), whose tensors are byte ranges of it."""

    _src: BufferSource
    _closed = False

    def _map_and_parse(
        self, path: str | os.PathLike[str] | Openable, framework: str, parse: Callable[[BufferSource], T]
    ) -> T:
        """Map `path` (read-only for numpy; copy-on-write for torch, which wants writable memory, so writes
        touch private pages and never the file), or open a remote file's source, and parse it, releasing
        the source again if the parse fails."""
        if framework not in FRAMEWORKS:
            raise ArgumentError(f"framework is one of {FRAMEWORKS}, not {framework!r}")
        self.framework = framework
        self._src = open_source(path, copy_on_write=framework == "torch")
        try:
            return parse(self._src)
        except BaseException:
            self._src.close()
            raise

    @property
    def file_size(self) -> int:
        return self._src.size

    def raw(self, name: str) -> np.ndarray:
        info = self.tensors[name]
        if self._closed:
            raise ArgumentError(f"{self.path}: the file is closed; open it again to read tensor {name!r}")
        return self._src.array(info.offset, np.uint8, info.nbytes, f"tensor {name!r}")

    def close(self) -> None:
        self._closed = True
        self._src.close()


class ShardedModelFile(ModelFile):
    """A model whose tensors live in several opened files (`shards`), each tensor in `TensorInfo.shard`."""

    shards: Sequence[ModelFile]

    @property
    def file_size(self) -> int:
        return sum(s.file_size for s in self.shards)

    def raw(self, name: str) -> np.ndarray:
        return self.shards[self.tensors[name].shard].raw(name)

    def close(self) -> None:
        for s in self.shards:
            s.close()
