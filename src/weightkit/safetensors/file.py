"""An opened safetensors file: the header parsed, the data mapped, nothing else read."""

from __future__ import annotations

import os
from types import MappingProxyType

import numpy as np

from .._io import Openable
from .._torch import packed_fp4_to_torch
from ..dtypes import SafetensorsDType
from ..model import MappedModelFile, ModelFile
from .reader import parse


class SafetensorsModel(ModelFile):
    """What a safetensors file and a checkpoint folder share: with framework="torch", an F4 tensor comes as
    torch's float4_e2m1fn_x2 (two values an element, the last dimension halved), as the reference's
    safe_open(framework="pt") gives it. numpy has no such type: there `raw()` gives its bytes."""

    format = "safetensors"

    def tensor(self, name: str, dtype: np.dtype | type | str | None = None):
        info = self.tensors[name]
        if info.dtype is SafetensorsDType.F4 and self.framework == "torch" and dtype is None:
            return packed_fp4_to_torch(self.raw(name), info.shape, f"{self.path}: tensor {name!r}")
        return super().tensor(name, dtype)


class SafetensorsFile(SafetensorsModel, MappedModelFile):
    """One safetensors file. `tensor(name)` is a zero-copy view of the map, so slicing it (say, some rows)
    reads only those bytes from disk."""

    def __init__(self, path: str | os.PathLike[str] | Openable, *, framework: str = "numpy") -> None:
        parsed = self._map_and_parse(path, framework, parse)
        self.header_size = parsed.header_size
        super().__init__(self._src.path, MappingProxyType(parsed.metadata or {}), parsed.tensors)
