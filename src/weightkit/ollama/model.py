"""Opening a model from an Ollama store by name, through the same interface as any file."""

from __future__ import annotations

from ..errors import UnsupportedError
from ..gguf.split import open_gguf_shards
from ..model import ModelFile
from .names import parse_name
from .store import Store


def open_store_model(name: str, *, store: Store | None = None, framework: str = "numpy") -> ModelFile:
    """`name:tag` from the store: a GGUF model opens its `.model` layers (several for a split model)."""
    store = store or Store()
    model_name = parse_name(name)
    manifest = store.manifest(model_name)
    gguf_layers = manifest.layers_of("model")
    if gguf_layers:
        return open_gguf_shards([store.blob_path(layer.digest) for layer in gguf_layers], framework=framework)
    raise UnsupportedError(f"{model_name.short}: models without a GGUF .model layer are not supported yet")
