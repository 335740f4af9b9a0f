"""Faults between weightkit and a real registry, injected by a proxy: dropped connections, corrupted bytes,
failing servers, a killed pull, two pulls at once, lying sizes, redirects to another host, untrusted TLS."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time

import pytest

import weightkit
from weightkit.errors import DigestMismatch, RegistryConnectionError, RegistryError, RemoteError
from weightkit.ollama import Store
from weightkit.registry import pull, push
from weightkit.registry.client import RegistryClient
from weightkit.registry.reference import parse_reference

from ..ollama._cli import cli_env, start
from ..remote.servers import free_port
from .conftest import FAST, stored_model
from .servers import PASSWORD, USER, Registry, self_signed_certificate

pytestmark = pytest.mark.network


@pytest.fixture
def pushed(tmp_path, proxy, tiny_gguf):
    """The tiny model pushed through the proxy, whose counters are then reset: its name."""
    name = f"{proxy.host}/library/tiny:v1"
    push(name, stored_model(tmp_path / "source", name, tiny_gguf), insecure=True, options=FAST)
    proxy.reset()
    return name


def assert_untouched(store: Store) -> None:
    """No manifest, and no blob in the store."""
    assert not list(store.manifests.rglob("*")) if store.manifests.exists() else True
    assert [p.name for p in store.blobs.iterdir()] == []


def test_a_cut_connection_resumes_where_it_stopped(tmp_path, proxy, pushed):
    proxy.faults.cut_after = 2_500_000
    result = pull(pushed, Store(tmp_path / "b"), insecure=True, options=FAST)
    assert proxy.blob_bytes == result.size  # not a byte fetched twice
    ranges = [h["Range"] for h in proxy.blob_gets()]
    parts = sum(-(-b.size // FAST.part_size) for b in result.blobs)
    assert len(ranges) == parts + 1  # one more GET: the rest of the part that was cut


def test_a_corrupted_byte_fails_and_stores_nothing(tmp_path, proxy, pushed):
    store = Store(tmp_path / "b")
    proxy.faults.corrupt_at = 1000
    with pytest.raises(DigestMismatch, match=r"does not match its digest .*nothing was stored; pull again"):
        pull(pushed, store, insecure=True, options=FAST)
    assert_untouched(store)
    assert not list(store.downloads.glob("*.data")) or all(  # only the config's (good) download is kept
        json.loads(p.with_suffix(".json").read_text())["size"] < 1000 for p in store.downloads.glob("*.data")
    )
    proxy.reset()
    assert pull(pushed, store, insecure=True, options=FAST).digest
    assert store.verify(pushed) == []


def test_a_killed_pull_resumes_and_prune_spares_it_while_it_runs(tmp_path, proxy, pushed):
    store = Store(tmp_path / "b")
    proxy.faults.rate = 2_000_000  # bytes a second: the 6 MiB blob takes 3 s
    process = start("pull", pushed, "--insecure", "--store", store.root, env=cli_env())
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _saved(store) < 1_000_000:
            assert process.poll() is None, process.communicate()
            time.sleep(0.05)
        report = store.prune()  # while it runs: its partial download is kept
        assert {p.suffix for p in report.in_use} >= {".data", ".json"} and not report.removed
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    saved = _saved(store)
    assert 1_000_000 <= saved < 6 << 20 and not list(store.manifests.rglob("*"))
    proxy.reset()
    result = pull(pushed, store, insecure=True, options=FAST)
    assert "resumed" in {b.status for b in result.blobs}
    assert proxy.blob_bytes == result.size - saved == result.transferred  # only what was missing
    assert store.verify(pushed) == [] and not list(store.downloads.iterdir())


def _saved(store: Store) -> int:
    """The bytes the partial downloads' state files say are on disk."""
    total = 0
    for path in store.downloads.glob("*.json") if store.downloads.exists() else ():
        with contextlib.suppress(ValueError, OSError):  # being replaced
            total += sum(done for _, _, done in json.loads(path.read_text())["parts"])
    return total


def test_two_pulls_of_one_model_at_once_download_it_once(tmp_path, proxy, pushed):
    store = Store(tmp_path / "b")
    proxy.faults.rate = 4_000_000
    results, errors = [], []
    go = threading.Barrier(2)

    def run() -> None:
        go.wait()
        try:
            results.append(pull(pushed, store, insecure=True, options=FAST))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 2
    assert sorted(r.transferred for r in results) == [0, results[0].size]
    assert proxy.blob_bytes == results[0].size
    assert store.verify(pushed) == []


def test_a_registry_that_is_down(tmp_path):
    # One line naming the URL, and no "(N tries)": a server never reached is not tried again.
    with pytest.raises(
        RegistryConnectionError, match=r"^http://127\.0\.0\.1:\d+/v2/library/tiny/manifests/latest: connection refused$"
    ):
        pull(f"127.0.0.1:{free_port()}/library/tiny", Store(tmp_path), insecure=True)
    assert not (tmp_path / "manifests").exists()


def test_server_errors_are_retried(tmp_path, proxy, pushed):
    proxy.faults.fail = [("/manifests/", 503, 2), ("/blobs/sha256:", 500, 2)]
    result = pull(pushed, Store(tmp_path / "b"), insecure=True, options=FAST)
    assert result.transferred == result.size
    assert sum(1 for m, p, _ in proxy.requests if m == "GET" and "/manifests/" in p) == 3

    proxy.reset()
    proxy.faults.fail = [("/manifests/", 503, 100)]
    with pytest.raises(
        RegistryConnectionError, match=r"pull manifest library/tiny:v1: 503 UNAVAILABLE: injected \(4 tries\)"
    ):
        pull(pushed, Store(tmp_path / "c"), insecure=True, options=FAST)


@pytest.mark.parametrize("change", [+10, -10])
def test_a_manifest_that_lies_about_sizes(tmp_path, proxy, pushed, change):
    """docker-registry takes manifests with wrong sizes: the ranges' totals give them away."""
    doc = json.loads(Store(tmp_path / "source").manifest_bytes(pushed))
    size = doc["layers"][0]["size"]
    doc["layers"][0]["size"] += change
    liar = pushed.replace(":v1", ":liar")
    with RegistryClient(parse_reference(liar, insecure=True), FAST) as client:
        client.put_manifest(json.dumps(doc).encode(), doc["mediaType"])
    store = Store(tmp_path / "b")
    with pytest.raises(RegistryError, match=rf"asked for bytes from \d+ of \d+, got 'bytes \d+-\d+/{size}'"):
        pull(liar, store, insecure=True, options=FAST)
    assert_untouched(store)


def test_a_range_past_the_end_fails_at_once(tmp_path, pushed):
    """docker-registry's 416 claims the whole blob's length for its short body: reading it would hang."""
    layer = Store(tmp_path / "source").manifest(pushed).layers[0]
    started = time.monotonic()
    with RegistryClient(parse_reference(pushed, insecure=True), FAST) as client:
        with pytest.raises(RegistryError, match=rf"shorter than its manifest says \(416 at byte {layer.size + 100}\)"):
            client.open_blob(layer.digest, layer.size + 100, layer.size + 200)
        assert client.has_blob(layer.digest)  # and the client goes on working
    assert time.monotonic() - started < 2


def test_redirects_to_storage_get_no_credentials(tmp_path, redirect_registry, tiny_gguf, monkeypatch):
    registry, nginx = redirect_registry
    monkeypatch.setenv("WEIGHTKIT_REGISTRY_USER", USER)
    monkeypatch.setenv("WEIGHTKIT_REGISTRY_PASSWORD", PASSWORD)
    name = f"{registry.host}/library/tiny:v1"
    source = stored_model(tmp_path / "a", name, tiny_gguf)
    push(name, source, insecure=True, options=FAST)
    target = Store(tmp_path / "b")
    pull(name, target, insecure=True, options=FAST)
    assert target.manifest_bytes(name) == source.manifest_bytes(name) and target.verify(name) == []
    log = nginx.access_log()
    assert sum('"GET /docker/registry/v2/blobs/sha256/' in line and " 206 " in line for line in log) >= 6
    assert all(line.endswith('auth="-"') for line in log), log  # the registry's Basic credentials stayed home
    assert {b.status for b in push(name, source, insecure=True, options=FAST).blobs} == {"present"}  # HEAD's 307


def test_a_plain_http_registry_needs_insecure(tmp_path, open_registry):
    with pytest.raises(
        RegistryConnectionError,
        match=r"^https://127\.0\.0\.1:\d+/v2/.*: TLS failed \(.*a plain HTTP server\? then http:// or --insecure\)$",
    ):
        pull(f"{open_registry.host}/library/tiny:v1", Store(tmp_path))


def test_tls_is_verified(tmp_path, registry_servers, tiny_gguf, monkeypatch):
    """HTTPS by default, its certificate checked: a registry whose CA is not trusted is refused before any
    byte is sent, by pull, push and remote reading; trusting it the way OpenSSL is told (SSL_CERT_FILE) lets
    them through."""
    cert, key = self_signed_certificate(registry_servers / "tls")
    server = Registry(registry_servers / "tls" / "registry", tls=(cert, key))
    try:
        name = f"{server.host}/library/tiny:v1"
        store = stored_model(tmp_path / "a", name, tiny_gguf)
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        with pytest.raises(
            RegistryConnectionError, match=r"^https://127\.0\.0\.1:\d+/v2/.*: TLS certificate not trusted"
        ):
            push(name, store, options=FAST)
        with pytest.raises(RegistryConnectionError, match="TLS certificate not trusted"):
            pull(name, Store(tmp_path / "b"), options=FAST)
        assert not (tmp_path / "b" / "manifests").exists()
        with pytest.raises(RemoteError, match="TLS certificate not trusted"):
            weightkit.open(name, remote=True)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        pushed = push(name, store, options=FAST)
        pulled = pull(name, Store(tmp_path / "b"), options=FAST)
        assert pulled.digest == pushed.digest and pulled.transferred == pulled.size
        with weightkit.open(name, remote=True) as m:
            assert list(m.tensors) == ["w"]
    finally:
        server.stop()
