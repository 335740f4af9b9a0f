"""`pull`: a model from a registry into the store, as `ollama pull` does, and safe to interrupt.

The manifest comes first; each blob the store lacks downloads under its download slot (so two pulls of one
blob never both fetch it, and `prune` leaves it alone), resuming an earlier run's partial download; a blob
joins the pull's transaction only once its sha256 matches, and the manifest is written last, atomically and
byte for byte as the registry sent it (Ollama's model ID is its sha256), together with the new blobs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import DigestMismatch, RegistryError
from ..ollama.names import ModelName
from ..ollama.store import Layer, Manifest, Store, Transaction, parse_manifest
from .client import RegistryClient
from .download import Downloader, PartialDownload
from .options import RegistryOptions
from .progress import ByteProgress, ProgressCallback
from .reference import Reference, parse_reference


@dataclass(frozen=True)
class BlobResult:
    """One blob of a pull or push and what became of it: "present" (the store or registry had it),
    "downloaded", "resumed" (an earlier run's download finished), "uploaded" or "mounted"."""

    digest: str
    size: int
    status: str


@dataclass(frozen=True)
class TransferResult:
    """What a pull or push did: the model, its manifest's digest, each blob's fate, the bytes moved."""

    name: ModelName
    digest: str  # sha256 of the manifest's bytes: what Ollama shows as the model's ID
    blobs: list[BlobResult]
    transferred: int  # bytes downloaded (pull) or uploaded (push) by this run

    @property
    def size(self) -> int:
        return sum(b.size for b in self.blobs)


def pull(
    name: str,
    store: Store | None = None,
    *,
    insecure: bool = False,
    options: RegistryOptions | None = None,
    progress: ProgressCallback | None = None,
) -> TransferResult:
    """Download `name` (`host[:port]/namespace/model:tag`, Ollama's defaults) into `store` (default: Ollama's)
    over HTTPS (plain HTTP with `insecure`). `progress(done, total, description)` hears of the bytes."""
    ref = parse_reference(name, insecure=insecure)
    store = store if store is not None else Store()
    options = options or RegistryOptions()
    with RegistryClient(ref, options) as client:
        data = client.manifest()
        layers = blobs_of(parse_manifest(ref.url(f"manifests/{ref.name.tag}"), data), ref)
        with store.transaction() as tx, contextlib.ExitStack() as held:
            missing = [layer for layer in layers if not tx.pin(layer)]
            bar = ByteProgress(sum(layer.size for layer in missing), progress, "downloading")
            slots = _hold_slots(store, missing, held, bar)
            missing = [layer for layer in missing if not tx.pin(layer)]  # another pull may have stored them
            downloads = []
            for layer in missing:
                download = PartialDownload(slots[layer.digest], layer, options)
                held.callback(download.close)
                downloads.append(download)
            bar.total = sum(layer.size for layer in missing)
            bar.add(sum(d.resumed for d in downloads))
            Downloader(client, bar).run(downloads, _Verifier(tx, ref, bar))
            tx.write_manifest(ref.name, data)
            for download in downloads:
                download.discard()  # the store has it now (or a link of it)
    resumed = {d.layer.digest: d.resumed for d in downloads}
    results = [BlobResult(layer.digest, layer.size, _status(resumed.get(layer.digest))) for layer in layers]
    transferred = sum(layer.size - resumed[layer.digest] for layer in missing)
    return TransferResult(ref.name, "sha256:" + hashlib.sha256(data).hexdigest(), results, transferred)


def _status(resumed: int | None) -> str:
    """What a pull did with a blob, from the bytes of it an earlier run had got (None: not downloaded)."""
    return "present" if resumed is None else "resumed" if resumed else "downloaded"


def blobs_of(manifest: Manifest, ref: Reference) -> list[Layer]:
    """The config and layers, each digest once, refusing digests a registry should never send (anything
    but lowercase sha256: they become file names)."""
    seen: dict[str, Layer] = {}
    for layer in (manifest.config, *manifest.layers):
        if layer.digest != layer.digest.lower():
            raise RegistryError(f"{ref}: the manifest names {layer.digest!r}, not a lowercase sha256 digest")
        seen.setdefault(layer.digest, layer)
    return list(seen.values())


def _hold_slots(store: Store, layers: list[Layer], held: contextlib.ExitStack, bar: ByteProgress) -> dict[str, Path]:
    """Take the download slot of each blob, in digest order (so pulls that share blobs never deadlock),
    waiting (and saying so) for one another pull holds."""
    slots: dict[str, Path] = {}
    for layer in sorted(layers, key=lambda layer: layer.digest):
        slot = held.enter_context(store.download_slot(layer.digest, wait=False))
        if slot is None:
            bar.describe("waiting for another pull of the same blobs")
            slot = held.enter_context(store.download_slot(layer.digest))
        slots[layer.digest] = slot
    bar.describe("downloading")
    return slots


class _Verifier:
    """Hands each finished download to the transaction (as a hard link, so a killed pull keeps the file to
    resume from) with the digest it was hashed to as it downloaded; a blob whose hash is not its digest is
    dropped, and the pull fails."""

    def __init__(self, tx: Transaction, ref: Reference, bar: ByteProgress) -> None:
        self._tx, self._ref, self._bar = tx, ref, bar
        self._lock = threading.Lock()

    def __call__(self, download: PartialDownload) -> None:
        expected = download.layer
        with self._lock:
            tmp = self._tx.temp_path()
            try:
                os.link(download.data, tmp)
            except OSError:  # no hard links here: hand the file over
                os.replace(download.data, tmp)
            got = self._tx.adopt(tmp, expected.media_type, expected.name, digest=download.digest)
        if got.digest != expected.digest or got.size != expected.size:
            download.discard()
            raise DigestMismatch(
                f"blob {expected.digest} from {self._ref.name.host} does not match its digest (got {got.digest}, "
                f"{got.size} bytes): nothing was stored; pull again to download it anew"
            )
