"""Remote files read by byte ranges, and the source the parsers read them through.

A `RemoteFile` is a URL and the client that reads it. Its `RemoteSource` holds the file's first bytes for the
parsers, and when a header turns out longer (Gemma 3's 262,144-token vocabulary makes its GGUF header 6.5 MB)
fetches more as the parse goes on, up to MAX_HEADER_BYTES. Tensor data is fetched when asked for, exactly its
bytes. Every request names its range: a server that answers with the whole file is refused, not read. A
request that fails on the way (a dropped connection, 408, 429, 5xx) is tried again by the retry policy, for
the bytes it did not get, and every answer must be of the version of the file the first one was (its size
and ETag, sent back as If-Match; an hf:// file is read at the commit its revision was then), or the read
stops with an error rather than mix the bytes of two versions.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import numpy as np

from .._io import BufferSource
from ..errors import RemoteError
from ..net.http import ExchangeFailed, HttpClient, Response
from ..net.retry import DEFAULT, Backoff, Retries, retry_after, transient_status

FIRST_READ = 1 << 20  # the first request: every header of a small model, and the start of any other
#: The most of a file read to parse its header (a safetensors header may be 100 MB): a hostile server
#: or file costs at most this much memory and traffic before it is refused.
MAX_HEADER_BYTES = 128 << 20
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")

#: For an hf:// file: its URL at the commit the first answer says its revision is (None: it does not say).
Pin = Callable[[str, Response], str | None]


class RemoteFile:
    """A file on an HTTP server, read by range requests. `display` names it in messages (the URL, or the
    hf:// URI it came from); its size and version are known from the first answer. `retry`: how failed
    requests are tried again; `pin(display, first answer)`: the URL to read it at from then on."""

    def __init__(self, client: HttpClient, url: str, display: str | None = None, *, retry: Retries = DEFAULT,
                 pin: Pin | None = None) -> None:  # fmt: skip
        self.client = client
        self.url = url
        self.display = display or url
        self.retry = retry
        self._pin = pin
        self._target: str | None = None  # where the URL redirected to: read directly until that expires
        self._size: int | None = None
        self._version: str | None = None  # the first answer's ETag
        self._if_match: tuple[str, str] | None = None  # (URL, strong ETag): sent back to where it came from
        self._head: bytes | None = None

    @property
    def name(self) -> str:
        """The last part of the URL's path, unquoted: the file's name."""
        return unquote(urlsplit(self.url).path.rpartition("/")[2])

    def with_name(self, name: str) -> RemoteFile:
        """The file called `name` next to this one (the other shards of a split model, a config.json)."""
        return RemoteFile(self.client, _sibling(self.url, quote(name)), _sibling(self.display, name), retry=self.retry,
                          pin=self._pin)  # fmt: skip

    @property
    def size(self) -> int:
        if self._size is None:
            self.head()
        assert self._size is not None
        return self._size

    def head(self) -> bytes:
        """The file's first FIRST_READ bytes (all of a smaller file), fetched once."""
        if self._head is None:
            self._head = bytes(self.read(0, FIRST_READ))
        return self._head

    def read_all(self) -> bytes:
        """The whole file (check `size` first: this is for small files such as indexes)."""
        return self.head() + self.read(len(self.head()), self.size - len(self.head()))

    def read(self, start: int, length: int) -> bytearray:
        """`length` bytes from `start` (fewer at the end of the file), by one range request; a request that
        fails on the way is tried again for the bytes it did not get (bytes that came start the count of
        failures again, as a pull's parts do)."""
        if self._size is not None:
            length = min(length, self._size - start)
            if length <= 0:
                return bytearray()
        data = bytearray(length)
        done = 0  # bytes in, kept across tries: a retry asks for the rest
        backoff = Backoff(self.retry)
        with memoryview(data) as view:
            while True:
                before = done
                try:
                    response = self._range(start + done, length - done)
                    first, last, total = self._content_range(response, start + done, length - done)
                    self._same_version(response, total)
                    end = done + last - first + 1  # short only at the end of the file
                    while done < end:
                        n = response.readinto(view[done:end])
                        if not n:
                            response.drop()
                            raise ExchangeFailed(f"{self.display}: the server closed the connection after {done} "
                                                 f"of {length} bytes", transient=True)  # fmt: skip
                        done += n
                    response.close()
                    break
                except ExchangeFailed as failure:
                    if done > before:
                        backoff.progressed()
                    backoff.failed(failure)
        del data[done:]
        return data

    def _same_version(self, response: Response, total: int) -> None:
        """Take the file's size and version (ETag) from the first answer, or for hf:// the commit to read it at;
        refuse a later answer of another size or ETag."""
        version = response.header("ETag")
        if self._size is None:
            self._size = total
            pinned = self._pin(self.display, response) if self._pin is not None else None
            if pinned is not None:  # a commit's files never change (and its CDN links may differ in ETags)
                self.url = pinned
                return
            self._version = version
            if version is not None and version.startswith('"'):  # a strong ETag: If-Match compares those
                self._if_match = (response.url, version)
            return
        if total != self._size:
            self._changed(response, f"{self._size} bytes, now {total}")
        if None not in (version, self._version) and version != self._version:
            self._changed(response, f"it was {self._version}, now {version}")

    def _changed(self, response: Response, how: str) -> None:
        self.client.discard(response)
        raise RemoteError(f"{self.display}: the file changed while being read ({how})")

    def open_source(self, *, copy_on_write: bool) -> RemoteSource:
        return RemoteSource(self, writable=copy_on_write)

    def _range(self, start: int, length: int) -> Response:
        """The answer to a range request; where a redirect led refuses (403: a CDN's signed link expired),
        the URL is resolved again, once."""
        url = self._target or self.url
        response = self.client.get(url, self._headers(url, start, length))
        if response.status == 403 and self._target is not None:
            self.client.discard(response)
            self._target = None
            response = self.client.get(self.url, self._headers(self.url, start, length))
        if response.status == 206 and response.url != self.url:
            self._target = response.url
        return response

    def _headers(self, url: str, start: int, length: int) -> dict[str, str]:
        """The Range, and If-Match to the URL that sent the file's strong ETag (a redirect on the way may
        have ETags of its own)."""
        headers = {"Range": f"bytes={start}-{start + length - 1}"}
        if self._if_match is not None and self._if_match[0] == url:
            headers["If-Match"] = self._if_match[1]
        return headers

    def _content_range(self, response: Response, start: int, length: int) -> tuple[int, int, int]:
        """(first, last, total) of a 206 answer to bytes start..start+length-1; any other answer raises."""
        if response.status == 200 and response.raw.length == 0 and start == 0:
            return 0, -1, 0  # an empty file: no range to send, nothing too much sent
        if response.status == 200:
            size = response.raw.length
            self.client.discard(response)
            whole = f" ({size} bytes)" if size is not None else ""
            raise RemoteError(
                f"{self.display}: the server ignores range requests and answered with the whole file{whole}; "
                "weightkit reads remote models only from servers that send the byte ranges asked for"
            )
        if response.status == 412:  # If-Match failed
            self._changed(response, f"it is no longer {self._version}")
        if response.status == 416:
            told = response.header("Content-Range") or "no size given"
            raise self.client.status_error(response, self.display, f"bytes {start}-{start + length - 1} ({told})")
        if transient_status(response.status):
            wait = retry_after(response)
            error = self.client.status_error(response, self.display)
            raise ExchangeFailed(str(error), transient=True, retry_after=wait)
        if response.status != 206:
            raise self.client.status_error(response, self.display)
        end = start + length - 1
        m = _CONTENT_RANGE.fullmatch((response.header("Content-Range") or "").strip())
        if m is not None:
            first, last, total = map(int, m.groups())
            # The range asked for, or its part before the end of a shorter file.
            if first == start and first <= last < total and (last == end or last == total - 1 < end):
                return first, last, total
        told = response.header("Content-Range")
        self.client.discard(response)
        raise RemoteError(f"{self.display}: asked for bytes {start}-{end}, the server sent Content-Range {told!r}")


def _sibling(url: str, name: str) -> str:
    """`url` with the last part of its path replaced by `name` (and no query string)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rpartition("/")[0] + "/" + name, "", ""))


class RemoteSource(BufferSource):
    """The parsers' view of a remote file: its first bytes held, more fetched as a header's parse reaches
    past them (half as many again each time, or as far as the read needs), tensor data fetched when asked
    for."""

    def __init__(self, file: RemoteFile, *, writable: bool) -> None:
        super().__init__(file.display, file.size, file.head())
        self._file = file
        self._writable = writable

    def need(self, offset: int, length: int, what: str) -> None:
        super().need(offset, length, what)
        if offset + length > self.held:
            self._hold(offset, offset + length)

    def _hold(self, offset: int, end: int) -> None:
        """Hold the file's first `end` bytes at least, or refuse past MAX_HEADER_BYTES (`offset`: where the
        read that needs them starts)."""
        if end > MAX_HEADER_BYTES:
            raise self.error(
                offset,
                f"the header reaches past byte {end}; weightkit reads at most the first {MAX_HEADER_BYTES} bytes "
                "of a remote file to parse its header",
            )
        stop = min(self.size, MAX_HEADER_BYTES, max(end, self.held + self.held // 2))
        self._buf = self._buf + self._file.read(self.held, stop - self.held)

    def array(self, offset: int, dtype: np.dtype, count: int, what: str) -> np.ndarray:
        """`count` items of `dtype` at `offset`: from the bytes held, or fetched now, exactly those bytes.
        Read-only unless the source was opened for torch (`copy_on_write`)."""
        dtype = np.dtype(dtype)
        length = count * dtype.itemsize
        super().need(offset, length, what)  # checked against the file; tensor data does not join the header's bytes
        if offset + length <= self.held:
            data = bytearray(self._buf[offset : offset + length])
        else:
            data = self._file.read(offset, length)
        array = np.frombuffer(data, dtype=dtype)
        array.flags.writeable = self._writable
        return array

    def close(self) -> None:
        super().close()
        self._file.client.close()
