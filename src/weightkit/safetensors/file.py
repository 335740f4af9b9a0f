"""An opened safetensors file: the header parsed, the data mapped, nothing else read."""

from __future__ import annotations

import os
from pathlib import Path
from types import MappingProxyType

import numpy as np

from .._io import ByteSource
from ..model import ModelFile
from .reader import parse


class SafetensorsFile(ModelFile):
    """One safetensors file. `tensor(name)` is a zero-copy view of the map, so slicing it (say, some rows)
    reads only those bytes from disk."""

    format = "safetensors"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._src = ByteSource(path)
        try:
            parsed = parse(self._src)
        except BaseException:
            self._src.close()
            raise
        self.header_size = parsed.header_size
        super().__init__(Path(path), MappingProxyType(parsed.metadata or {}), parsed.tensors)

    @property
    def file_size(self) -> int:
        return self._src.size

    def raw(self, name: str) -> np.ndarray:
        info = self.tensors[name]
        return self._src.array(info.offset, np.uint8, info.nbytes, f"tensor {name!r}")

    def close(self) -> None:
        self._src.close()
