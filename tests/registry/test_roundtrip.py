"""push, pull and cp against a real registry (docker-registry 2.8.2): the same bytes come back."""

from __future__ import annotations

import hashlib
import json

import pytest

from weightkit.errors import ModelNotFound, RegistryError
from weightkit.ollama import Store
from weightkit.ollama.store import Layer
from weightkit.registry import RegistryOptions, pull, push
from weightkit.registry.download import PartialDownload

from .conftest import FAST, stored_model

pytestmark = pytest.mark.network


def blob_files(store: Store) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in store.blobs.iterdir()}


def test_push_then_pull_gives_the_same_bytes(tmp_path, open_registry, tiny_gguf):
    name = f"{open_registry.host}/library/roundtrip:v1"  # a repository no other test pushes to
    source = stored_model(tmp_path / "a", name, tiny_gguf)
    pushed = push(name, source, insecure=True, options=FAST)
    assert {b.status for b in pushed.blobs} == {"uploaded"} and pushed.transferred == pushed.size

    target = Store(tmp_path / "b")
    pulled = pull(name, target, insecure=True, options=FAST)
    assert target.manifest_bytes(name) == source.manifest_bytes(name)  # byte for byte: the same Ollama ID
    assert pulled.digest == pushed.digest == "sha256:" + hashlib.sha256(source.manifest_bytes(name)).hexdigest()
    assert blob_files(target) == blob_files(source)
    assert {b.status for b in pulled.blobs} == {"downloaded"} and pulled.transferred == pulled.size
    assert target.verify(name) == []
    assert not list(target.downloads.iterdir())  # partial downloads and their locks cleaned up

    again = pull(name, target, insecure=True, options=FAST)
    assert {b.status for b in again.blobs} == {"present"} and again.transferred == 0
    assert {b.status for b in push(name, source, insecure=True, options=FAST).blobs} == {"present"}


def test_cp_then_push_mounts_across_repositories(tmp_path, proxy, tiny_gguf):
    name, copy = f"{proxy.host}/library/tiny:v1", f"{proxy.host}/team/tiny-copy:v2"
    store = stored_model(tmp_path / "a", name, tiny_gguf)
    push(name, store, insecure=True, options=FAST)
    store.copy(name, copy)
    assert store.manifest_bytes(copy) == store.manifest_bytes(name)
    proxy.reset()
    result = push(copy, store, insecure=True, options=FAST)
    assert {b.status for b in result.blobs} == {"mounted"} and result.transferred == 0
    assert not [p for m, p, _ in proxy.requests if m in ("PATCH", "PUT") and "/blobs/" in p]  # no bytes sent
    mounts = [p for m, p, _ in proxy.requests if m == "POST"]
    assert mounts and all("mount=sha256" in p and p.endswith("&from=library/tiny") for p in mounts)
    pulled = pull(copy, Store(tmp_path / "b"), insecure=True, options=FAST)
    assert pulled.digest == result.digest


@pytest.mark.slow
def test_the_real_gemma_model(tmp_path, open_registry, gemma_path):
    name = f"{open_registry.host}/google/gemma3:270m"
    source = stored_model(tmp_path / "a", name, gemma_path)
    push(name, source, insecure=True)
    target = Store(tmp_path / "b")
    pull(name, target, insecure=True)
    assert target.manifest_bytes(name) == source.manifest_bytes(name)
    model = target.manifest(name).layers[0]
    assert target.blob_path(model.digest).stat().st_size == gemma_path.stat().st_size
    assert model.digest == "sha256:" + hashlib.sha256(gemma_path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("size", "options", "part"),
    [
        (253 << 20, RegistryOptions(), 16 << 20),  # about four parts a connection, not under 16 MiB
        (4 << 30, RegistryOptions(), 64 << 20),  # never over part_size
        (512 << 20, RegistryOptions(connections=2), 64 << 20),
        (6 << 20, FAST, 1 << 20),  # part_size under 16 MiB: part_size
    ],
)
def test_download_parts(tmp_path, size, options, part):
    layer = Layer("application/octet-stream", "sha256:" + "0" * 64, size)
    download = PartialDownload(tmp_path / "blob", layer, options)
    try:
        assert [p.end - p.start for p in download.parts[:-1]] == [part] * (len(download.parts) - 1)
        assert download.parts[-1].end == size and 0 < download.parts[-1].end - download.parts[-1].start <= part
    finally:
        download.close()


def test_missing_model_and_tag(tmp_path, open_registry, tiny_gguf):
    with pytest.raises(
        RegistryError, match=r"library/nothing:latest is not on 127\.0\.0\.1:\d+ \(404 MANIFEST_UNKNOWN"
    ):
        pull(f"{open_registry.host}/library/nothing", Store(tmp_path), insecure=True, options=FAST)
    with pytest.raises(ModelNotFound):
        push(f"{open_registry.host}/library/nothing", Store(tmp_path), insecure=True, options=FAST)
    assert not (tmp_path / "manifests").exists()


def test_uppercase_names_are_refused_before_any_request(tmp_path, proxy):
    from weightkit.errors import InvalidName

    with pytest.raises(InvalidName, match="OCI repository names"):
        pull(f"{proxy.host}/Library/tiny", Store(tmp_path), insecure=True, options=FAST)
    assert proxy.requests == []


@pytest.mark.slow
def test_the_commands(tmp_path, open_registry, tiny_gguf, weightkit_cli):
    """push, cp and pull as the command runs them (in this process: their output is the point)."""
    name, copy = f"{open_registry.host}/library/cli:v1", f"{open_registry.host}/other/cli:v1"
    stored_model(tmp_path / "a", name, tiny_gguf)
    pushed = weightkit_cli("push", name, "--insecure", "--store", tmp_path / "a", "--json")
    assert pushed.returncode == 0 and pushed.stderr == "", pushed.stderr
    doc = json.loads(pushed.stdout)
    assert doc["model"] == name and {b["status"] for b in doc["blobs"]} == {"uploaded"}
    copied = weightkit_cli("cp", name, copy, "--store", tmp_path / "a")
    assert copied.stdout == f"copied '{name}' to '{copy}'\n"
    assert "2 mounted" in weightkit_cli("push", copy, "--insecure", "--store", tmp_path / "a").stdout
    pulled = weightkit_cli("pull", copy, "--insecure", "--store", tmp_path / "b")
    assert pulled.returncode == 0, pulled.stderr
    assert pulled.stdout.startswith(f"pulled {copy} (6.0 MiB; 2 blobs: 2 downloaded; 6.0 MiB transferred), ID ")
    assert pulled.stdout.strip().endswith(doc["digest"][7:19])
