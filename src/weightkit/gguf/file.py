"""Opened GGUF models: one file (`GGUFFile`) or the shards of a split model (`GGUFSplit`)."""

from __future__ import annotations

import os

from .._io import Openable
from ..model import MappedModelFile, ShardedModelFile, TensorInfo
from .reader import parse
from .values import Metadata


class GGUFFile(MappedModelFile):
    """One GGUF file, memory-mapped; tensor data is read only when asked for, and never copied by `raw`."""

    format = "gguf"

    def __init__(self, path: str | os.PathLike[str] | Openable, *, framework: str = "numpy") -> None:
        parsed = self._map_and_parse(path, framework, parse)
        self.version = parsed.version
        self.alignment = parsed.alignment
        self.data_offset = parsed.data_offset
        self._order = parsed.byte_order
        super().__init__(self._src.path, Metadata(parsed.metadata), parsed.tensors)

    @property
    def byte_order(self) -> str:
        return self._order


class GGUFSplit(ShardedModelFile):
    """A model split across several GGUF files (llama.cpp's gguf-split): one model, many maps.

    Metadata comes from the first shard (which holds all of it); tensors from every shard, with
    `TensorInfo.shard` telling which.
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
        super().__init__(first.path, first.metadata, tensors)

    @property
    def byte_order(self) -> str:
        return self.shards[0].byte_order
