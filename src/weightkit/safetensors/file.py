"""An opened safetensors file: the header parsed, the data mapped, nothing else read."""

from __future__ import annotations

import os
from pathlib import Path
from types import MappingProxyType

from ..model import MappedModelFile
from .reader import parse


class SafetensorsFile(MappedModelFile):
    """One safetensors file. `tensor(name)` is a zero-copy view of the map, so slicing it (say, some rows)
    reads only those bytes from disk."""

    format = "safetensors"

    def __init__(self, path: str | os.PathLike[str], *, framework: str = "numpy") -> None:
        parsed = self._map_and_parse(path, framework, parse)
        self.header_size = parsed.header_size
        super().__init__(Path(path), MappingProxyType(parsed.metadata or {}), parsed.tensors)
