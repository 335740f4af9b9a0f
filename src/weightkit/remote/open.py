"""`weightkit.open` of a URL, an hf:// URI or (with `remote=True`) a registry's model name."""

from __future__ import annotations

from typing import Any

from .._sniff import model_kind, not_a_model
from ..errors import ArgumentError, HTTPStatusError
from ..gguf.split import open_gguf
from ..model import ModelFile
from ..net.http import HttpClient
from ..safetensors import SafetensorsCheckpoint, SafetensorsFile
from ..safetensors.checkpoint import MAX_INDEX_BYTES, check_index_size, parse_config, parse_index
from . import hf
from .registry import open_registry_model
from .source import RemoteFile


def open_remote(
    location: str, *, framework: str = "numpy", registry: bool = False, insecure: bool = False
) -> ModelFile:
    """Open a remote model: reads its headers by range requests, fetches tensor data when asked for.
    `model.remote` is the HTTP client it reads through (`bytes_fetched`, `requests`). With `registry`, `location`
    is a registry's model name, spoken to over plain HTTP with `insecure`."""
    if registry and location[: len(hf.SCHEME)].lower() == hf.SCHEME:
        raise ArgumentError(f"{location!r}: --remote takes a registry's model name, not an hf:// URI")
    client = HttpClient()
    try:
        if registry:
            model: ModelFile = open_registry_model(client, location, framework=framework, insecure=insecure)
        else:
            model = open_remote_file(remote_file(client, location), framework=framework)
    except BaseException:
        client.close()
        raise
    model.remote = client
    model.display_name = location
    return model


def remote_file(client: HttpClient, location: str) -> RemoteFile:
    """The file an http(s) URL or hf:// URI names ($HF_TOKEN authorized for the Hugging Face endpoint)."""
    hf.authorize(client)
    if location[: len(hf.SCHEME)].lower() == hf.SCHEME:
        return RemoteFile(client, hf.resolve_url(location), location, pin=hf.at_commit)
    return RemoteFile(client, location)


def open_remote_file(file: RemoteFile, *, framework: str = "numpy") -> ModelFile:
    """A GGUF file (any shard of a split model opens all of it), a safetensors file, or a checkpoint's
    `model.safetensors.index.json` (its shards beside it), decided by the file's first bytes."""
    kind = model_kind(file.head(), file.name)
    if kind == "gguf":
        return open_gguf(file, framework=framework)
    if kind == "safetensors":
        config = _config(file)
        model = SafetensorsFile(file, framework=framework)
        model.config = config
        return model
    if kind == "index":
        check_index_size(file.display, file.size)
        weight_map, index_meta = parse_index(file.display, file.read_all())
        return SafetensorsCheckpoint.from_index(file, weight_map, index_meta, _config(file), framework=framework)
    raise not_a_model(file.display, file.head())


def _config(file: RemoteFile) -> dict[str, Any] | None:
    """The config.json beside a remote safetensors file or index (what a summary reads), or None."""
    config = file.with_name("config.json")
    try:
        return None if config.size > MAX_INDEX_BYTES else parse_config(config.read_all())
    except HTTPStatusError:  # none there (404), or not for us to read
        return None
