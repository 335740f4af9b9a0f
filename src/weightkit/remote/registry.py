"""Models in a registry (`--remote`): the manifest by the registry client of `weightkit pull` (its names,
authentication and errors), then the GGUF model blobs read by range like any remote file, through the same
HTTP client, which holds the registry's Authorization for the registry's origin only (never for storage a
blob redirects to)."""

from __future__ import annotations

from ..errors import FormatError, UnsupportedError
from ..gguf.file import GGUFFile, GGUFSplit
from ..gguf.split import open_gguf_shards
from ..net.http import HttpClient
from ..ollama.store import parse_manifest
from ..registry.client import RegistryClient
from ..registry.options import RegistryOptions
from ..registry.reference import parse_reference
from .source import RemoteFile


def open_registry_model(
    client: HttpClient, text: str, *, framework: str, insecure: bool = False
) -> GGUFFile | GGUFSplit:
    """The GGUF model a registry holds under the name `text` (several model layers: a split model). HTTPS,
    unless the name starts with http:// or `insecure` allows plain HTTP (as `pull`'s)."""
    ref = parse_reference(text, insecure=insecure or text[:7].lower() == "http://")
    with RegistryClient(ref, RegistryOptions(timeout=client.timeout), http=client) as registry:
        data = registry.manifest()
    manifest_url = ref.url(f"manifests/{ref.name.tag}")
    layers = parse_manifest(manifest_url, data).layers_of("model")
    if not layers:
        raise UnsupportedError(f"{text}: the manifest has no GGUF model layer; remote reading reads GGUF models")
    blobs = [RemoteFile(client, ref.url(f"blobs/{layer.digest}")) for layer in layers]
    for blob, layer in zip(blobs, layers, strict=True):
        if blob.size != layer.size:
            raise FormatError(
                manifest_url,
                None,
                f"the manifest says {layer.digest} has {layer.size} bytes; the registry has {blob.size}",
            )
    return open_gguf_shards(blobs, framework=framework)
