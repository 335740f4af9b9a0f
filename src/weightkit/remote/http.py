"""HTTP for reading remote models: http.client, redirects followed by hand, credentials kept to their origin.

Kept apart from what it carries (byte ranges in `source`, Hugging Face in `hf`, registries in `registry`) so
a registry client can share it. Not urllib: urllib forwards an Authorization header to wherever a redirect
leads, and an S3-style storage host or CDN must never see a Hugging Face token or registry password.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from .. import __version__
from ..errors import ArgumentError, HTTPStatusError, RemoteError

USER_AGENT = f"weightkit/{__version__}"
TIMEOUT = 60.0  # seconds a connect or a read may wait
MAX_REDIRECTS = 10
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 1 << 20  # a body is read this much at a time, so memory grows only as bytes arrive
_ERROR_BODY = 4096  # at most this much of an error's body is read, for its message

Origin = tuple[str, str, int]


def origin(url: str) -> Origin:
    """(scheme, host, port) of an http(s) URL: credentials belong to one origin."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ArgumentError(f"{describe(url)}: not an http:// or https:// URL")
    if parts.username is not None:
        raise ArgumentError(
            f"{describe(url)}: a user name or password in the URL is not supported "
            "(Hugging Face takes HF_TOKEN, registries WEIGHTKIT_REGISTRY_USER and WEIGHTKIT_REGISTRY_PASSWORD)"
        )
    try:
        port = parts.port
    except ValueError:
        raise ArgumentError(f"{describe(url)}: the port is not a number from 0 to 65535") from None
    return scheme, parts.hostname.lower(), port or (443 if scheme == "https" else 80)


def describe(url: str) -> str:
    """`url` for a message: without user info or query string (signed CDN links carry credentials there)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


@dataclass
class Response:
    """A response whose body is still to be read (`HttpClient.read`, `read_limited`) or let go (`discard`)."""

    url: str  # where it came from, after any redirects
    redirected: bool
    raw: http.client.HTTPResponse

    @property
    def status(self) -> int:
        return self.raw.status

    def header(self, name: str) -> str | None:
        return self.raw.getheader(name)


class HttpClient:
    """GET requests with one kept-alive connection per origin. `bytes_fetched` counts the body bytes
    received, `requests` the requests sent: what reading a remote model cost."""

    def __init__(self, timeout: float = TIMEOUT) -> None:
        self.timeout = timeout
        self.bytes_fetched = 0
        self.requests = 0
        self._credentials: dict[Origin, str] = {}
        self._connections: dict[Origin, http.client.HTTPConnection] = {}

    def authorize(self, url: str, value: str) -> None:
        """Send `Authorization: value` with every request to the origin of `url`, and to no other."""
        self._credentials[origin(url)] = value

    def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        """GET `url`, following redirects (up to MAX_REDIRECTS); the body is left to read."""
        first = url
        for _ in range(MAX_REDIRECTS + 1):
            response = self._send(url, headers or {}, redirected=url != first)
            if response.status not in _REDIRECTS:
                return response
            location = response.header("Location")
            self.discard(response)
            if not location:
                raise RemoteError(f"{describe(url)}: a redirect (HTTP {response.status}) without a Location")
            url = urljoin(url, location)
            if urlsplit(url).scheme.lower() not in ("http", "https"):
                raise RemoteError(f"{describe(first)}: redirected to {describe(url)}, which is not http(s)")
        raise RemoteError(f"{describe(first)}: more than {MAX_REDIRECTS} redirects")

    def read(self, response: Response, length: int, what: str) -> bytearray:
        """Exactly `length` bytes of the body: the server promised them, and fewer is an error."""
        data = self._read_body(response, length, what)
        if len(data) < length:
            raise RemoteError(f"{what}: the server closed the connection after {len(data)} of {length} bytes")
        self._release(response)
        return data

    def read_limited(self, response: Response, limit: int, what: str) -> bytes:
        """The whole body, refused if over `limit` bytes (manifests and such: small by nature)."""
        declared = response.raw.length  # None when the body comes in chunks
        if declared is not None and declared > limit:
            self._close(response)
            raise RemoteError(f"{what}: the server sends {declared} bytes; at most {limit} are expected")
        data = self._read_body(response, limit + 1 if declared is None else declared, what)
        if declared is not None and len(data) < declared:
            raise RemoteError(f"{what}: the server closed the connection after {len(data)} of {declared} bytes")
        if len(data) > limit:
            self._close(response)
            raise RemoteError(f"{what}: the server sends more than the {limit} bytes expected")
        self._release(response)
        return bytes(data)

    def discard(self, response: Response) -> None:
        """Let a response go unread: a short body is drained to keep the connection, anything else closes it."""
        if response.raw.length is not None and response.raw.length <= _ERROR_BODY:
            self._read_body(response, response.raw.length, describe(response.url))
        self._release(response)

    def status_error(self, response: Response, what: str, hint: str = "") -> HTTPStatusError:
        """The error for an unexpected status: the status, where it came from, what the server says, `hint`."""
        detail = ""
        if response.status != 416:  # docker-registry sends 416 with a wrong Content-Length: never read it
            detail = _server_message(response, self._read_body(response, _ERROR_BODY, what))
        self._close(response)
        where = f" from {describe(response.url)}" if response.redirected else ""
        parts = [f"{what}: HTTP {response.status} {response.raw.reason}{where}", detail, hint]
        return HTTPStatusError(": ".join(p for p in parts if p), response.status)

    def close(self) -> None:
        """Close every kept-alive connection (a later request opens a new one)."""
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def _send(self, url: str, headers: dict[str, str], *, redirected: bool) -> Response:
        where = origin(url)
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity", **headers}
        if where in self._credentials:
            headers["Authorization"] = self._credentials[where]
        reused = where in self._connections
        while True:
            connection = self._connections.get(where)
            if connection is None:
                connection = self._connections[where] = self._connect(where)
            try:
                connection.request("GET", target, headers=headers)
                raw = connection.getresponse()
            except (OSError, http.client.HTTPException) as e:
                self._connections.pop(where).close()
                if reused:  # the server closed a kept-alive connection: one fresh try
                    reused = False
                    continue
                raise RemoteError(f"{describe(url)}: {_reason(e, self.timeout)}") from None
            self.requests += 1
            return Response(url, redirected, raw)

    def _connect(self, where: Origin) -> http.client.HTTPConnection:
        scheme, host, port = where
        if scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=self.timeout, context=ssl.create_default_context())
        return http.client.HTTPConnection(host, port, timeout=self.timeout)

    def _read_body(self, response: Response, length: int, what: str) -> bytearray:
        """Up to `length` bytes of the body (fewer if it ends), counted in `bytes_fetched`."""
        data = bytearray()
        try:
            while len(data) < length:
                chunk = response.raw.read(min(_CHUNK, length - len(data)))
                if not chunk:
                    break
                data += chunk
                self.bytes_fetched += len(chunk)
        except (OSError, http.client.HTTPException) as e:
            self._close(response)
            raise RemoteError(f"{what}: reading failed after {len(data)} bytes: {_reason(e, self.timeout)}") from None
        if len(data) < length:
            self._close(response)
        return data

    def _release(self, response: Response) -> None:
        """Keep the connection for the next request if this body was read to its end, else close it."""
        if not response.raw.isclosed():
            self._close(response)

    def _close(self, response: Response) -> None:
        response.raw.close()
        connection = self._connections.pop(origin(response.url), None)
        if connection is not None:
            connection.close()


def _reason(e: BaseException, timeout: float) -> str:
    if isinstance(e, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(e, socket.gaierror):
        return f"cannot resolve the host name ({e.strerror})"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    text = getattr(e, "strerror", None) or str(e)
    return text or type(e).__name__


def _server_message(response: Response, body: bytes) -> str:
    """What an error response says, briefly: Hugging Face's X-Error-Message, a registry's JSON errors, a
    JSON `error`, or the first line of a text body."""
    message = response.header("X-Error-Message") or ""
    if not message:
        try:
            doc = json.loads(body.decode("utf-8"))
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("errors"), list) and doc["errors"]:
            first = doc["errors"][0]
            message = str(first.get("message") or first.get("code") or "") if isinstance(first, dict) else ""
        elif isinstance(doc, dict) and isinstance(doc.get("error"), str):
            message = doc["error"]
        elif doc is None and (response.header("Content-Type") or "").startswith("text/plain"):
            message = body.decode("utf-8", "replace").strip().partition("\n")[0]
    message = "".join(c if c.isprintable() else " " for c in message).strip()
    return message[:200]
