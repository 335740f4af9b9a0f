"""Ollama's model store: content-addressed blobs and the manifests that name them.

Layout (as Ollama's manifest/ package): `$OLLAMA_MODELS` or `~/.ollama/models`, holding
`blobs/sha256-<64 hex>` and `manifests/<host>/<namespace>/<model>/<tag>` (schemaVersion 2 JSON); weightkit
adds `.weightkit/` for its locks and the resumable partial downloads of `weightkit pull` (see `Store`).

Nothing is lost: a `Transaction` streams each new blob to a temp file in `blobs/`, hashed on the way and
fsynced; its commit renames them to their digests (kept if the same content is already there), then writes
the manifest atomically. A crash leaves temp files and no manifest; `Store.prune` (and the next `create` or
`rm`) removes them once their writer is gone, and never while it runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

try:
    import fcntl
except ImportError:  # Windows: no flock; see Store for what that leaves out
    fcntl = None  # type: ignore[assignment]

from .._io import _fsync_dir, atomic_write
from ..errors import FormatError, ModelNotFound, UnsupportedError, WeightkitError
from .names import ModelName, name_from_parts, parse_name

MANIFEST_MEDIA_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_MEDIA_TYPE = "application/vnd.docker.container.image.v1+json"
MEDIA = "application/vnd.ollama.image."
MEDIA_TYPES = {k: MEDIA + k for k in (
    "tensor", "model", "json", "template", "system", "params", "license", "projector", "adapter", "messages", "draft",
)}  # fmt: skip
_DIGEST = re.compile(r"^sha256[:-][0-9a-fA-F]{64}$")
_BLOB = re.compile(r"^sha256-[0-9a-fA-F]{64}$")
# A transaction's temp file, `sha256-<writer id>-<n>.partial`, or atomic_write's temp beside one; also the
# `sha256-<random>.partial` of weightkit before transactions, which no writer can still hold.
_TEMP = re.compile(r"^\.?sha256-(?:(?P<writer>[0-9a-f]{16})-\d+|[a-z0-9_]{8})\.partial(?:\.[a-z0-9_]{8}\.tmp)?$")
_WRITER_LOCK = re.compile(r"^writer-(?P<writer>[0-9a-f]{16})\.lock$")
_MANIFEST_TEMP = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")  # atomic_write's, only ever written under the store lock
# A partial download's files in `.weightkit/downloads/`: its lock, its data and its state (and their temp files).
_DOWNLOAD = re.compile(r"^(?P<blob>sha256-[0-9a-f]{64})\.(?:lock|data|json(?:\.tmp)?)$")
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


def _layer(path: str | os.PathLike[str], raw: Any, where: str) -> Layer:
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


def parse_manifest(path: str | os.PathLike[str], data: bytes) -> Manifest:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise FormatError(path, 0, f"not a JSON manifest: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("layers"), list):
        raise FormatError(path, 0, "a manifest is an object with a 'layers' list")
    config = _layer(path, doc.get("config"), "config")
    layers = [_layer(path, raw, f"layer {i}") for i, raw in enumerate(doc["layers"])]
    return Manifest(config, layers, doc.get("schemaVersion", 2), doc.get("mediaType", MANIFEST_MEDIA_TYPE))


@dataclass(frozen=True)
class Removed:
    """A file `Store.prune` removed (or would remove, on a dry run)."""

    path: Path
    kind: str  # "blob": no manifest names it; "temp": its writer is gone; "partial": a dead pull's download
    size: int  # the bytes its removal frees: 0 for a second name of a file that stays


@dataclass
class PruneReport:
    """What `Store.prune` removed, what it kept for running writers, and what stopped it removing blobs."""

    removed: list[Removed]
    in_use: list[Path]  # temp files of writers and partial downloads of pulls still running: kept
    unreadable: list[Path]  # manifests that could not be read: no blob was removed, any could be theirs
    dry_run: bool = False

    @property
    def bytes_freed(self) -> int:
        return sum(r.size for r in self.removed)


class Store:
    """One Ollama model store on disk.

    Three kinds of lock keep `prune` (and `remove`) from taking what a writer needs. All are flocks on files
    in `.weightkit/`, which the kernel releases when their holder dies, so a crash never leaves one held.

    - The store lock, `.weightkit/store.lock`, exclusive and held only for short steps: a transaction
      registering, a transaction's commit (renaming its temp files to their digests, then writing its
      manifest), `remove` and `prune`. Placing blobs and writing the manifest that names them are one step
      under it, so no one else ever sees a placed blob whose manifest is not yet written.
    - A writer lock, `.weightkit/writer-<id>.lock`, held by each `Transaction` for its whole life; its temp
      files are `blobs/sha256-<id>-<n>.partial`. A temp file is removed (by `prune`, and by the next
      transaction or `remove`) only when the writer named in it does not hold its lock. Writers register
      under the store lock, which the sweep holds, so the sweep sees every live writer.
    - A download lock, `.weightkit/downloads/sha256-<hex>.lock`, held by whoever downloads that blob (see
      `download_slot`), for as long as the blob's partial download (`.data`, `.json` beside it) is in use;
      `prune` removes a partial download only when its lock is free. Transactions never sweep them: a dead
      pull's partial download is what the next pull resumes.

    Content a transaction adds that is already stored is hard-linked to one of its temp names (where the
    filesystem allows; else the copy is kept), so removing the stored blob before the commit takes nothing
    from it (`Transaction.pin` does the same for a stored blob a new manifest will name). Readers take no
    lock: manifests change by atomic rename and blobs never change.

    Without fcntl (Windows) there are no locks: `prune` raises UnsupportedError, `remove` and transactions
    leave temp files alone, and writers are guarded only by the atomic renames. Ollama takes none of these
    locks: prune only while Ollama is not pulling or creating, as its blobs wait unnamed for their manifest.
    """

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

    # writing

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """A writer of new blobs and the manifest naming them: `with store.transaction() as tx: ...`."""
        with Transaction(self) as tx:
            yield tx

    def copy(self, source: ModelName | str, destination: ModelName | str) -> Path:
        """Give a stored model a second name (as `ollama cp`): the same manifest bytes, so the same model ID."""
        data = self.manifest_bytes(source)
        parse_manifest(self.manifest_path(source), data)  # a broken one is named as the source
        with self._locked():
            return self._write_manifest(destination, data)

    def _write_manifest(self, name: ModelName | str, manifest: Manifest | bytes) -> Path:
        """Under the store lock: the manifest may only ever point at blobs that are already there. Bytes are
        written as they are (a pulled manifest keeps the registry's bytes: Ollama's model ID is their sha256)."""
        path = self.manifest_path(name)
        data = manifest if isinstance(manifest, bytes) else manifest.to_bytes()
        parsed = parse_manifest(path, data) if isinstance(manifest, bytes) else manifest
        for layer in (parsed.config, *parsed.layers):
            blob = self.blob_path(layer.digest)
            if not blob.is_file() or blob.stat().st_size != layer.size:
                raise WeightkitError(f"manifest would name blob {layer.digest} ({layer.size} bytes), not in the store")
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as f:
            f.write(data)
        return path

    # reading

    def manifest(self, name: ModelName | str) -> Manifest:
        return parse_manifest(self.manifest_path(name), self.manifest_bytes(name))

    def manifest_bytes(self, name: ModelName | str) -> bytes:
        """The manifest file's bytes as they are: what `push` sends, and what Ollama's model ID hashes."""
        try:
            return self.manifest_path(name).read_bytes()
        except FileNotFoundError:
            raise ModelNotFound(f"model {name} is not in the store at {self.root}") from None

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

    def verify(self, name: ModelName | str) -> list[tuple[Layer, str]]:
        """Re-hash every blob of a model: (layer, problem) for each one missing, resized or changed."""
        problems = []
        manifest = self.manifest(name)
        for layer in (manifest.config, *manifest.layers):
            path = self.blob_path(layer.digest)
            if not path.is_file():
                problems.append((layer, "missing"))
                continue
            digest, size = _file_digest(path)
            if size != layer.size:
                problems.append((layer, f"size {size}, manifest says {layer.size}"))
            elif digest != layer.digest:
                problems.append((layer, "content does not match its digest"))
        return problems

    # removing

    def remove(self, name: ModelName | str) -> list[str]:
        """Delete the manifest, then every blob no other manifest names (none while a manifest cannot be read:
        it could name any) and the temp files of writers that are gone; returns the digests removed."""
        self.manifest(name)  # ModelNotFound before anything is locked (or created)
        path = self.manifest_path(name)
        removed: list[str] = []
        with self._locked():
            manifest = self.manifest(name)
            path.unlink()
            referenced, unreadable = self._referenced()
            layers = [] if unreadable else [manifest.config, *manifest.layers]
            for layer in layers:
                blob = self.blob_path(layer.digest)
                if blob.name not in referenced and layer.digest not in removed:
                    with contextlib.suppress(FileNotFoundError):
                        blob.unlink()
                        removed.append(layer.digest)
            _prune_empty(path.parent, self.manifests)
            self._sweep()
        return removed

    def prune(self, *, dry_run: bool = False) -> PruneReport:
        """Remove the blobs no manifest names and the temp files whose writer is gone, as Ollama prunes at
        start; never a running writer's file, and no blob while some manifest cannot be read (temp files still
        go). `dry_run` lists what would go and removes nothing."""
        if fcntl is None:
            raise UnsupportedError(
                "prune needs flock (fcntl) to tell a running import's temp files from a dead one's, and this "
                "platform has none; remove blobs/*.partial by hand while no import runs"
            )
        if not (self.blobs.is_dir() or self.manifests.is_dir() or self.downloads.is_dir()):
            return PruneReport([], [], [], dry_run)
        with self._locked():
            temps, in_use = self._dead_temps(dry_run)
            partials, downloading = self._dead_downloads(dry_run)
            referenced, unreadable = self._referenced()
            blobs = [] if unreadable else [p for p in _files(self.blobs) if _BLOB.match(p.name)]
            removed = temps + partials + _removals([p for p in blobs if p.name not in referenced], "blob")
            if not dry_run:
                _unlink(removed)
        return PruneReport(removed, in_use + downloading, unreadable, dry_run)

    # locks (see the class docstring)

    @property
    def _locks(self) -> Path:
        return self.root / ".weightkit"

    def _writer_lock(self, writer: str) -> Path:
        return self._locks / f"writer-{writer}.lock"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the store lock, waiting for it. Never nested: each hold opens the file anew, and flock makes
        two open files exclude each other even in one process."""
        if fcntl is None:
            yield
            return
        self._locks.mkdir(exist_ok=True)
        fd = os.open(self._locks / "store.lock", os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _register(self, writer: str) -> int | None:
        """Under the store lock: create and hold `writer`'s lock, for as long as the returned fd is open."""
        if fcntl is None:
            return None
        fd = os.open(self._writer_lock(writer), os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
        return fd

    def _live_writers(self, dry_run: bool) -> set[str]:
        """Under the store lock: the writers still holding their lock (trying it without waiting tells a dead
        writer's, which is free, from a live one's). A dead one's lock file is removed, not on a dry run."""
        live = set()
        for path in _files(self._locks):
            match = _WRITER_LOCK.match(path.name)
            if match is None:
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:  # its writer has just finished
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                live.add(match["writer"])
            else:
                if not dry_run:
                    path.unlink(missing_ok=True)
            finally:
                os.close(fd)
        return live

    def _dead_temps(self, dry_run: bool) -> tuple[list[Removed], list[Path]]:
        """Under the store lock: the temp files whose writer is gone, and those of live writers (kept). The
        store lock also covers every manifest write, so atomic_write's temp files in `manifests/` are dead."""
        live = self._live_writers(dry_run)
        dead, in_use = [], []
        for path in _files(self.blobs):
            match = _TEMP.match(path.name)
            if match is not None:
                (in_use if match["writer"] in live else dead).append(path)
        for folder, _, names in os.walk(self.manifests):
            dead += sorted(Path(folder, n) for n in names if _MANIFEST_TEMP.match(n))
        return _removals(dead, "temp"), in_use

    @property
    def downloads(self) -> Path:
        """Where partial downloads wait to be resumed: inside `.weightkit/`, as Ollama removes any file in
        `blobs/` that is not named by a digest."""
        return self._locks / "downloads"

    @contextlib.contextmanager
    def download_slot(self, digest: str, *, wait: bool = True) -> Iterator[Path | None]:
        """Hold the download lock of blob `digest` (waiting for it, or yielding None at once if someone else
        holds it and not `wait`): yields the path that the partial download's files are named after
        (`<path>.data`, `<path>.json`), which nobody else touches, nor `prune` removes, while it is held."""
        prefix = self.downloads / check_digest(digest).replace(":", "-")
        prefix.parent.mkdir(parents=True, exist_ok=True)
        if fcntl is None:
            yield prefix
            return
        lock = prefix.with_name(prefix.name + ".lock")
        fd = _lock_file(lock, wait)
        try:
            yield None if fd is None else prefix
        finally:
            if fd is not None:
                if not any(prefix.with_name(prefix.name + end).exists() for end in (".data", ".json")):
                    lock.unlink(missing_ok=True)  # nothing left to resume (a waiter sees it gone and retries)
                os.close(fd)

    def _dead_downloads(self, dry_run: bool) -> tuple[list[Removed], list[Path]]:
        """Under the store lock: the partial downloads no pull holds (their lock taken without waiting, and,
        unless a dry run, removed with them while held, so no pull can take a lock on a removed file), and
        those of live pulls (kept)."""
        groups: dict[str, list[Path]] = {}
        for path in _files(self.downloads):
            if match := _DOWNLOAD.match(path.name):
                groups.setdefault(match["blob"], []).append(path)
        dead, in_use = [], []
        for blob, paths in groups.items():
            lock = self.downloads / f"{blob}.lock"
            fd = _lock_file(lock, wait=False)
            if fd is None:
                in_use += [p for p in paths if p != lock]
                continue
            try:
                found = _removals([p for p in paths if p != lock], "partial")
                dead += found
                if not dry_run:
                    _unlink(found)
                    lock.unlink(missing_ok=True)
            finally:
                os.close(fd)
        return dead, in_use

    def _referenced(self) -> tuple[set[str], list[Path]]:
        """The file names of the blobs any manifest names (whatever its path), and the manifests unreadable."""
        referenced: set[str] = set()
        unreadable = []
        for folder, _, names in os.walk(self.manifests):
            for path in sorted(Path(folder, n) for n in names if not _MANIFEST_TEMP.match(n)):
                try:
                    manifest = parse_manifest(path, path.read_bytes())
                except (OSError, FormatError):
                    unreadable.append(path)
                    continue
                referenced.update(self.blob_path(layer.digest).name for layer in (manifest.config, *manifest.layers))
        return referenced, unreadable

    def _sweep(self) -> None:
        """Under the store lock: remove the temp files of writers that are gone (none without flock)."""
        if fcntl is not None:
            _unlink(self._dead_temps(dry_run=False)[0])


class Transaction:
    """New blobs and the manifest that names them, made visible together by `write_manifest`.

    `with store.transaction() as tx:` registers a writer (sweeping the temp files of dead ones first); each
    blob goes to a temp file named after it; leaving the block removes whatever was not committed, and a crash
    leaves it to the next sweep (see `Store`).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.id = secrets.token_hex(8)
        self._names = itertools.count()
        self._temps: list[Path] = []  # every temp name handed out
        self._pending: dict[str, Path] = {}  # digest -> the temp file that holds it until the commit
        self._lock: int | None = None

    def __enter__(self) -> Transaction:
        self.store.blobs.mkdir(parents=True, exist_ok=True)
        with self.store._locked():
            self.store._sweep()
            self._lock = self.store._register(self.id)
        return self

    def __exit__(self, *exc: object) -> None:
        for path in self._temps:
            path.unlink(missing_ok=True)
        if self._lock is not None:
            self.store._writer_lock(self.id).unlink(missing_ok=True)
            os.close(self._lock)
            self._lock = None

    def temp_path(self) -> Path:
        """A new name in `blobs/` for a file this transaction writes itself (then `adopt`s)."""
        path = self.store.blobs / f"sha256-{self.id}-{next(self._names)}.partial"
        self._temps.append(path)
        return path

    def add_blob(self, chunks: Iterable[bytes | memoryview], media_type: str, name: str = "") -> Layer:
        """Stream `chunks` into a blob, hashing on the way; returns its layer. Same content: stored once."""
        tmp = self.temp_path()
        digest, size = hashlib.sha256(), 0
        with open(tmp, "xb") as f:
            for chunk in chunks:
                f.write(chunk)
                digest.update(chunk)
                size += len(memoryview(chunk).cast("B"))
            f.flush()
            os.fsync(f.fileno())
        return self._keep(tmp, Layer(media_type, "sha256:" + digest.hexdigest(), size, name))

    def add_file(self, path: str | os.PathLike[str], media_type: str, name: str = "") -> Layer:
        with open(path, "rb") as f:
            return self.add_blob(_chunks(f), media_type, name)

    def add_bytes(self, data: bytes, media_type: str, name: str = "") -> Layer:
        return self.add_blob([data], media_type, name)

    def adopt(self, tmp: Path, media_type: str, name: str = "", *, digest: str | None = None) -> Layer:
        """Take a finished, synced file written at a `temp_path()` as a blob. `digest`: its sha256, when the
        writer hashed the bytes as it wrote them (else the file is read and hashed here)."""
        if digest is None:
            digest, size = _file_digest(tmp)
        else:
            digest, size = check_digest(digest), tmp.stat().st_size
        return self._keep(tmp, Layer(media_type, digest, size, name))

    def blob_path(self, digest: str) -> Path:
        """Where blob `digest` can be read now: the file holding it for the commit, else the store's."""
        return self._pending.get(digest) or self.store.blob_path(digest)

    def pin(self, layer: Layer) -> bool:
        """Whether the blob `layer` names is stored (with its size; another size raises); if so it is held
        for the commit as a hard link, so a `prune` or `rm` meanwhile cannot take it from the manifest."""
        target = self.store.blob_path(layer.digest)
        try:
            size = target.stat().st_size
        except FileNotFoundError:
            return False
        if size != layer.size:
            raise WeightkitError(
                f"stored blob {layer.digest} has {size} bytes, the manifest says {layer.size}: the store is damaged "
                "(see weightkit verify)"
            )
        if layer.digest not in self._pending:
            self._link_stored(layer.digest)  # no link (removed meanwhile, no hard links): the commit checks
        return True

    def _link_stored(self, digest: str) -> bool:
        """Hold the stored blob `digest` under a temp name of ours (a hard link); False where that fails."""
        link = self.temp_path()
        try:
            os.link(self.store.blob_path(digest), link)
        except OSError:  # removed meanwhile, or no hard links on this filesystem
            return False
        self._pending[digest] = link
        return True

    def _keep(self, tmp: Path, layer: Layer) -> Layer:
        """Hold `tmp` for the commit; content already stored is held as a hard link to it instead."""
        if layer.digest in self._pending or (
            self.store.blob_path(layer.digest).exists() and self._link_stored(layer.digest)
        ):
            tmp.unlink()
            return layer
        os.chmod(tmp, 0o644)
        self._pending[layer.digest] = tmp
        return layer

    def write_manifest(self, name: ModelName | str, manifest: Manifest | bytes) -> Path:
        """Commit: move each new blob into place by its digest (or drop it, stored already), then write the
        manifest last and atomically, all under the store lock; it may only name blobs then in the store.
        Bytes are written as given (a pulled manifest: Ollama's model ID is their sha256)."""
        with self.store._locked():
            for digest, tmp in self._pending.items():
                target = self.store.blob_path(digest)
                if target.exists():
                    tmp.unlink()
                else:
                    os.replace(tmp, target)
            self._pending.clear()
            _fsync_dir(self.store.blobs)  # the blobs are there before any manifest names them
            return self.store._write_manifest(name, manifest)


def _lock_file(path: Path, wait: bool) -> int | None:
    """An fd holding an flock on `path` (created if need be), or None if another holds it and not `wait`.
    A lock won on a file that was removed meanwhile (by a prune, which removes a lock file only while holding
    it) is not the file's lock: try the new file."""
    while True:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _chunks(f: BinaryIO) -> Iterator[bytes]:
    while chunk := f.read(_COPY_CHUNK):
        yield chunk


def _file_digest(path: Path) -> tuple[str, int]:
    """`sha256:<hex>` and size of a file's content."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for chunk in _chunks(f):
            digest.update(chunk)
            size += len(chunk)
    return "sha256:" + digest.hexdigest(), size


def _files(folder: Path) -> list[Path]:
    """The regular files directly in `folder` (none if it does not exist), sorted."""
    try:
        with os.scandir(folder) as entries:
            return sorted(Path(e.path) for e in entries if e.is_file())
    except FileNotFoundError:
        return []


def _removals(paths: list[Path], kind: str) -> list[Removed]:
    """What removing each file frees: its size, unless another name keeps its data (a transaction's link)."""
    removed = []
    for path in paths:
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        removed.append(Removed(path, kind, st.st_size if st.st_nlink <= 1 else 0))
    return removed


def _unlink(removed: list[Removed]) -> None:
    for r in removed:
        r.path.unlink(missing_ok=True)


def _prune_empty(folder: Path, stop: Path) -> None:
    """Remove folders left empty by a removed manifest, up to (not including) `stop`."""
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
