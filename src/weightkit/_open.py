"""`weightkit.open`: detect a model's format from its bytes and open it."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ArgumentError, FormatError
from .model import FRAMEWORKS, ModelFile

_JSON_SPACE = b" \t\n\r"


def open_model(path: str | os.PathLike[str], *, framework: str = "numpy") -> ModelFile:
    """Open a model, whatever its format (decided by its bytes, not its name): a GGUF file (any shard of a
    split model opens all of it), a safetensors file, a Hugging Face checkpoint folder or its
    `model.safetensors.index.json`, or a model name in Ollama's store (`gemma3:270m`) when no such file
    exists. `framework="torch"` makes `tensor()` return torch tensors."""
    if framework not in FRAMEWORKS:
        raise ArgumentError(f"framework is one of {FRAMEWORKS}, not {framework!r}")
    if not Path(path).exists() and _looks_like_model_name(str(path)):
        from .ollama import ModelNotFound, open_store_model

        try:
            return open_store_model(str(path), framework=framework)
        except ModelNotFound as e:
            raise ModelNotFound(f"{path}: no such file, and {e}") from None
    path = Path(path)
    if path.is_dir():
        from .safetensors import SafetensorsCheckpoint

        return SafetensorsCheckpoint(path, framework=framework)
    with open(path, "rb") as f:
        head = f.read(64)
    if head[:4] == b"GGUF":
        from .gguf import open_gguf

        return open_gguf(path, framework=framework)
    if _looks_like_safetensors(head):
        from .safetensors import SafetensorsFile

        return SafetensorsFile(path, framework=framework)
    if head.lstrip(_JSON_SPACE)[:1] == b"{" and path.name.endswith(".json"):
        from .safetensors import SafetensorsCheckpoint

        return SafetensorsCheckpoint(path, framework=framework)
    raise FormatError(
        path, 0, f"not a recognised model file (it starts with {head[:8]!r}; expected GGUF or safetensors)"
    )


def _looks_like_model_name(text: str) -> bool:
    """`name`, `name:tag` or `namespace/name:tag`: something to look up in Ollama's store."""
    from .ollama import InvalidName, parse_name

    try:
        parse_name(text)
    except InvalidName:
        return False
    return True


def _looks_like_safetensors(head: bytes) -> bool:
    """An 8-byte little-endian header length, then JSON that opens an object."""
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    body = head[8 : 8 + n].lstrip(_JSON_SPACE)
    return 0 < n <= 100_000_000 and (body[:1] == b"{" or (not body and n > len(head) - 8))
