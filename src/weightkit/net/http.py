"""HTTP/1.1 over the standard library's http.client, for everything weightkit sends or fetches: registry pulls
and pushes, and remote reading of URLs, hf:// files and registry models.

- Kept-alive connections per origin, shared by threads; TLS verified by default.
- Redirects followed by hand: credentials given with `authorize` go only to their own origin (scheme, host and
  port), an Authorization header a caller sets only to the origin of the URL it asked for. Not urllib, which
  forwards Authorization to wherever a redirect leads (a storage host or CDN must never see a registry
  password or a Hugging Face token).
- Request bodies from bytes or from a region of a file (sent again after a redirect, counted as they go).
- Failures of the exchange itself are `ExchangeFailed`, `transient` when trying again may work (a dropped
  connection, a timeout), with what the server said of when (Retry-After); retrying is the caller's choice.
- Body bytes received are counted (`bytes_fetched`), and requests sent (`requests`). `http.client` answers an
  early close with b"": callers count what they got against what was promised.
- Messages name URLs by `describe`, without query strings (signed links carry credentials there).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from .._version import __version__
from ..errors import ArgumentError, HTTPStatusError, RemoteError

USER_AGENT = f"weightkit/{__version__}"
TIMEOUT = 60.0  # seconds a connect or a read may wait
MAX_REDIRECTS = 10
REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 1 << 20  # bodies are sent and read this much at a time
_ERROR_BODY = 64 << 10  # at most this much of an error's body is read, for its message
_DRAIN = 4096  # an unread body up to this long is read to keep its connection
# How a kept-alive connection that the server has closed meanwhile fails on its next request.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)

Origin = tuple[str, str, int]


def origin(url: str) -> Origin:
    """(scheme, host, port) of an http(s) URL: what must match for a request to carry credentials."""
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
    """`url` for a message: without user info or query string."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


class ExchangeFailed(RemoteError):
    """A request or response that broke: `transient` if trying again may work (a dropped connection, a
    timeout, a server reached before that refuses now), not if it cannot (an unknown host, an untrusted
    certificate, a server never reached). `retry_after`: seconds the server asked to wait, if it did."""

    def __init__(self, message: str, *, transient: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after

    def __reduce__(self):
        return (_exchange_failed, (self.args[0], self.transient, self.retry_after))


def _exchange_failed(message: str, transient: bool, retry_after: float | None) -> ExchangeFailed:
    return ExchangeFailed(message, transient=transient, retry_after=retry_after)


@dataclass(frozen=True)
class FileRegion:
    """`length` bytes of a file from `offset`: a request body that can be sent again (after a redirect);
    `on_sent(n)` hears of each chunk handed to the connection."""

    path: Path
    offset: int
    length: int
    on_sent: Callable[[int], None] | None = field(default=None, compare=False)

    def chunks(self) -> Iterator[bytes]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            left = self.length
            while left:
                chunk = f.read(min(left, _CHUNK))
                if not chunk:
                    raise ExchangeFailed(f"{self.path} shrank while it was being sent", transient=False)
                left -= len(chunk)
                yield chunk
                if self.on_sent is not None:
                    self.on_sent(len(chunk))


Body = bytes | FileRegion | None


class Response:
    """A response whose body is still to be read. `close()` (or leaving a `with`) keeps its connection for
    the next request when the body was read to its end, and closes it otherwise."""

    def __init__(self, client: HttpClient, key: Origin, conn: http.client.HTTPConnection,
                 raw: http.client.HTTPResponse, url: str, redirected: bool) -> None:  # fmt: skip
        self._client, self._key, self._conn = client, key, conn
        self.raw = raw
        self.url = url  # where it came from, after any redirects
        self.redirected = redirected
        self.via: tuple[http.client.HTTPMessage, ...] = ()  # the headers of the redirects on the way, in order

    @property
    def status(self) -> int:
        return self.raw.status

    def header(self, name: str) -> str | None:
        return self.raw.getheader(name)

    def first_header(self, name: str) -> str | None:
        """A header as the first response on the way here that sent it had it: a redirect's, or this one's
        (Hugging Face says a revision's commit on the redirect to its CDN)."""
        for headers in self.via:
            if (value := headers.get(name)) is not None:
                return value
        return self.header(name)

    def readinto(self, buffer: memoryview) -> int:
        """Bytes read into `buffer`: 0 at the end of the body, or when the server closed early (count them)."""
        try:
            n = self.raw.readinto(buffer)
        except (OSError, http.client.HTTPException) as e:
            raise self._lost(e) from None
        self._client._count(n)
        return n

    def read_up_to(self, length: int) -> bytearray:
        """Up to `length` bytes of the body: fewer when it ends (or the server closed early)."""
        data = bytearray(length)
        view = memoryview(data)
        got = 0
        while got < length:
            n = self.readinto(view[got : got + _CHUNK])
            if not n:
                break
            got += n
        del view
        del data[got:]
        return data

    def read(self, limit: int) -> bytes:
        """The whole body, refusing one longer than `limit` bytes."""
        data = self.read_up_to(limit + 1)
        if len(data) > limit:
            self.drop()
            raise ExchangeFailed(f"{describe(self.url)}: answer longer than {limit} bytes", transient=False)
        return bytes(data)

    def error_body(self) -> bytes:
        """The first bytes of an error response's body, for its message; the response is closed. Never reads a
        body whose length cannot be trusted (docker-registry's 416 claims the whole blob's length) or that
        has no end but the connection's."""
        if self.status == 416 or (self.raw.length is None and not self.raw.chunked):
            self.drop()
            return b""
        try:
            data = bytes(self.read_up_to(_ERROR_BODY))
        except ExchangeFailed:
            data = b""
        self.close()
        return data

    def discard(self) -> None:
        """Let the response go unread: a short body is drained to keep the connection."""
        if self.raw.length is not None and self.raw.length <= _DRAIN:
            try:
                self.read_up_to(self.raw.length)
            except ExchangeFailed:
                return
        self.close()

    def close(self) -> None:
        if self._conn is None:
            return
        if self.raw.isclosed() and not self.raw.will_close:
            self._client._release(self._key, self._conn)
            self._conn = None
        else:
            self.drop()

    def drop(self) -> None:
        """Close the response and its connection (its body is not wanted, or cannot be trusted)."""
        self.raw.close()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _lost(self, e: BaseException) -> ExchangeFailed:
        self.drop()
        return ExchangeFailed(f"{describe(self.url)}: connection lost while reading ({_reason(e)})", transient=True)

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HttpClient:
    """Requests over kept-alive connections per origin; safe to share between threads."""

    def __init__(self, *, timeout: float = TIMEOUT, user_agent: str = USER_AGENT) -> None:
        self.timeout = timeout
        self.user_agent = user_agent
        self.bytes_fetched = 0  # body bytes received
        self.requests = 0  # requests sent
        self._credentials: dict[Origin, str] = {}
        self._idle: dict[Origin, list[http.client.HTTPConnection]] = {}
        self._reached: set[Origin] = set()
        self._lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None

    def authorize(self, url: str, value: str) -> None:
        """Send `Authorization: value` with every request to the origin of `url`, and to no other."""
        self._credentials[origin(url)] = value

    def request(self, method: str, url: str, headers: dict[str, str] | None = None, body: Body = None, *,
                follow: bool = True, stored_credentials: bool = True) -> Response:  # fmt: skip
        """One exchange, up to the response's headers, redirects followed (unless not `follow`): a 303, or a
        301/302 to a POST, continues as a GET without the body. `stored_credentials=False`: none of those
        given to `authorize` (a token request proves who asks in its own way)."""
        first, headers, via = url, headers or {}, []
        for hop in range(MAX_REDIRECTS + 1):
            sent = headers if hop == 0 or origin(url) == origin(first) else _without_authorization(headers)
            response = self._send(method, url, sent, body, redirected=hop > 0, stored=stored_credentials)
            if not follow or response.status not in REDIRECTS:
                response.via = tuple(via)
                return response
            via.append(response.raw.msg)
            location = response.header("Location")
            response.discard()
            if not location:
                raise RemoteError(f"{describe(url)}: a redirect (HTTP {response.status}) without a Location")
            url = urljoin(url, location)
            if urlsplit(url).scheme.lower() not in ("http", "https"):
                raise RemoteError(f"{describe(first)}: redirected to {describe(url)}, which is not http(s)")
            if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                method, body = "GET", None
        raise RemoteError(f"{describe(first)}: more than {MAX_REDIRECTS} redirects")

    def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        return self.request("GET", url, headers)

    def read_limited(self, response: Response, limit: int, what: str) -> bytes:
        """The whole body, refused if over `limit` bytes (manifests and such: small by nature)."""
        declared = response.raw.length  # None when the body comes in chunks
        if declared is not None and declared > limit:
            response.drop()
            raise RemoteError(f"{what}: the server sends {declared} bytes; at most {limit} are expected")
        data = response.read_up_to(limit + 1 if declared is None else declared)
        if declared is not None and len(data) < declared:
            response.drop()
            raise RemoteError(f"{what}: the server closed the connection after {len(data)} of {declared} bytes")
        if len(data) > limit:
            response.drop()
            raise RemoteError(f"{what}: the server sends more than the {limit} bytes expected")
        response.close()
        return bytes(data)

    def discard(self, response: Response) -> None:
        response.discard()

    def status_error(self, response: Response, what: str, hint: str = "") -> HTTPStatusError:
        """The error for an unexpected status: the status, where it came from, what the server says, `hint`."""
        detail = server_message(response, response.error_body())
        where = f" from {describe(response.url)}" if response.redirected else ""
        parts = [f"{what}: HTTP {response.status} {response.raw.reason}{where}", detail, hint]
        return HTTPStatusError(": ".join(p for p in parts if p), response.status)

    def close(self) -> None:
        """Close every kept-alive connection (a later request opens a new one)."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    def _send(self, method: str, url: str, headers: dict[str, str], body: Body, *, redirected: bool,
              stored: bool) -> Response:  # fmt: skip
        key = origin(url)
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {"User-Agent": self.user_agent, "Accept-Encoding": "identity", **headers}
        if stored and key in self._credentials and "Authorization" not in headers:
            headers["Authorization"] = self._credentials[key]
        if body is not None:
            headers["Content-Length"] = str(len(body) if isinstance(body, bytes) else body.length)
        conn = self._take(key)
        reused = conn is not None
        while True:
            conn = conn or self._connect(key, url)
            try:
                conn.request(method, target, body=body.chunks() if isinstance(body, FileRegion) else body,
                             headers=headers)  # fmt: skip
                raw = conn.getresponse()
            except ExchangeFailed:
                conn.close()
                raise
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if not (reused and isinstance(e, _STALE)):
                    raise ExchangeFailed(f"{describe(url)}: connection lost ({_reason(e)})", transient=True) from None
                conn, reused = None, False  # the server had closed this idle connection: one fresh try
            else:
                with self._lock:
                    self.requests += 1
                return Response(self, key, conn, raw, url, redirected)

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_fetched += n

    def _take(self, key: Origin) -> http.client.HTTPConnection | None:
        with self._lock:
            conns = self._idle.get(key)
            return conns.pop() if conns else None

    def _release(self, key: Origin, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.setdefault(key, []).append(conn)

    def _connect(self, key: Origin, url: str) -> http.client.HTTPConnection:
        """A new connection, connected: a failure is transient only for a server reached before in this
        client's life (it may be restarting); a first contact that fails says so at once."""
        scheme, host, port = key
        if scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context()
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, port, timeout=self.timeout, context=self._tls, blocksize=_CHUNK
            )
        else:
            conn = http.client.HTTPConnection(host, port, timeout=self.timeout, blocksize=_CHUNK)
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ExchangeFailed(f"{describe(url)}: {_reason(e)}", transient=key in self._reached) from None
        with self._lock:
            self._reached.add(key)
        return conn


def _without_authorization(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() != "authorization"}


def server_message(response: Response, body: bytes) -> str:
    """What an error response says, in one short line: Hugging Face's X-Error-Message, a registry's
    `{"errors": [{"code", "message"}]}` (as `CODE: message; ...`), a JSON `error`, or the first line of a
    plain-text body; control characters dropped."""
    message = response.header("X-Error-Message") or ""
    if not message:
        try:
            doc = json.loads(body.decode("utf-8"))
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("errors"), list):
            message = "; ".join(
                f"{e.get('code', '?')}: {e.get('message', '')}".rstrip(": ")
                for e in doc["errors"]
                if isinstance(e, dict)
            )
        elif isinstance(doc, dict) and isinstance(doc.get("error"), str):
            message = doc["error"]
        elif doc is None and (response.header("Content-Type") or "").startswith("text/plain"):
            message = body.decode("utf-8", "replace").strip().partition("\n")[0]
    message = "".join(c if c.isprintable() else " " for c in message).strip()
    return message if len(message) <= 300 else message[:299] + "…"


def _reason(e: BaseException) -> str:
    """A failure in a few words, for a message that names the URL already."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted ({e.verify_message})"
    if isinstance(e, ssl.SSLError):
        return f"TLS failed ({e.reason}; a plain HTTP server? then http:// or --insecure)"
    if isinstance(e, socket.gaierror):
        return f"cannot resolve the host name ({e.strerror})"
    if isinstance(e, TimeoutError):
        return "no answer in time"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    text = getattr(e, "strerror", None) or str(e)
    return text or type(e).__name__
