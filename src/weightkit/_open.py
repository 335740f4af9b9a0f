"""`weightkit.open`: detect a model's format from its bytes and open it."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import FormatError
from .model import ModelFile

_JSON_SPACE = b" \t\n\r"


def open_model(path: str | os.PathLike[str]) -> ModelFile:
    """Open a model file, whatever its format (decided by its first bytes, not its name)."""
    path = Path(path)
    if path.is_dir():
        raise FormatError(path, None, "is a folder; expected a model file")
    with open(path, "rb") as f:
        head = f.read(64)
    if head[:4] == b"GGUF":
        from .gguf import open_gguf

        return open_gguf(path)
    if _looks_like_safetensors(head):
        from .safetensors import SafetensorsFile

        return SafetensorsFile(path)
    raise FormatError(
        path, 0, f"not a recognised model file (it starts with {head[:8]!r}; expected GGUF or safetensors)"
    )


def _looks_like_safetensors(head: bytes) -> bool:
    """An 8-byte little-endian header length, then JSON that opens an object."""
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    body = head[8 : 8 + n].lstrip(_JSON_SPACE)
    return 0 < n <= 100_000_000 and (body[:1] == b"{" or (not body and n > len(head) - 8))
