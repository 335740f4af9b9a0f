"""Downloading blobs: each in ranged parts on parallel connections, resumable across runs.

A blob downloads into `<store>/.weightkit/downloads/sha256-<hex>.data` (the store's download slot, held
meanwhile), with how far each part got in `.json` beside it, so a run that is killed or loses its network
goes on from there the next time. Nothing here is trusted: the file is hashed as its bytes arrive (a thread
follows the run of bytes done from the start), and the caller compares that digest with the blob's before the
store takes it. Another thread starts the disk writes of each part as it comes, so that the fsync the store
wants before it takes the blob finds little left to write. A Range is never asked past the blob's size
(docker-registry's 416 lies about its length).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import RegistryError
from ..net.http import ExchangeFailed, Response
from ..ollama.store import Layer
from .client import RegistryClient
from .follow import STEP, PrefixHasher, Writeback
from .options import RegistryOptions
from .progress import ByteProgress
from .workers import drain

_BUFFER = 1 << 20
_SAVE_EVERY = 0.25  # seconds between writes of a download's progress
_MIN_PART = 16 << 20


@dataclass
class Part:
    """Bytes `start` to `end` (exclusive) of a blob, of which the first `done` are on disk."""

    start: int
    end: int
    done: int = 0

    @property
    def left(self) -> int:
        return self.end - self.start - self.done


def _part_size(size: int, options: RegistryOptions) -> int:
    """Parts of at most `options.part_size`, small enough that each connection gets about four of the blob (the
    parts go out in order, so the hash, which follows the bytes from the start, keeps close behind the
    download), and not under 16 MiB (each costs a request)."""
    return max(min(-(-size // (4 * options.connections)), options.part_size), min(_MIN_PART, options.part_size))


class PartialDownload:
    """One blob's download file and its parts' progress, going on from an earlier run's where it is sound;
    `digest` once `finish` has hashed the last of it."""

    def __init__(self, prefix: Path, layer: Layer, options: RegistryOptions) -> None:
        self.layer = layer
        self.data = prefix.with_name(prefix.name + ".data")
        self.state = prefix.with_name(prefix.name + ".json")
        self.digest = ""
        self._lock = threading.Lock()
        self._saved = 0.0
        parts = self._load()
        self._fd = os.open(self.data, os.O_RDWR | os.O_CREAT, 0o644)
        if parts is None:
            os.ftruncate(self._fd, 0)
            os.ftruncate(self._fd, layer.size)  # sparse: the parts fill it in any order
            step = _part_size(layer.size, options)
            parts = [Part(s, min(s + step, layer.size)) for s in range(0, layer.size, step)]
        self.parts = parts
        self.resumed = sum(p.done for p in parts)  # bytes an earlier run got
        self._hasher = PrefixHasher(self._fd, self.data, self._done_from_start)  # an earlier run's bytes first
        self._writeback = Writeback(self._fd, lambda: [(p.start, p.start + p.done, p.end) for p in self.parts])

    @property
    def complete(self) -> bool:
        return all(p.left == 0 for p in self.parts)

    def write(self, part: Part, data: memoryview) -> None:
        at = part.start + part.done
        os.pwrite(self._fd, data, at)
        part.done += len(data)
        if (at + len(data)) // STEP != at // STEP or not part.left:
            self._hasher.advanced()
            self._writeback.advanced()
        if time.monotonic() - self._saved > _SAVE_EVERY:
            self.save()

    def _done_from_start(self) -> int:
        """How many bytes from the start are all written."""
        for part in self.parts:
            if part.left:
                return part.start + part.done
        return self.layer.size

    def save(self) -> None:
        """Record the parts' progress (no fsync: it must outlive the process, which the page cache does; after
        a power cut a claim beyond what reached the disk fails the digest check, and the blob downloads anew)."""
        with self._lock:
            self._saved = time.monotonic()
            doc = {"digest": self.layer.digest, "size": self.layer.size,
                   "parts": [[p.start, p.end, p.done] for p in self.parts]}  # fmt: skip
            tmp = self.state.with_name(self.state.name + ".tmp")
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, self.state)

    def finish(self) -> Path:
        """The complete file, hashed (`digest`) and synced (as the store wants what it adopts)."""
        self.save()
        self.digest = self._hasher.digest()
        self._writeback.stop()
        os.fsync(self._fd)
        self.close()
        return self.data

    def close(self) -> None:
        self._hasher.stop()
        self._writeback.stop()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def discard(self) -> None:
        """Remove the download: its bytes were wrong, the next run starts afresh."""
        self.close()
        for path in (self.data, self.state):
            path.unlink(missing_ok=True)

    def _load(self) -> list[Part] | None:
        """The parts an earlier run recorded, if they describe this blob and its file is all there."""
        try:
            doc = json.loads(self.state.read_text())
            if doc["digest"] != self.layer.digest or doc["size"] != self.layer.size:
                return None
            parts = [Part(int(s), int(e), int(d)) for s, e, d in doc["parts"]]
            if self.data.stat().st_size != self.layer.size:
                return None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        edges = [0] + [p.end for p in parts]
        sound = all(p.start == edge and p.start < p.end and 0 <= p.done <= p.end - p.start
                    for p, edge in zip(parts, edges, strict=False))  # fmt: skip
        return parts if sound and edges[-1] == self.layer.size else None


class Downloader:
    """Every part of several downloads on `connections` threads of one client. The first failure (after its
    retries) stops the others, each with its progress saved, and is raised."""

    def __init__(self, client: RegistryClient, progress: ByteProgress) -> None:
        self._client = client
        self._progress = progress
        self._stop = threading.Event()
        self._buffers = threading.local()

    def _buffer(self) -> memoryview:
        """This thread's read buffer."""
        if not hasattr(self._buffers, "view"):
            self._buffers.view = memoryview(bytearray(_BUFFER))
        return self._buffers.view

    def run(self, downloads: list[PartialDownload], on_complete: Callable[[PartialDownload], None]) -> None:
        """Download what is left of each, calling `on_complete(download)` (in a worker thread) as each is done."""
        left = {id(d): sum(1 for p in d.parts if p.left) for d in downloads}
        lock = threading.Lock()

        def fetch(task: tuple[PartialDownload, Part]) -> None:
            download, part = task
            self._fetch(download, part)
            with lock:
                left[id(download)] -= 1
                last = left[id(download)] == 0
            if last and not self._stop.is_set():
                download.finish()
                on_complete(download)

        for download in downloads:
            if not left[id(download)]:  # an earlier run got all of it
                download.finish()
                on_complete(download)
        large_first = sorted(downloads, key=lambda d: -d.layer.size)  # more parts to share out: start them first
        tasks = [(d, p) for d in large_first for p in d.parts if p.left]
        try:
            drain(tasks, fetch, self._client.options.connections, self._stop)
        finally:
            for download in downloads:
                if not download.complete:
                    download.save()

    def _fetch(self, download: PartialDownload, part: Part) -> None:
        """Get what is left of `part`, going on from where each try got to."""
        buffer = self._buffer()
        backoff = self._client.backoff()
        while part.left and not self._stop.is_set():
            before = part.done
            try:
                offset = part.start + part.done
                with self._client.open_blob(download.layer.digest, offset, part.end - 1) as response:
                    self._read(download, part, response, offset, buffer)
            except ExchangeFailed as e:
                if part.done > before:
                    backoff.progressed()
                download.save()
                backoff.failed(e)

    def _read(self, download: PartialDownload, part: Part, response: Response, offset: int, buffer: memoryview) -> None:
        """Copy the response's bytes into the part; a 200 (Range ignored) is read from the blob's start."""
        layer = download.layer
        if response.status == 206:
            skip, sent = 0, _range_length(response, offset, layer)
        else:
            skip, sent = offset, layer.size - offset
            if response.header("Content-Length") not in (None, str(layer.size)):
                raise RegistryError(
                    f"{self._client.host}: blob {layer.digest} is not {layer.size} bytes as its manifest says"
                )
        want = min(part.left, sent)
        while skip or want:
            n = response.readinto(buffer[: min(skip or want, _BUFFER)])
            if n == 0:
                raise ExchangeFailed(
                    f"{self._client.host}: connection closed before the end of the blob", transient=True
                )
            if skip:
                skip -= n
                continue
            if self._stop.is_set():
                return
            download.write(part, buffer[:n])
            self._progress.add(n)
            want -= n


def _range_length(response: Response, offset: int, layer: Layer) -> int:
    """How many bytes a 206 carries, checked to start at `offset` of a blob of the manifest's size."""
    value = response.header("Content-Range") or ""
    try:
        unit, _, rest = value.partition(" ")
        span, _, total = rest.partition("/")
        first, _, last = span.partition("-")
        start, end = int(first), int(last)
        ok = unit == "bytes" and start == offset and end >= start and total in ("*", str(layer.size))
    except ValueError:
        ok = False
    if not ok:
        raise RegistryError(f"blob {layer.digest}: asked for bytes from {offset} of {layer.size}, got {value!r}")
    return end - start + 1
