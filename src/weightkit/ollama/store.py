"""Ollama's model store: content-addressed blobs and the manifests that name them.

Layout (as Ollama's manifest/ package): `$OLLAMA_MODELS` or `~/.ollama/models`, holding
`blobs/sha256-<64 hex>` and `manifests/<host>/<namespace>/<model>/<tag>` (schemaVersion 2 JSON).

Nothing is lost: a blob is streamed to a temp file in `blobs/`, hashed on the way, fsynced, and renamed to
its digest (kept if the same content is already there); a manifest is written last, atomically, and only
after every blob it names exists. Two writers at once can only race to rename identical content.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from .._io import atomic_write
from ..errors import FormatError, ModelNotFound, WeightkitError
from .names import ModelName, name_from_parts, parse_name

MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_MEDIA_TYPE = "application/vnd.docker.container.image.v1+json"
MEDIA = "application/vnd.ollama.image."
MEDIA_TYPES = {k: MEDIA + k for k in (
    "tensor", "model", "json", "template", "system", "params", "license", "projector", "adapter", "messages",
)}  # fmt: skip
_DIGEST = re.compile(r"^sha256[:-][0-9a-fA-F]{64}$")
_COPY_CHUNK = 8 << 20


def default_root() -> Path:
    """Where Ollama keeps models: OLLAMA_MODELS, else ~/.ollama/models."""
    env = os.environ.get("OLLAMA_MODELS")
    return Path(env) if env else Path.home() / ".ollama" / "models"


@dataclass
class Layer:
    media_type: str
    digest: str
    size: int
    name: str = ""
    from_: str = ""

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.from_:
            d["from"] = self.from_
        if self.name:
            d["name"] = self.name
        return d


@dataclass
class Manifest:
    config: Layer
    layers: list[Layer] = field(default_factory=list)
    schema_version: int = 2
    media_type: str = MANIFEST_MEDIA_TYPE

    def to_bytes(self) -> bytes:
        doc = {
            "schemaVersion": self.schema_version,
            "mediaType": self.media_type,
            "config": self.config.to_json(),
            "layers": [layer.to_json() for layer in self.layers],
        }
        return (json.dumps(doc, separators=(",", ":")) + "\n").encode()  # as Go's json.Encoder writes

    @property
    def size(self) -> int:
        return self.config.size + sum(layer.size for layer in self.layers)

    def layers_of(self, kind: str) -> list[Layer]:
        return [layer for layer in self.layers if layer.media_type == MEDIA_TYPES[kind]]


def check_digest(digest: str) -> str:
    """`sha256:<hex>` (or `sha256-<hex>`), refusing anything else: digests become file names."""
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise WeightkitError(f"invalid blob digest {digest!r}")
    return "sha256:" + digest[7:]


def _layer(path: Path, raw: Any, where: str) -> Layer:
    if not isinstance(raw, dict):
        raise FormatError(path, None, f"{where} is not an object")
    media, digest, size = raw.get("mediaType"), raw.get("digest"), raw.get("size")
    if not isinstance(media, str) or not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise FormatError(path, None, f"{where} needs a mediaType string and a non-negative size")
    try:
        digest = check_digest(digest)
    except WeightkitError as e:
        raise FormatError(path, None, f"{where}: {e}") from None
    name, from_ = raw.get("name", ""), raw.get("from", "")
    if not isinstance(name, str) or not isinstance(from_, str):
        raise FormatError(path, None, f"{where}: name and from must be strings")
    return Layer(media, digest, size, name, from_)


def parse_manifest(path: Path, data: bytes) -> Manifest:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise FormatError(path, 0, f"not a JSON manifest: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("layers"), list):
        raise FormatError(path, 0, "a manifest is an object with a 'layers' list")
    config = _layer(path, doc.get("config"), "config")
    layers = [_layer(path, raw, f"layer {i}") for i, raw in enumerate(doc["layers"])]
    return Manifest(config, layers, doc.get("schemaVersion", 2), doc.get("mediaType", MANIFEST_MEDIA_TYPE))


class Store:
    """One Ollama model store on disk."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()

    @property
    def blobs(self) -> Path:
        return self.root / "blobs"

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    def blob_path(self, digest: str) -> Path:
        return self.blobs / check_digest(digest).replace(":", "-")

    def manifest_path(self, name: ModelName | str) -> Path:
        name = parse_name(name) if isinstance(name, str) else name
        return self.manifests.joinpath(*name.parts)

    # blobs

    def add_blob(self, chunks: Iterable[bytes | memoryview], media_type: str, name: str = "") -> Layer:
        """Stream `chunks` into a blob, hashing on the way; returns its layer. Same content: stored once."""
        tmp = self.temp_blob_path()
        try:
            digest, size = hashlib.sha256(), 0
            with open(tmp, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
                    digest.update(chunk)
                    size += len(memoryview(chunk).cast("B"))
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return self._place(tmp, Layer(media_type, "sha256:" + digest.hexdigest(), size, name))

    def adopt(self, tmp: Path, media_type: str, name: str = "") -> Layer:
        """Move a finished, synced file written inside `blobs/` (e.g. by a writer) into place by its digest."""
        try:
            digest, size = hashlib.sha256(), 0
            with open(tmp, "rb") as f:
                for chunk in _chunks(f):
                    digest.update(chunk)
                    size += len(chunk)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return self._place(tmp, Layer(media_type, "sha256:" + digest.hexdigest(), size, name))

    def _place(self, tmp: Path, layer: Layer) -> Layer:
        """Rename `tmp` to its digest's name, or drop it when that content is already stored."""
        target = self.blob_path(layer.digest)
        if target.exists():
            tmp.unlink()
        else:
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        return layer

    def temp_blob_path(self) -> Path:
        """A fresh path inside `blobs/` for a blob being written (same filesystem: the rename is atomic)."""
        self.blobs.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="sha256-", suffix=".partial", dir=self.blobs)
        os.close(fd)
        return Path(tmp)

    def add_file(self, path: str | os.PathLike[str], media_type: str, name: str = "") -> Layer:
        with open(path, "rb") as f:
            return self.add_blob(_chunks(f), media_type, name)

    def add_bytes(self, data: bytes, media_type: str, name: str = "") -> Layer:
        return self.add_blob([data], media_type, name)

    # manifests

    def write_manifest(self, name: ModelName | str, manifest: Manifest) -> Path:
        """Write the manifest last: it must only ever point at blobs that are already there."""
        for layer in (manifest.config, *manifest.layers):
            blob = self.blob_path(layer.digest)
            if not blob.is_file() or blob.stat().st_size != layer.size:
                raise WeightkitError(f"manifest would name blob {layer.digest} ({layer.size} bytes), not in the store")
        path = self.manifest_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as f:
            f.write(manifest.to_bytes())
        return path

    def manifest(self, name: ModelName | str) -> Manifest:
        path = self.manifest_path(name)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ModelNotFound(f"model {name} is not in the store at {self.root}") from None
        return parse_manifest(path, data)

    def models(self) -> Iterator[tuple[ModelName, Path]]:
        """Every model with a well-formed name in the store, sorted."""
        if not self.manifests.is_dir():
            return
        found = []
        for path in self.manifests.glob("*/*/*/*"):
            name = name_from_parts(path.relative_to(self.manifests).parts)
            if name is not None and path.is_file():
                found.append((name, path))
        yield from sorted(found, key=lambda item: str(item[0]))

    def remove(self, name: ModelName | str) -> list[str]:
        """Delete the manifest, then every blob no other manifest uses; returns the digests removed."""
        manifest = self.manifest(name)
        self.manifest_path(name).unlink()
        in_use = set()
        for _, path in self.models():
            with contextlib.suppress(FormatError):
                m = parse_manifest(path, path.read_bytes())
                in_use.update(layer.digest for layer in (m.config, *m.layers))
        removed = []
        for layer in (manifest.config, *manifest.layers):
            if layer.digest not in in_use and layer.digest not in removed:
                with contextlib.suppress(FileNotFoundError):
                    self.blob_path(layer.digest).unlink()
                    removed.append(layer.digest)
        _prune_empty(self.manifest_path(name).parent, self.manifests)
        return removed

    def verify(self, name: ModelName | str) -> list[tuple[Layer, str]]:
        """Re-hash every blob of a model: (layer, problem) for each one missing, resized or changed."""
        problems = []
        manifest = self.manifest(name)
        for layer in (manifest.config, *manifest.layers):
            path = self.blob_path(layer.digest)
            if not path.is_file():
                problems.append((layer, "missing"))
                continue
            digest, size = hashlib.sha256(), 0
            with open(path, "rb") as f:
                for chunk in _chunks(f):
                    digest.update(chunk)
                    size += len(chunk)
            if size != layer.size:
                problems.append((layer, f"size {size}, manifest says {layer.size}"))
            elif "sha256:" + digest.hexdigest() != layer.digest:
                problems.append((layer, "content does not match its digest"))
        return problems


def _chunks(f: BinaryIO) -> Iterator[bytes]:
    while chunk := f.read(_COPY_CHUNK):
        yield chunk


def _prune_empty(folder: Path, stop: Path) -> None:
    """Remove folders left empty by a removed manifest, up to (not including) `stop`."""
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
