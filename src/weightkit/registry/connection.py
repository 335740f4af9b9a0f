"""HTTP/1.1 with the standard library's http.client: kept-alive connections per origin and TLS verified.

Nothing is followed or retried here: `client` decides which hop of a redirect may carry the registry's
Authorization, and which failures are worth another try (`ExchangeFailed.transient`). urllib is not used
because it forwards Authorization to wherever a redirect points.
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
from urllib.parse import urlsplit

_SEND_CHUNK = 1 << 20
_ERROR_BODY_LIMIT = 64 << 10  # enough of an error body to quote
# How a kept-alive connection the server has closed meanwhile fails on its next request.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


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
                chunk = f.read(min(left, _SEND_CHUNK))
                if not chunk:
                    raise ExchangeFailed(f"{self.path} shrank while it was being sent", transient=False)
                left -= len(chunk)
                yield chunk
                if self.on_sent is not None:
                    self.on_sent(len(chunk))


Body = bytes | FileRegion | None


class ExchangeFailed(Exception):
    """An exchange that broke or a server failing: `transient` if trying again may work (a dropped
    connection, a timeout, a 5xx, with the server's `retry_after` seconds if it said), not if it cannot
    (a refused connection to a server never reached, an unknown host, an untrusted certificate). Its message
    names the host, never a URL's query or a header."""

    def __init__(self, message: str, *, transient: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.retry_after = retry_after


def origin_of(url: str) -> tuple[str, str, int]:
    """(scheme, host, port): what must match for a request to carry a registry's credentials."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or ""), port


class Response:
    """A response whose body is read by the caller; `close()` returns its connection for reuse when the body
    was read to its end, and drops it otherwise."""

    def __init__(self, pool: Pool, key: tuple[str, str, int], conn: http.client.HTTPConnection, raw, url: str) -> None:
        self._pool, self._key, self._conn, self._raw = pool, key, conn, raw
        self.url = url
        self.status: int = raw.status
        self.headers: http.client.HTTPMessage = raw.headers

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    def readinto(self, buffer: memoryview) -> int:
        """Bytes read into `buffer`; 0 at the end of the body, or when the server closed early (count them)."""
        try:
            return self._raw.readinto(buffer)
        except (OSError, http.client.HTTPException) as e:
            raise self._lost(e) from None

    def read(self, limit: int) -> bytes:
        """The whole body, refusing one longer than `limit` bytes."""
        try:
            data = self._raw.read(limit + 1)
        except (OSError, http.client.HTTPException) as e:
            raise self._lost(e) from None
        if len(data) > limit:
            self._drop()
            raise ExchangeFailed(f"{self._key[1]}: answer longer than {limit} bytes", transient=False)
        return data

    def error_body(self) -> bytes:
        """What an error response says (its first bytes); never reads a body whose length cannot be trusted
        (docker-registry's 416 claims the whole blob's length), nor one of a HEAD."""
        if self.status == 416 or (self._raw.length is None and not self._raw.chunked):
            self._drop()
            return b""
        try:
            data = self._raw.read(_ERROR_BODY_LIMIT)
        except (OSError, http.client.HTTPException):
            data = b""
        self.close()
        return data

    def close(self) -> None:
        if self._conn is None:
            return
        if self._raw.isclosed() and not self._raw.will_close:
            self._pool._release(self._key, self._conn)
            self._conn = None
        else:
            self._drop()

    def _lost(self, e: BaseException) -> ExchangeFailed:
        self._drop()
        return ExchangeFailed(f"{self._key[1]}: connection lost while reading ({_reason(e)})", transient=True)

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Pool:
    """Idle connections per origin, shared by threads; every request names its absolute URL."""

    def __init__(self, *, timeout: float, user_agent: str) -> None:
        self.timeout = timeout
        self.user_agent = user_agent
        self._idle: dict[tuple[str, str, int], list[http.client.HTTPConnection]] = {}
        self._reached: set[tuple[str, str, int]] = set()
        self._lock = threading.Lock()
        self._tls = ssl.create_default_context()

    def request(self, method: str, url: str, headers: dict[str, str], body: Body = None) -> Response:
        """One exchange, up to the response's headers."""
        key = origin_of(url)
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {"User-Agent": self.user_agent, **headers}
        if body is not None:
            headers["Content-Length"] = str(len(body) if isinstance(body, bytes) else body.length)
        conn = self._take(key)
        reused = conn is not None
        while True:
            conn = conn or self._connect(key)
            try:
                chunks = body.chunks() if isinstance(body, FileRegion) else body
                conn.request(method, target, body=chunks, headers=headers)
                return Response(self, key, conn, conn.getresponse(), url)
            except ExchangeFailed:
                conn.close()
                raise
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if not (reused and isinstance(e, _STALE)):
                    raise ExchangeFailed(f"{key[1]}: connection lost ({_reason(e)})", transient=True) from None
                conn, reused = None, False  # the server had closed this idle connection: try a new one

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    def _take(self, key: tuple[str, str, int]) -> http.client.HTTPConnection | None:
        with self._lock:
            conns = self._idle.get(key)
            return conns.pop() if conns else None

    def _release(self, key: tuple[str, str, int], conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.setdefault(key, []).append(conn)

    def _connect(self, key: tuple[str, str, int]) -> http.client.HTTPConnection:
        """A new connection, connected: a failure here is transient only with a server reached before in this
        run (it may be restarting); a first contact that fails says so at once."""
        scheme, host, port = key
        if scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=self.timeout, context=self._tls,
                                               blocksize=_SEND_CHUNK)  # fmt: skip
        else:
            conn = http.client.HTTPConnection(host, port, timeout=self.timeout, blocksize=_SEND_CHUNK)
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            message = f"cannot connect to {host}:{port}: {_reason(e)}"
            raise ExchangeFailed(message, transient=key in self._reached) from None
        self._reached.add(key)
        return conn


def error_text(body: bytes) -> str:
    """What an error body says, in one line: the registry's `{"errors": [{"code", "message"}]}`, else the
    first line of its text (cut short, control characters dropped)."""
    try:
        errors = json.loads(body)["errors"]
        text = "; ".join(f"{e.get('code', '?')}: {e.get('message', '')}".rstrip(": ") for e in errors)
    except (ValueError, KeyError, TypeError, AttributeError):
        lines = body.decode("utf-8", "replace").strip().splitlines()
        text = lines[0] if lines else "(no body)"
    text = "".join(c for c in text if c.isprintable())
    return text if len(text) <= 300 else text[:299] + "…"


def _reason(e: BaseException) -> str:
    """A failure in a few words, for a message naming the host already."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted ({e.verify_message})"
    if isinstance(e, ssl.SSLError):
        return f"TLS failed ({e.reason}; is it a plain HTTP registry? then --insecure)"
    if isinstance(e, socket.gaierror):
        return "unknown host"
    if isinstance(e, TimeoutError):
        return "timed out"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return type(e).__name__ + (f": {e}" if str(e) else "")
