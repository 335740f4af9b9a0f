"""Opened GGUF models: one file (`GGUFFile`) or the shards of a split model (`GGUFSplit`)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from .._io import Openable
from ..errors import FormatError
from ..model import MappedModelFile, ShardedModelFile, TensorInfo
from .reader import parse
from .values import Metadata


class GGUFFile(MappedModelFile):
    """One GGUF file, memory-mapped; tensor data is read only when asked for, and never copied by `raw`.

    `header_only=True` (ggml's `no_alloc`) opens a file whose tensor data is cut short, a partial download
    or a header-only file: metadata and tensor infos as usual, `missing` says which tensors lack how many
    bytes, and reading one of those is a `FormatError`. Without it such a file is refused.
    """

    format = "gguf"

    def __init__(
        self, path: str | os.PathLike[str] | Openable, *, framework: str = "numpy", header_only: bool = False
    ) -> None:
        parsed = self._map_and_parse(path, framework, lambda src: parse(src, header_only=header_only))
        self.version = parsed.version
        self.alignment = parsed.alignment
        self.data_offset = parsed.data_offset
        self._value_spans = parsed.value_spans
        self.missing: Mapping[str, int] = parsed.missing
        self._order = parsed.byte_order
        super().__init__(self._src.path, Metadata(parsed.metadata), parsed.tensors)

    @property
    def byte_order(self) -> str:
        return self._order

    def raw(self, name: str) -> np.ndarray:
        lacking = self.missing.get(name)
        if lacking is not None:
            info = self.tensors[name]
            raise FormatError(
                self.path,
                info.offset,
                f"tensor {name!r} lacks {lacking} of its {info.nbytes} bytes: the file ends at {self.file_size}",
            )
        if self.tensors[name].nbytes == 0:  # a zero-element tensor: nothing to read, wherever it starts
            return np.empty(0, np.uint8)
        return super().raw(name)

    def value_bytes(self, key: str) -> bytes:
        """The bytes of metadata value `key` as the file holds them (after its type tag), for copying it
        untouched: re-encoding could change them (a signalling NaN's bits, a BOOL stored as 2)."""
        start, stop = self._value_spans[key]
        return self._src.bytes(start, stop - start, f"the value of {key!r}")


class GGUFSplit(ShardedModelFile):
    """A model split across several GGUF files (llama.cpp's gguf-split): one model, many maps.

    Metadata comes from the first shard (which holds all of it); tensors from every shard, with
    `TensorInfo.shard` telling which; `missing` gathers the shards' (when opened header-only).
    """

    format = "gguf"

    def __init__(self, shards: list[GGUFFile]) -> None:
        self.shards = shards
        tensors: dict[str, TensorInfo] = {}
        for i, shard in enumerate(shards):
            for name, info in shard.tensors.items():
                tensors[name] = TensorInfo(info.name, info.dtype, info.shape, info.offset, info.nbytes, i)
        first = shards[0]
        self.framework = first.framework
        self.version = first.version
        self.alignment = first.alignment
        self.missing: Mapping[str, int] = {name: n for shard in shards for name, n in shard.missing.items()}
        super().__init__(first.path, first.metadata, tensors)

    @property
    def byte_order(self) -> str:
        return self.shards[0].byte_order
