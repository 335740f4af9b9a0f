"""`--remote`: models in a real docker-registry (anonymous; Basic auth with blobs redirected to nginx storage),
pushed by plain HTTP in the fixture; the manifest by the v2 API, the GGUF header by range."""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import weightkit
from weightkit.errors import FormatError, RegistryAuthError, RegistryError
from weightkit.gguf import GGUFValueType, Value, plan_tensor, write_split
from weightkit.ollama.store import CONFIG_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, MEDIA_TYPES

from ..registry.servers import Registry
from .conftest import cli_json, require
from .servers import HTPASSWD, Nginx

pytestmark = pytest.mark.network

LLAMA = {"block_count": 1, "embedding_length": 256, "feed_forward_length": 512, "attention.head_count": 4,
         "context_length": 2048}  # fmt: skip
SHAPES = {
    "token_embd.weight": (2, 256),
    "output_norm.weight": (256,),
    "output.weight": (2, 256),
    "blk.0.attn_norm.weight": (256,),
    "blk.0.ffn_norm.weight": (256,),
    **{f"blk.0.attn_{n}.weight": (256, 256) for n in ("q", "k", "v", "output")},
    "blk.0.ffn_gate.weight": (512, 256),
    "blk.0.ffn_up.weight": (512, 256),
    "blk.0.ffn_down.weight": (256, 512),
}
BASIC = {"Authorization": "Basic " + base64.b64encode(b"alice:secret").decode()}


def push(registry: Registry, name: str, shards: list[bytes], *, headers: dict[str, str], lie: int = 0) -> str:
    """Upload the GGUF shards and a config blob (POST, then PUT ?digest=), then the manifest (the first layer's
    size off by `lie`); returns the model's name for --remote."""

    def upload(data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        started = urllib.request.urlopen(
            urllib.request.Request(f"http://{registry.host}/v2/{name}/blobs/uploads/", method="POST", headers=headers)
        )
        location = started.headers["Location"]
        put = f"{location}{'&' if '?' in location else '?'}digest={digest}"
        urllib.request.urlopen(
            urllib.request.Request(
                put, data=data, method="PUT", headers={**headers, "Content-Type": "application/octet-stream"}
            )
        )
        return digest

    config = json.dumps({"model_format": "gguf"}).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": upload(config), "size": len(config)},
        "layers": [
            {"mediaType": MEDIA_TYPES["model"], "digest": upload(shard), "size": len(shard) + (lie if i == 0 else 0)}
            for i, shard in enumerate(shards)
        ],
    }
    urllib.request.urlopen(
        urllib.request.Request(
            f"http://{registry.host}/v2/{name}/manifests/latest",
            data=json.dumps(manifest).encode(),
            method="PUT",
            headers={**headers, "Content-Type": MANIFEST_MEDIA_TYPE},
        )
    )
    return f"http://127.0.0.1:{registry.port}/{name}:latest"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> list[Path]:
    """A tiny llama (every tensor its graph needs) split in two: Ollama keeps such a model as two model layers."""
    metadata = {
        "general.architecture": "llama",
        **{f"llama.{k}": Value(v, GGUFValueType.UINT32) for k, v in LLAMA.items()},
        "llama.attention.layer_norm_rms_epsilon": Value(1e-5, GGUFValueType.FLOAT32),
        "tokenizer.ggml.tokens": ["a", "b"],
    }
    tensors = [plan_tensor(name, shape, "F16", np.zeros(shape, np.float16)) for name, shape in SHAPES.items()]
    return write_split(tmp_path_factory.mktemp("model") / "tiny", metadata, tensors, max_tensors=6)


@pytest.fixture(scope="module")
def registries(tmp_path_factory, model):
    """An anonymous registry holding the model as `library/tiny` (and `library/liar`, whose manifest gets a
    size wrong), and a Basic-auth registry whose blob GETs redirect to nginx (on `localhost`: another host)
    serving its storage."""
    require("docker-registry")
    require("nginx")
    shards = [path.read_bytes() for path in model]
    anonymous = Registry(tmp_path_factory.mktemp("registry"))
    storage_dir = tmp_path_factory.mktemp("guarded")
    (storage_dir / "storage").mkdir()
    storage = Nginx([storage_dir / "storage"], storage_dir)
    storage.start()
    (storage_dir / "htpasswd").write_text(HTPASSWD)
    guarded = Registry(
        storage_dir,
        auth={"htpasswd": {"realm": "weightkit-test", "path": str(storage_dir / "htpasswd")}},
        middleware={"storage": [{"name": "redirect", "options": {"baseurl": f"http://localhost:{storage.ports[0]}"}}]},
    )
    names = {
        "tiny": push(anonymous, "library/tiny", shards, headers={}),
        "liar": push(anonymous, "library/liar", shards, headers={}, lie=1),
        "guarded": push(guarded, "team/tiny", shards, headers=BASIC),
    }
    yield names, storage
    for server in (anonymous, guarded, storage):
        server.stop()


def test_inspect_and_estimate_a_registry_model_as_the_local_file(registries, model, capsys):
    names, _ = registries
    for command in (["inspect"], ["estimate", "-c", "512"]):
        remote = cli_json(capsys, *command, names["tiny"], "--remote")
        local = cli_json(capsys, *command, str(model[0]))
        cost = remote.pop("remote")
        remote.pop("path", None), local.pop("path", None)
        assert remote == local
        assert cost["requests"] == 3  # the manifest, then each blob's first MiB (headers; no tensor data)


def test_basic_auth_stays_with_the_registry(registries, monkeypatch):
    names, storage = registries
    monkeypatch.setenv("WEIGHTKIT_REGISTRY_USER", "alice")
    monkeypatch.setenv("WEIGHTKIT_REGISTRY_PASSWORD", "secret")
    with weightkit.open(names["guarded"], remote=True) as m:
        assert m.display_name == names["guarded"] and len(m.tensors) == len(SHAPES)
        m.raw("blk.0.ffn_down.weight")  # past the first MiB of the second blob: a request of its own
    blob_requests = [line for line in storage.access_log() if "/docker/registry/v2/blobs/" in line]
    assert len(blob_requests) == 3 and all('auth="-"' in line and 'range="bytes=' in line for line in blob_requests)


def test_registry_auth_errors_say_what_to_set(registries, monkeypatch, tmp_path):
    names, _ = registries
    monkeypatch.delenv("WEIGHTKIT_REGISTRY_USER", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))  # no docker config.json to find credentials in
    with pytest.raises(RegistryAuthError, match=r"requires a login: set WEIGHTKIT_REGISTRY_USER and"):
        weightkit.open(names["guarded"], remote=True)
    monkeypatch.setenv("WEIGHTKIT_REGISTRY_USER", "alice")
    monkeypatch.setenv("WEIGHTKIT_REGISTRY_PASSWORD", "wrong")
    with pytest.raises(RegistryAuthError, match=r"refused the user name and password from WEIGHTKIT_REGISTRY_USER"):
        weightkit.open(names["guarded"], remote=True)


def test_a_manifest_size_that_is_not_the_blobs(registries):
    names, _ = registries
    with pytest.raises(FormatError, match=r"/manifests/latest: the manifest says sha256:\w+ has \d+ bytes"):
        weightkit.open(names["liar"], remote=True)


def test_unknown_model(registries):
    names, _ = registries
    with pytest.raises(RegistryError, match=r"nosuch:latest is not on .*\(404 MANIFEST_UNKNOWN: manifest unknown\)$"):
        weightkit.open(names["tiny"].replace("tiny", "nosuch"), remote=True)
