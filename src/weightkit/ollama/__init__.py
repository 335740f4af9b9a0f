"""Ollama's model store: names, manifests, content-addressed blobs, importing and opening models."""

from .create import create_from_checkpoint, create_from_gguf, create_from_hf_gguf
from .model import open_store_model
from .names import DEFAULT_HOST, DEFAULT_NAMESPACE, DEFAULT_TAG, InvalidName, ModelName, parse_name
from .store import Layer, Manifest, ModelNotFound, PruneReport, Removed, Store, Transaction, default_root

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TAG",
    "InvalidName",
    "Layer",
    "Manifest",
    "ModelName",
    "ModelNotFound",
    "PruneReport",
    "Removed",
    "Store",
    "Transaction",
    "create_from_checkpoint",
    "create_from_gguf",
    "create_from_hf_gguf",
    "default_root",
    "open_store_model",
    "parse_name",
]
