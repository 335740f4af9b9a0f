"""Opening a model from an Ollama store by name, through the same interface as any file."""

from __future__ import annotations

import json

from ..errors import UnsupportedError
from ..gguf.split import open_gguf_shards
from ..model import ModelFile
from .names import parse_name
from .store import Store
from .tensor_blobs import TensorBlobModel


def open_store_model(name: str, *, store: Store | None = None, framework: str = "numpy") -> ModelFile:
    """`name:tag` from the store: a GGUF model opens its `.model` layers (several for a split model); a
    tensor-blob model opens its `.tensor` layers as one model, with its config.json from the `.json` layers."""
    store = store or Store()
    model_name = parse_name(name)
    manifest = store.manifest(model_name)
    gguf_layers = manifest.layers_of("model")
    if gguf_layers:
        model = open_gguf_shards([store.blob_path(layer.digest) for layer in gguf_layers], framework=framework)
        model.display_name = model_name.short
        return model
    tensor_layers = manifest.layers_of("tensor")
    if not tensor_layers:
        raise UnsupportedError(f"{model_name.short} has neither GGUF nor tensor layers")
    config = None
    for layer in manifest.layers_of("json"):
        if layer.name == "config.json":
            config = json.loads(store.blob_path(layer.digest).read_bytes())
    model = TensorBlobModel(
        store.manifest_path(model_name), tensor_layers, store.blob_path, config, framework=framework
    )
    model.display_name = model_name.short
    return model
