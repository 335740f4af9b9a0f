"""What a file is, by its first bytes: the one test that local and remote opening both make."""

from __future__ import annotations

import os

from .errors import FormatError

_JSON_SPACE = b" \t\n\r"


def model_kind(head: bytes, name: str) -> str | None:
    """What a file is by its first bytes (and, for JSON, its name): "gguf", "safetensors", "index" (a
    checkpoint's model.safetensors.index.json) or None."""
    if head[:4] == b"GGUF":
        return "gguf"
    if _looks_like_safetensors(head):
        return "safetensors"
    if head.lstrip(_JSON_SPACE)[:1] == b"{" and name.endswith(".json"):
        return "index"
    return None


def not_a_model(where: str | os.PathLike[str], head: bytes) -> FormatError:
    return FormatError(
        where, 0, f"not a recognised model file (it starts with {head[:8]!r}; expected GGUF or safetensors)"
    )


def _looks_like_safetensors(head: bytes) -> bool:
    """An 8-byte little-endian header length, then JSON that opens an object."""
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    body = head[8 : 8 + n].lstrip(_JSON_SPACE)
    return 0 < n <= 100_000_000 and (body[:1] == b"{" or (not body and n > len(head) - 8))
