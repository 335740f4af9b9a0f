"""Registries for the tests: started once per session on 127.0.0.1, stopped and removed at the end. They need
Debian's docker-registry (and nginx for the redirect case), which `.ci/run` installs; without them these
tests skip."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from weightkit.gguf import write_gguf
from weightkit.ollama import Store, create_from_gguf
from weightkit.registry import RegistryOptions
from weightkit.registry.ed25519 import public_key

from ..remote.servers import HTPASSWD, Nginx
from .servers import Proxy, Registry, TokenServer

#: Fast retries: the fault tests wait for backoff many times.
FAST = RegistryOptions(backoff=0.01, retries=3, timeout=10, part_size=1 << 20)
OLLAMA_SEED = bytes(range(32))


@pytest.fixture(scope="session")
def registry_servers(tmp_path_factory):
    """The folder the servers of this session live in (the tests that need them skip without docker-registry)."""
    if shutil.which("docker-registry") is None:
        pytest.skip("docker-registry is not installed (.ci/run installs it)")
    return tmp_path_factory.mktemp("registries")


@pytest.fixture(scope="session")
def open_registry(registry_servers):
    server = Registry(registry_servers / "open")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def basic_registry(registry_servers):
    htpasswd = registry_servers / "htpasswd"
    htpasswd.write_text(HTPASSWD)
    server = Registry(registry_servers / "basic", auth={"htpasswd": {"realm": "weightkit", "path": str(htpasswd)}})
    yield server
    server.stop()


@pytest.fixture(scope="session")
def token_registry(registry_servers):
    """A registry with bearer tokens from a token server on another port: (registry, token server)."""
    tokens = TokenServer()
    auth = tokens.registry_auth(registry_servers / "token", f"http://127.0.0.1:{tokens.port}/token")
    server = Registry(registry_servers / "token" / "registry", auth=auth)
    yield server, tokens
    server.stop()
    tokens.stop()


@pytest.fixture(scope="session")
def ollama_registry(registry_servers):
    """registry.ollama.ai's shape: the token server on the registry's own host and port (a proxy routes
    /token to it), wanting Ollama's signature by the key with seed 0..31: (proxy, token server)."""
    tokens = TokenServer(ollama_key=public_key(OLLAMA_SEED))
    proxy = Proxy(routes={"/token": tokens.port})
    auth = tokens.registry_auth(registry_servers / "ollama", f"http://{proxy.host}/token")
    server = Registry(registry_servers / "ollama" / "registry", auth=auth)
    proxy.upstream_port = server.port
    yield proxy, tokens
    server.stop()
    proxy.stop()
    tokens.stop()


@pytest.fixture(scope="session")
def redirect_registry(registry_servers):
    """Basic auth, and blob GETs answered with a 307 to nginx on `localhost` (another host than 127.0.0.1)
    serving the registry's storage: (registry, nginx)."""
    if shutil.which("nginx") is None:
        pytest.skip("nginx is not installed (.ci/run installs it)")
    htpasswd = registry_servers / "htpasswd-redirect"
    htpasswd.write_text(HTPASSWD)
    root = registry_servers / "redirect"
    storage = root / "registry" / "storage"
    storage.mkdir(parents=True)
    nginx = Nginx([storage], root / "nginx")
    (root / "nginx").mkdir()
    nginx.start()
    middleware = {"storage": [{"name": "redirect", "options": {"baseurl": f"http://localhost:{nginx.ports[0]}"}}]}
    auth = {"htpasswd": {"realm": "weightkit", "path": str(htpasswd)}}
    server = Registry(root / "registry", auth=auth, middleware=middleware, storage=storage)
    yield server, nginx
    server.stop()
    nginx.stop()


@pytest.fixture
def proxy(open_registry):
    """A fault-injecting proxy in front of the open registry (new for each test)."""
    server = Proxy(open_registry.port)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory) -> Path:
    """A 6 MiB GGUF: six 1 MiB parts with FAST's part size."""
    path = tmp_path_factory.mktemp("tiny") / "tiny.gguf"
    rng = np.random.default_rng(0)
    write_gguf(path, {"general.architecture": "llama"}, {"w": rng.standard_normal((1536, 1024)).astype(np.float32)})
    return path


def stored_model(root: Path, name: str, gguf: Path) -> Store:
    """A store at `root` holding `gguf` as model `name`."""
    store = Store(root)
    create_from_gguf(store, name, gguf)
    return store
