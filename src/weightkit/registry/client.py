"""One repository on one registry: the requests of Ollama's registry protocol, which is OCI distribution v2.

Requests go through `weightkit.net.http`, which follows redirects by hand: the registry's Authorization
(held there for the registry's origin: scheme, host and port) never goes to the storage a blob GET redirects
to. A registry that serves blobs itself (200, docker-registry's filesystem storage) works the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import quote, urljoin

from ..errors import DigestMismatch, RegistryAuthError, RegistryConnectionError, RegistryError
from ..net.http import Body, ExchangeFailed, FileRegion, HttpClient, Response, describe, origin, server_message
from ..net.retry import Backoff, retry_after, retrying, transient_status
from ..ollama.store import MANIFEST_MEDIA_TYPE
from .auth import Authenticator
from .options import RegistryOptions
from .reference import Reference

T = TypeVar("T")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
# docker schema2 first: docker-registry 2.8.2 answers 400 to a GET of an Ollama manifest without it.
MANIFEST_ACCEPT = f"{MANIFEST_MEDIA_TYPE}, {OCI_MANIFEST}"
_INDEXES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
MANIFEST_LIMIT = 32 << 20  # an Ollama manifest of tensor blobs runs to hundreds of KB; registries take 4 MB+
_MAX_CHALLENGES = 4  # a token, a wider one for another scope, and a renewal of an expired one


class RegistryClient:
    """Requests to `ref`'s repository on its registry, over one HTTP client and one authenticator (both
    thread-safe: a pull's parts share them). Use as a context manager; it closes the HTTP client it made
    (not one it was given: remote reading goes on reading blobs with it)."""

    def __init__(self, ref: Reference, options: RegistryOptions, http: HttpClient | None = None) -> None:
        self.ref = ref
        self.options = options
        self.host = ref.name.host
        self.http = http or HttpClient(timeout=options.timeout, user_agent=options.user_agent)
        self._owned = http is None
        self._origin = origin(ref.origin)
        self._auth = Authenticator(ref.origin, self.http, options)

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._owned:
            self.http.close()

    # the protocol

    def manifest(self) -> bytes:
        """The manifest's bytes as the registry sent them, checked against its Docker-Content-Digest."""
        what = f"pull manifest {self.ref.repository}:{self.ref.name.tag}"

        url, missing = self.ref.url(f"manifests/{self.ref.name.tag}"), f"{self.ref} is not on {self.host}"

        def fetch() -> tuple[bytes, str, str | None]:
            with self.call("GET", url, what, headers={"Accept": MANIFEST_ACCEPT}, missing=missing) as r:
                return r.read(MANIFEST_LIMIT), r.header("Content-Type") or "", r.header("Docker-Content-Digest")

        data, media_type, digest = self.retrying(fetch)
        if media_type.split(";")[0].strip() in _INDEXES:
            raise RegistryError(f"{self.ref} is an image index (several platforms), not an Ollama model")
        if digest and digest.startswith("sha256:") and digest != "sha256:" + hashlib.sha256(data).hexdigest():
            raise DigestMismatch(f"{what}: the manifest does not hash to the Docker-Content-Digest {self.host} sent")
        return data

    def has_blob(self, digest: str) -> bool:
        """Whether the repository has the blob (a redirect to storage counts as yes)."""
        what = f"check blob {digest} in {self.ref.repository}"
        with self.call("HEAD", self._blob_url(digest), what, ok=(200, 307, 302, 404), follow=False) as response:
            return response.status != 404

    def open_blob(self, digest: str, start: int, end: int) -> Response:
        """One GET of bytes `start` to `end` (inclusive) of a blob, redirects followed: a 206, or a 200 with
        the whole blob from a server that ignores Range. Not retried: the caller resumes where it got to."""
        response = self.send("GET", self._blob_url(digest), {"Range": f"bytes={start}-{end}"})
        if response.status in (200, 206):
            return response
        if response.status == 416:
            response.error_body()
            raise RegistryError(f"{self.host}: blob {digest} is shorter than its manifest says (416 at byte {start})")
        raise self.failure(response, f"download blob {digest}")

    def start_upload(self, digest: str, mount_from: str | None) -> str | None:
        """An upload session's URL, or None when the blob was mounted from repository `mount_from` instead."""
        url = self.ref.url("blobs/uploads/")
        if mount_from:
            url += f"?mount={quote(digest)}&from={quote(mount_from)}"
        with self.call("POST", url, f"start upload of {digest}", ok=(201, 202)) as response:
            if response.status == 201:
                return None
            return self._location(response)

    def upload_chunk(self, location: str, region: FileRegion) -> str:
        """PATCH the next chunk to the session; returns the session's new URL (each PATCH makes a new one, and
        an old one is refused). Not retried: after a failure `upload_offset` says where to go on."""
        end = region.offset + region.length - 1
        headers = {"Content-Type": "application/octet-stream", "Content-Range": f"{region.offset}-{end}"}
        response = self.send("PATCH", location, headers, region)
        with response:
            if response.status != 202:
                raise self.failure(response, f"upload to {self.ref.repository}")
            return self._location(response)

    def upload_offset(self, location: str) -> tuple[int, str]:
        """How many bytes the session holds, and its current URL (after a PATCH that failed midway)."""
        with self.call("GET", location, f"upload status in {self.ref.repository}", ok=(204,)) as response:
            held = response.header("Range") or "0-0"
            last = held.rpartition("-")[2]
            return (int(last) + 1 if last.isdigit() and held != "0-0" else 0), self._location(response)

    def finish_upload(self, location: str, digest: str) -> None:
        """Close the session with the blob's digest, which the registry checks against what it received."""
        url = location + ("&" if "?" in location else "?") + f"digest={quote(digest)}"
        what = f"finish upload of {digest}"
        headers = {"Content-Type": "application/octet-stream"}
        self.call("PUT", url, what, ok=(200, 201, 204), headers=headers, body=b"").close()

    def put_manifest(self, data: bytes, media_type: str) -> None:
        """Tag the manifest: sent as its bytes are, so the registry's digest of it is their sha256."""
        what = f"push manifest {self.ref.repository}:{self.ref.name.tag}"
        headers = {"Content-Type": media_type}
        with self.call("PUT", self.ref.url(f"manifests/{self.ref.name.tag}"), what, ok=(200, 201), headers=headers,
                       body=data) as response:  # fmt: skip
            digest = response.header("Docker-Content-Digest")
        if digest and digest.startswith("sha256:") and digest != "sha256:" + hashlib.sha256(data).hexdigest():
            raise DigestMismatch(f"{what}: {self.host} stored the manifest under another digest ({digest})")

    # requests

    def backoff(self) -> Backoff:
        """Tries of one transfer, by the options' retry policy; giving up raises RegistryConnectionError."""
        return Backoff(self.options, RegistryConnectionError)

    def retrying(self, action: Callable[[], T]) -> T:
        """`action()`, tried again by the options' retry policy while it raises a transient ExchangeFailed."""
        return retrying(action, self.options, RegistryConnectionError)

    def call(self, method: str, url: str, what: str, *, ok: tuple[int, ...] = (200,), headers: dict | None = None,
             body: Body = None, follow: bool = True, missing: str | None = None) -> Response:  # fmt: skip
        """`send`, tried again after a dropped connection or a 5xx; a status not in `ok` raises (a 404 as
        `missing` says, when given)."""

        def attempt() -> Response:
            response = self.send(method, url, headers or {}, body, follow=follow)
            if response.status in ok:
                return response
            if response.status == 404 and missing:
                detail = server_message(response, response.error_body())
                raise RegistryError(f"{missing} (404 {detail})")
            raise self.failure(response, what)

        return self.retrying(attempt)

    def send(
        self, method: str, url: str, headers: dict[str, str], body: Body = None, *, follow: bool = True
    ) -> Response:
        """One request, any status back: the registry's Authorization on hops to its origin only, redirects
        followed when `follow`, a 401 from the registry answered (Basic or a token) and the request sent again."""
        for _ in range(_MAX_CHALLENGES):
            generation = self._auth.generation
            response = self.http.request(method, url, headers, body, follow=follow)
            if response.status != 401 or origin(response.url) != self._origin:
                return response
            challenge = response.header("WWW-Authenticate")
            response.error_body()
            self._auth.challenge(challenge, generation)
        raise RegistryAuthError(f"{self.host} kept refusing the credentials it asked for")

    def failure(self, response: Response, what: str) -> Exception:
        """The error an unexpected answer makes: transient (ExchangeFailed) for a 5xx, 408, 429, or a 401 or 403
        from storage a redirect led to (a signed URL expired: the next try asks the registry for a new one)."""
        status = response.status
        storage = origin(response.url) != self._origin
        content_type = response.header("Content-Type") or ""
        text = f"{describe(response.url) if storage else self.host}: {what}: {status} "
        text += server_message(response, response.error_body()) or (response.raw.reason or "")
        if transient_status(status) or (storage and status in (401, 403)):
            return ExchangeFailed(text, transient=True, retry_after=retry_after(response))
        if status == 401:
            return RegistryAuthError(text)
        if status == 404 and content_type.startswith("text/plain"):
            return RegistryError(f"{text} (is {self.ref.repository!r} a repository name this registry accepts?)")
        return RegistryError(text)

    def _blob_url(self, digest: str) -> str:
        return self.ref.url(f"blobs/{digest}")

    def _location(self, response: Response) -> str:
        location = response.header("Docker-Upload-Location") or response.header("Location")
        if not location:
            raise RegistryError(f"{self.host}: {response.status} without the Location of the upload session")
        return urljoin(response.url, location)
