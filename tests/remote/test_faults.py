"""Servers that misbehave: each gets a clear RemoteError, promptly, and never costs a download."""

from __future__ import annotations

import time

import numpy as np
import pytest

import weightkit
from weightkit.errors import ArgumentError, HTTPStatusError, RemoteError
from weightkit.gguf import write_gguf
from weightkit.remote import HttpClient, RemoteFile

from .servers import Request, free_port, serve_bytes

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


def test_early_close_is_a_short_read(faults, tiny_gguf):
    def half(req: Request) -> None:
        first, last = req.byte_range(len(tiny_gguf))
        req.send_response(206)
        req.send_header("Content-Length", str(last - first + 1))
        req.send_header("Content-Range", f"bytes {first}-{last}/{len(tiny_gguf)}")
        req.send_header("Connection", "close")
        req.end_headers()
        req.wfile.write(tiny_gguf[first : first + (last - first + 1) // 2])
        req.close_connection = True

    faults.routes["/half.gguf"] = half
    n = 1 << 20  # the first read
    with pytest.raises(RemoteError, match=rf"half\.gguf: the server closed the connection after {n // 2} of {n} bytes"):
        weightkit.open(faults.url("/half.gguf"))


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
