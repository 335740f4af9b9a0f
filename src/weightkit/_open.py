"""`weightkit.open`: detect a model's format from its bytes and open it."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import FormatError
from .model import ModelFile


def open_model(path: str | os.PathLike[str]) -> ModelFile:
    """Open a model file, whatever its format (decided by its first bytes, not its name)."""
    path = Path(path)
    if path.is_dir():
        raise FormatError(path, None, "is a folder; expected a model file")
    with open(path, "rb") as f:
        head = f.read(8)
    if head[:4] == b"GGUF":
        from .gguf import open_gguf

        return open_gguf(path)
    raise FormatError(path, 0, f"not a recognised model file (it starts with {head!r}; GGUF files start with b'GGUF')")
