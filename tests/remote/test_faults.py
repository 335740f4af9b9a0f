"""Servers that misbehave: each gets a clear RemoteError, promptly, and never costs a download."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import weightkit
from weightkit.errors import ArgumentError, HTTPStatusError, RemoteError
from weightkit.gguf import write_gguf
from weightkit.net.retry import RetryPolicy
from weightkit.remote import HttpClient, RemoteFile

from ..registry.servers import Faults, Proxy
from .servers import Request, free_port, serve_bytes

pytestmark = pytest.mark.network

FAST = RetryPolicy(retries=2, backoff=0.01)

W = np.arange(1 << 19, dtype=np.float32)  # 2 MiB: past the first read, so fetched by a request of its own


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("tiny") / "tiny.gguf"
    write_gguf(path, {"general.architecture": "llama"}, {"w": W})
    return path.read_bytes()


def test_a_server_ignoring_range_is_refused_unread(faults):
    def whole_file(req: Request) -> None:  # 64 MiB announced, sent until the client hangs up
        req.send_response(200)
        req.send_header("Content-Length", str(64 << 20))
        req.end_headers()
        try:
            for _ in range(64):
                req.wfile.write(bytes(1 << 20))
        except OSError:
            pass

    faults.routes["/big.gguf"] = whole_file
    with pytest.raises(RemoteError, match=r"big\.gguf: the server ignores range requests .*\(67108864 bytes\)") as e:
        weightkit.open(faults.url("/big.gguf"))
    assert not isinstance(e.value, HTTPStatusError)
    client = HttpClient()
    with pytest.raises(RemoteError):
        RemoteFile(client, faults.url("/big.gguf")).head()
    assert client.bytes_fetched == 0


def test_416_with_a_lying_content_length_does_not_hang(faults):
    def unsatisfiable(req: Request) -> None:  # docker-registry 2.8.2: Content-Length of the blob, a short body
        req.send_response(416)
        req.send_header("Content-Length", "3000")
        req.send_header("Content-Range", "bytes */3000")
        req.end_headers()
        req.wfile.write(b"invalid range: failed to overlap\n")
        time.sleep(2)

    faults.routes["/x.gguf"] = unsatisfiable
    start = time.monotonic()
    with pytest.raises(HTTPStatusError, match=r"x\.gguf: HTTP 416 .*bytes 0-1048575 \(bytes \*/3000\)") as e:
        weightkit.open(faults.url("/x.gguf"))
    assert e.value.status == 416 and time.monotonic() - start < 1.5


def test_failures_on_the_way_are_tried_again(nginx, gemma_path):
    """Through the fault proxy in front of nginx: a 503 asking for a second, then a body cut short, then the
    bytes it did not send."""
    proxy = Proxy(nginx.ports[0])
    try:
        proxy.faults = Faults(fail=[("gemma.gguf", 503, 1)], retry_after=1, cut_after=300_000, blobs="gemma.gguf")
        file = RemoteFile(HttpClient(), f"http://{proxy.host}/gemma.gguf", retry=FAST)
        start = time.monotonic()
        with open(gemma_path, "rb") as f:
            assert file.head() == f.read(1 << 20)
        assert time.monotonic() - start >= 1  # as Retry-After asked
        ranges = [h["Range"] for _, _, h in proxy.requests]
        assert ranges == ["bytes=0-1048575", "bytes=0-1048575", "bytes=300000-1048575"]  # the rest, not again
    finally:
        proxy.stop()


def cut_at(data: bytes, offset: int):
    """A route that answers each range asked for but closes the connection at byte `offset` of the file."""

    def route(req: Request) -> None:
        first, last = req.byte_range(len(data))
        req.send_response(206)
        req.send_header("Content-Length", str(last - first + 1))
        req.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
        req.send_header("Connection", "close")
        req.end_headers()
        req.wfile.write(data[first : max(first, min(last + 1, offset))])
        req.close_connection = True

    return route


@pytest.mark.parametrize(
    ("route", "message", "requests"),
    [
        ("cut", r"the server closed the connection after 524288 of 1048576 bytes \(3 tries\)$", 3),
        (lambda req: req.reply(503, b"down\n"), r"HTTP 503 Service Unavailable \(3 tries\)$", 3),
        (lambda req: req.reply(429, headers={"Retry-After": "3600"}), r"429 .* asks to try again in 3600 s\)$", 1),
    ],
)
def test_failures_that_last_are_given_up(faults, tiny_gguf, route, message, requests):
    faults.routes["/m.gguf"] = cut_at(tiny_gguf, 1 << 19) if route == "cut" else route
    with pytest.raises(RemoteError, match=r"/m\.gguf: .*" + message):
        RemoteFile(HttpClient(), faults.url("/m.gguf"), retry=FAST).head()
    assert len(faults.seen) == requests


def test_a_file_replaced_while_it_is_read_is_refused(nginx, tmp_path):
    """nginx answers the If-Match of the ETag first read with 412 once the file is another."""
    path = nginx.roots[0] / "replaced.gguf"
    write_gguf(path, {"general.architecture": "llama"}, {"w": W})
    try:
        with weightkit.open(nginx.url("replaced.gguf")) as m:
            write_gguf(tmp_path / "new.gguf", {"general.architecture": "llama"}, {"w": W + 1})  # as long
            os.utime(tmp_path / "new.gguf", (time.time() + 10,) * 2)  # nginx's ETag: mtime (seconds) and size
            os.replace(tmp_path / "new.gguf", path)
            with pytest.raises(RemoteError, match=r"replaced\.gguf: the file changed while being read \(it is no"):
                m.tensor("w")  # "it is no longer": nginx's 412 (another ETag in a 206 would say "it was")
    finally:
        path.unlink()


def test_a_range_other_than_asked_is_refused(faults, tiny_gguf):
    def shifted(req: Request) -> None:
        req.reply(206, tiny_gguf[1:101], {"Content-Range": f"bytes 1-100/{len(tiny_gguf)}"})

    faults.routes["/shifted.gguf"] = shifted
    with pytest.raises(RemoteError, match=r"asked for bytes 0-1048575, the server sent Content-Range 'bytes 1-100/"):
        weightkit.open(faults.url("/shifted.gguf"))


def test_tensor_data_is_fetched_when_asked_and_a_changed_file_is_noticed(faults, tiny_gguf):
    faults.routes["/t.gguf"] = serve_bytes(tiny_gguf)
    with weightkit.open(faults.url("/t.gguf")) as m:
        assert m.remote.requests == 1 and m.remote.bytes_fetched == 1 << 20
        assert np.array_equal(m.tensor("w"), W)
        assert m.remote.requests == 2 and m.remote.bytes_fetched == (1 << 20) + W.nbytes
        faults.routes["/t.gguf"] = serve_bytes(tiny_gguf + b"more")
        with pytest.raises(RemoteError, match=r"t\.gguf: the file changed while being read"):
            m.raw("w")
        assert m.remote.bytes_fetched == (1 << 20) + W.nbytes


def test_an_answer_with_another_etag_is_another_file(faults, tiny_gguf):
    """A server that ignores If-Match: the ETag of each answer is compared with the first's."""
    etag = '"v1"'

    def tagged(req: Request) -> None:
        first, last = req.byte_range(len(tiny_gguf))
        headers = {"Content-Range": f"bytes {first}-{last}/{len(tiny_gguf)}", "ETag": etag}
        req.reply(206, tiny_gguf[first : last + 1], headers)

    faults.routes["/e.gguf"] = tagged
    with weightkit.open(faults.url("/e.gguf")) as m:
        etag = '"v2"'
        with pytest.raises(
            RemoteError, match=r"e\.gguf: the file changed while being read \(it was \"v1\", now \"v2\"\)"
        ):
            m.raw("w")
    assert [s.headers.get("If-Match") for s in faults.seen] == [None, '"v1"']


def test_not_found_says_so(faults):
    with pytest.raises(HTTPStatusError, match=r"/nothing\.gguf: HTTP 404 Not Found: not here$") as e:
        weightkit.open(faults.url("/nothing.gguf"))
    assert e.value.status == 404


def test_connection_refused():
    url = f"http://127.0.0.1:{free_port()}/m.gguf"
    with pytest.raises(RemoteError, match=rf"^{url}: connection refused$"):
        weightkit.open(url)


def test_redirect_loops_end(faults):
    faults.routes["/loop"] = lambda req: req.reply(302, headers={"Location": "/loop"})
    with pytest.raises(RemoteError, match=r"/loop: more than 10 redirects"):
        weightkit.open(faults.url("/loop"))


def test_redirect_to_another_host_carries_no_credentials(faults, tiny_gguf, monkeypatch):
    """HF_TOKEN goes to the Hugging Face endpoint (here 127.0.0.1), never to the host it redirects to
    (localhost: another host by name, as a CDN is)."""
    monkeypatch.setenv("HF_ENDPOINT", faults.url(""))
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    faults.routes["/m.gguf"] = lambda req: req.reply(302, headers={"Location": faults.url("/cdn/m.gguf", "localhost")})
    faults.routes["/cdn/m.gguf"] = serve_bytes(tiny_gguf)
    with weightkit.open(faults.url("/m.gguf")) as m:
        m.raw("w")
    origin = [s for s in faults.seen if s.path == "/m.gguf"]
    cdn = [s for s in faults.seen if s.path == "/cdn/m.gguf"]
    assert len(origin) == 1 and origin[0].headers.get("Authorization") == "Bearer hf_secret"
    assert len(cdn) == 2 and all("Authorization" not in s.headers for s in cdn)  # the header, then the tensor
    assert all(s.host.startswith("localhost:") for s in cdn)


def test_credentials_in_the_url_are_refused_without_echoing_them():
    with pytest.raises(ArgumentError, match="user name or password in the URL") as e:
        weightkit.open("http://alice:secret@127.0.0.1:1/m.gguf")
    assert "secret" not in str(e.value)
