"""Importing models into an Ollama store: a GGUF file as a `.model` layer."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path

from ..gguf import GGUFFile, open_gguf
from ..gguf.constants import FILE_TYPES, KEY_ARCHITECTURE, KEY_FILE_TYPE
from .names import ModelName, parse_name
from .store import CONFIG_MEDIA_TYPE, MEDIA_TYPES, Manifest, Store

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


def human_number(n: int) -> str:
    """Ollama's format.HumanNumber: what `ollama show` calls the parameter size (e.g. 268.10M, 8B)."""
    for div, unit, digits in ((10**9, "B", 1), (10**6, "M", 2)):
        if n >= div:
            number = n / div
            return f"{number:.0f}{unit}" if number == math.floor(number) else f"{number:.{digits}f}{unit}"
    if n >= 1000:
        return f"{n / 1000:.0f}K"
    return str(n)


def gguf_config(model: GGUFFile) -> dict:
    """The config blob Ollama writes for a GGUF model (model/ConfigV2)."""
    arch = model.metadata.get(KEY_ARCHITECTURE, "")
    ft = model.metadata.get(KEY_FILE_TYPE)
    params = sum(t.n_elements for t in model.tensors.values())
    return {
        "model_format": "gguf",
        "model_family": arch,
        "model_families": [arch] if arch else None,
        "model_type": human_number(params),
        "file_type": FILE_TYPES.get(ft, "unknown") if isinstance(ft, int) else "unknown",
        "architecture": "amd64",
        "os": "linux",
    }


def create_from_gguf(
    store: Store, name: ModelName | str, path: str | os.PathLike[str], *, progress: Progress | None = None
) -> Manifest:
    """Store a GGUF model (any shard of a split one opens all of it; each shard becomes a `.model` layer)."""
    name = parse_name(name) if isinstance(name, str) else name
    with open_gguf(path) as model:
        shards = [s.path for s in getattr(model, "shards", [model])]
        config = gguf_config(model)
    total = sum(p.stat().st_size for p in shards)
    done = 0
    layers = []
    for shard in shards:

        def counted(chunks, base=done):
            seen = 0
            for chunk in chunks:
                seen += len(chunk)
                if progress is not None:
                    progress(base + seen, total)
                yield chunk

        with open(shard, "rb") as f:
            layers.append(store.add_blob(counted(iter(lambda f=f: f.read(8 << 20), b"")), MEDIA_TYPES["model"]))
        done += Path(shard).stat().st_size
    config_layer = store.add_bytes(json.dumps(config, separators=(",", ":")).encode(), CONFIG_MEDIA_TYPE)
    manifest = Manifest(config_layer, layers)
    store.write_manifest(name, manifest)
    return manifest
