"""hf:// URIs: resolve URLs on $HF_ENDPOINT, $HF_TOKEN to the endpoint only, expired CDN links re-resolved."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import weightkit
from weightkit.errors import ArgumentError, HTTPStatusError
from weightkit.gguf import write_gguf
from weightkit.remote.hf import resolve_url

from .servers import FaultServer, Request, serve_bytes

pytestmark = pytest.mark.network

W = np.arange(1 << 19, dtype=np.float32)  # past the first read: fetched later, after a link may have expired
RESOLVE = "/org/repo/resolve/main/model.gguf"
COMMIT = "0123456789abcdef0123456789abcdef01234567"  # what `main` is when the file is first read
AT_COMMIT = f"/org/repo/resolve/{COMMIT}/model.gguf"


@pytest.mark.parametrize(
    ("uri", "url"),
    [
        ("hf://org/repo/model.gguf", "/org/repo/resolve/main/model.gguf"),
        ("hf://org/repo@v1.0/sub dir/m.gguf", "/org/repo/resolve/v1.0/sub%20dir/m.gguf"),
        ("hf://org/repo@refs/pr/12/m.gguf", "/org/repo/resolve/refs%2Fpr%2F12/m.gguf"),
        ("hf://org/repo@refs/convert/parquet/a/b.parquet", "/org/repo/resolve/refs%2Fconvert%2Fparquet/a/b.parquet"),
    ],
)
def test_resolve_urls(monkeypatch, uri, url):
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert resolve_url(uri) == "https://huggingface.co" + url
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example:8080/")
    assert resolve_url(uri) == "http://mirror.example:8080" + url


@pytest.mark.parametrize("uri", ["hf://org/repo", "hf://org", "hf://org/repo/", "hf://datasets/org/data/x.parquet"])
def test_bad_uris_are_usage_errors(uri):
    with pytest.raises(ArgumentError, match=r"expected hf://org/repo\[@revision\]/path"):
        weightkit.open(uri)


class Hub:
    """A Hugging Face look-alike: the resolve URL wants the token and redirects to a signed CDN link on
    another host; `expire()` makes the links handed out so far answer 403."""

    def __init__(self, server: FaultServer, data: bytes, token: str | None) -> None:
        self.server, self.token = server, token
        self.signatures = itertools.count()
        self.valid: set[str] = set()
        server.routes[RESOLVE] = server.routes[AT_COMMIT] = self.resolve
        cdn = serve_bytes(data)
        server.routes["/cdn/model.gguf"] = lambda req: cdn(req) if self._signed(req) else req.reply(403, b"expired")

    def resolve(self, req: Request) -> None:
        if self.token and req.headers.get("Authorization") != f"Bearer {self.token}":
            req.reply(401, headers={"X-Error-Message": "Invalid credentials in Authorization header"})
            return
        sig = str(next(self.signatures))
        self.valid.add(sig)
        location = self.server.url(f"/cdn/model.gguf?sig={sig}", "localhost")
        req.reply(302, headers={"Location": location, "X-Repo-Commit": COMMIT})

    def _signed(self, req: Request) -> bool:
        return req.path.partition("?sig=")[2] in self.valid

    def expire(self) -> None:
        self.valid.clear()


@pytest.fixture(scope="module")
def model_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("hf") / "model.gguf"
    write_gguf(path, {"general.architecture": "llama"}, {"w": W})
    return path.read_bytes()


def test_token_to_the_endpoint_and_expired_links_resolved_again_at_the_commit(faults, model_bytes, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", faults.url(""))
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    hub = Hub(faults, model_bytes, token="hf_secret")
    with weightkit.open("hf://org/repo/model.gguf") as m:
        assert m.path == m.display_name == "hf://org/repo/model.gguf"
        hub.expire()
        assert np.array_equal(m.tensor("w"), W)  # 403 from the CDN, resolved again (at the commit), fetched
    paths = [s.path.partition("?")[0] for s in faults.seen]
    assert paths == [RESOLVE, "/cdn/model.gguf", "/cdn/model.gguf", AT_COMMIT, "/cdn/model.gguf"]
    for seen in faults.seen:
        on_endpoint = seen.host.startswith("127.0.0.1:")
        assert (seen.headers.get("Authorization") == "Bearer hf_secret") == on_endpoint, seen


def test_a_link_that_stays_refused_is_resolved_once_only(faults, model_bytes, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", faults.url(""))
    Hub(faults, model_bytes, token=None)
    with weightkit.open("hf://org/repo/model.gguf") as m:
        faults.routes["/cdn/model.gguf"] = lambda req: req.reply(403, b"expired")  # every link, old or new
        with pytest.raises(
            HTTPStatusError, match=r"^hf://org/repo/model\.gguf: HTTP 403 Forbidden from http://localhost"
        ):
            m.raw("w")
    paths = [s.path.partition("?")[0] for s in faults.seen]
    assert paths.count(RESOLVE) == paths.count(AT_COMMIT) == 1


def test_missing_token_says_what_the_hub_says(faults, model_bytes, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", faults.url(""))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    Hub(faults, model_bytes, token="hf_secret")
    with pytest.raises(HTTPStatusError, match=r"HTTP 401 Unauthorized: Invalid credentials in Authorization header$"):
        weightkit.open("hf://org/repo/model.gguf")
