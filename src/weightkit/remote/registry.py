"""Models in a registry (`--remote`): the manifest by the registry's v2 API, then the GGUF model blobs read
by range like any remote file. Anonymous access, or Basic auth from $WEIGHTKIT_REGISTRY_USER and
$WEIGHTKIT_REGISTRY_PASSWORD when the registry asks for it (sent to the registry's origin only, never to
storage it redirects blobs to)."""

from __future__ import annotations

import base64
import hashlib
import os

from ..errors import FormatError, RemoteError, UnsupportedError
from ..gguf.file import GGUFFile, GGUFSplit
from ..gguf.split import open_gguf_shards
from ..ollama.names import ModelName, parse_name
from ..ollama.store import MANIFEST_MEDIA_TYPE, parse_manifest
from .http import HttpClient, Response
from .source import RemoteFile

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
# docker-registry answers 400 to a manifest request that does not accept its schema2 type.
ACCEPT = f"{MANIFEST_MEDIA_TYPE}, {OCI_MANIFEST}"
MAX_MANIFEST_BYTES = 4 << 20
_CREDENTIALS = "WEIGHTKIT_REGISTRY_USER and WEIGHTKIT_REGISTRY_PASSWORD"


def repository_url(text: str) -> tuple[str, ModelName]:
    """The v2 API URL of a model's repository, and its name. HTTPS, unless the name starts with http://."""
    scheme = "https"
    for prefix in ("http://", "https://"):
        if text[: len(prefix)].lower() == prefix:
            scheme, text = prefix[:-3], text[len(prefix) :]
    name = parse_name(text)
    return f"{scheme}://{name.host}/v2/{name.namespace}/{name.model}", name


def open_registry_model(client: HttpClient, text: str, *, framework: str) -> GGUFFile | GGUFSplit:
    """The GGUF model a registry holds under the name `text` (several model layers: a split model)."""
    repository, name = repository_url(text)
    manifest_url = f"{repository}/manifests/{name.tag}"
    manifest = parse_manifest(manifest_url, _manifest(client, manifest_url, text))
    layers = manifest.layers_of("model")
    if not layers:
        raise UnsupportedError(f"{text}: the manifest has no GGUF model layer; remote reading reads GGUF models")
    blobs = [RemoteFile(client, f"{repository}/blobs/{layer.digest}") for layer in layers]
    for blob, layer in zip(blobs, layers, strict=True):
        if blob.size != layer.size:
            raise FormatError(
                manifest_url,
                None,
                f"the manifest says {layer.digest} has {layer.size} bytes; the registry has {blob.size}",
            )
    return open_gguf_shards(blobs, framework=framework)


def _manifest(client: HttpClient, url: str, what: str) -> bytes:
    """The manifest's bytes, checked against the digest the registry gives for them."""
    response = client.get(url, {"Accept": ACCEPT})
    credentials = _credentials()
    if response.status == 401 and _challenge(response) == "basic" and credentials:
        client.discard(response)
        client.authorize(url, credentials)
        response = client.get(url, {"Accept": ACCEPT})
    if response.status == 401:
        raise client.status_error(response, what, _auth_hint(_challenge(response), bool(credentials)))
    if response.status != 200:
        raise client.status_error(response, what)
    data = client.read_limited(response, MAX_MANIFEST_BYTES, what)
    digest = response.header("Docker-Content-Digest")
    if digest and digest != "sha256:" + hashlib.sha256(data).hexdigest():
        raise RemoteError(f"{what}: the manifest does not match the digest the registry gives for it ({digest})")
    return data


def _credentials() -> str | None:
    user, password = os.environ.get("WEIGHTKIT_REGISTRY_USER"), os.environ.get("WEIGHTKIT_REGISTRY_PASSWORD")
    if not user or password is None:
        return None
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _challenge(response: Response) -> str:
    """The auth scheme a 401 asks for, lowercased ("basic", "bearer"), or ""."""
    return (response.header("WWW-Authenticate") or "").strip().partition(" ")[0].lower()


def _auth_hint(scheme: str, had_credentials: bool) -> str:
    if scheme == "bearer":
        return "the registry asks for a token; remote reading signs in anonymously or with Basic auth only"
    if had_credentials:
        return f"the registry refused the credentials in {_CREDENTIALS}"
    return f"set {_CREDENTIALS}"
