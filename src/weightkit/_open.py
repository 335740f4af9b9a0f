"""`weightkit.open`: detect a model's format from its bytes and open it."""

from __future__ import annotations

import os
from pathlib import Path

from ._sniff import model_kind, not_a_model
from .errors import ArgumentError
from .model import FRAMEWORKS, ModelFile

_URL_SCHEMES = ("http://", "https://", "hf://")


def open_model(
    path: str | os.PathLike[str],
    *,
    framework: str = "numpy",
    remote: bool = False,
    insecure: bool = False,
    header_only: bool = False,
) -> ModelFile:
    """Open a model, whatever its format (decided by its bytes, not its name): a GGUF file (any shard of a
    split model opens all of it), a safetensors file, a Hugging Face checkpoint folder or its
    `model.safetensors.index.json`, or a model name in Ollama's store (`gemma3:270m`) when no such file
    exists. `framework="torch"` makes `tensor()` return torch tensors.

    An http(s):// URL or hf://org/repo[@revision]/path is read remotely, by range requests: its header now,
    tensor data when asked for (`weightkit.remote`). With `remote=True` a model name is looked up in its
    registry (registry.ollama.ai, or the host the name gives) instead of the local store, over HTTPS, or plain
    HTTP with `insecure` (as `weightkit pull --insecure`).

    `header_only=True` opens a local GGUF whose tensor data is cut short (a partial download, a header-only
    file): metadata and tensor infos, with `missing` naming the incomplete tensors (see `gguf.GGUFFile`)."""
    if framework not in FRAMEWORKS:
        raise ArgumentError(f"framework is one of {FRAMEWORKS}, not {framework!r}")
    text = os.fspath(path)
    if remote or text[:8].lower().startswith(_URL_SCHEMES):
        from .remote import open_remote

        return open_remote(text, framework=framework, registry=remote, insecure=insecure)
    if not Path(path).exists() and _looks_like_model_name(text):
        from .ollama import ModelNotFound, open_store_model

        try:
            return open_store_model(text, framework=framework)
        except ModelNotFound as e:
            raise ModelNotFound(f"{path}: no such file, and {e}") from None
    path = Path(path)
    if path.is_dir():
        from .safetensors import SafetensorsCheckpoint

        return SafetensorsCheckpoint(path, framework=framework)
    with open(path, "rb") as f:
        head = f.read(64)
    kind = model_kind(head, path.name)
    if kind == "gguf":
        from .gguf import open_gguf

        return open_gguf(path, framework=framework, header_only=header_only)
    if kind == "safetensors":
        from .safetensors import SafetensorsFile

        return SafetensorsFile(path, framework=framework)
    if kind == "index":
        from .safetensors import SafetensorsCheckpoint

        return SafetensorsCheckpoint(path, framework=framework)
    raise not_a_model(path, head)


def _looks_like_model_name(text: str) -> bool:
    """`name`, `name:tag` or `namespace/name:tag`: something to look up in Ollama's store."""
    from .ollama import InvalidName, parse_name

    try:
        parse_name(text)
    except InvalidName:
        return False
    return True
