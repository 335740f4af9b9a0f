"""`push`: a stored model to a registry, as `ollama push` does, on any OCI registry.

Each blob the repository lacks (HEAD) is mounted from another repository of the same registry that a local
model says has it (`?mount=&from=`; `weightkit cp` then `push` copies without sending the bytes), or else
uploaded: POST a session, PATCH the chunks in order (each to the newest Location, as registries refuse an
old one), PUT `?digest=`. The manifest goes last, its stored bytes as they are, under its own media type.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from ..errors import FormatError, WeightkitError
from ..net.http import ExchangeFailed, FileRegion
from ..ollama.store import Layer, Store, parse_manifest
from .client import RegistryClient
from .options import RegistryOptions
from .progress import ByteProgress, ProgressCallback
from .pull import BlobResult, TransferResult, blobs_of
from .reference import Reference, is_repository_name, parse_reference
from .workers import drain

_PARALLEL_BLOBS = 4


def push(
    name: str,
    store: Store | None = None,
    *,
    insecure: bool = False,
    options: RegistryOptions | None = None,
    progress: ProgressCallback | None = None,
) -> TransferResult:
    """Upload the stored model `name` (`host[:port]/namespace/model:tag`) to its registry over HTTPS (plain
    HTTP with `insecure`). `progress(done, total, description)` hears of the bytes."""
    ref = parse_reference(name, insecure=insecure)
    store = store if store is not None else Store()
    options = options or RegistryOptions()
    path = store.manifest_path(ref.name)
    data = store.manifest_bytes(ref.name)
    manifest = parse_manifest(path, data)
    layers = blobs_of(manifest, ref)
    for layer in layers:
        blob = store.blob_path(layer.digest)
        if not blob.is_file() or blob.stat().st_size != layer.size:
            raise WeightkitError(f"{ref.name.short}: blob {layer.digest} is missing or damaged in the store "
                                 "(see weightkit verify)")  # fmt: skip
    sources = _mount_sources(store, ref)
    bar = ByteProgress(sum(layer.size for layer in layers), progress, "uploading")
    with RegistryClient(ref, options) as client:
        uploader = _Uploader(client, bar)
        statuses: dict[str, str] = {}

        def upload(layer: Layer) -> None:
            statuses[layer.digest] = uploader.upload(layer, store.blob_path(layer.digest), sources.get(layer.digest))

        drain(layers, upload, min(_PARALLEL_BLOBS, options.connections), uploader.stop)
        client.put_manifest(data, manifest.media_type)
    results = [BlobResult(layer.digest, layer.size, statuses[layer.digest]) for layer in layers]
    transferred = sum(r.size for r in results if r.status == "uploaded")
    return TransferResult(ref.name, "sha256:" + hashlib.sha256(data).hexdigest(), results, transferred)


def _mount_sources(store: Store, ref: Reference) -> dict[str, str]:
    """For each digest, another repository on the same registry that a local model names it in (the first
    by name): likely the registry has it there, to mount from."""
    sources: dict[str, str] = {}
    for name, path in store.models():
        repository = f"{name.namespace}/{name.model}"
        if name.host != ref.name.host or repository == ref.repository or not is_repository_name(repository):
            continue
        try:
            manifest = parse_manifest(path, path.read_bytes())
        except (OSError, FormatError):
            continue
        for layer in (manifest.config, *manifest.layers):
            sources.setdefault(layer.digest, repository)
    return sources


class _Uploader:
    """Blob uploads of one push, several at once; `stop` ends the others' chunking after a failure."""

    def __init__(self, client: RegistryClient, bar: ByteProgress) -> None:
        self._client = client
        self._bar = bar
        self.stop = threading.Event()

    def upload(self, layer: Layer, path: Path, mount_from: str | None) -> str:
        """ "present", "mounted" or "uploaded"."""
        client = self._client
        if client.has_blob(layer.digest):
            self._bar.add(layer.size)
            return "present"
        location = client.start_upload(layer.digest, mount_from)
        if location is None:
            self._bar.add(layer.size)
            return "mounted"
        offset, backoff = 0, client.backoff()
        while offset < layer.size and not self.stop.is_set():
            sent = 0

            def on_sent(n: int) -> None:
                nonlocal sent
                sent += n
                self._bar.add(n)

            length = min(client.options.part_size, layer.size - offset)
            try:
                location = client.upload_chunk(location, FileRegion(path, offset, length, on_sent))
            except ExchangeFailed as e:
                self._bar.add(-sent)
                backoff.failed(e)
                held, location = client.retrying(lambda location=location: client.upload_offset(location))
                self._bar.add(held - offset)
                offset = held
                continue
            offset += length
            backoff.progressed()
        if self.stop.is_set():
            return "stopped"  # another upload failed: push raises that
        client.finish_upload(location, layer.digest)
        return "uploaded"
