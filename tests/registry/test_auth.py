"""Authentication: Basic and bearer tokens against real registries, credentials from the environment and
docker's config.json, Ollama's signed token requests; and credentials never shown."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

import weightkit
from weightkit.errors import RegistryAuthError
from weightkit.ollama import Store
from weightkit.registry import Credentials, RegistryOptions, ed25519, pull, push
from weightkit.registry.auth import parse_challenges, token_url
from weightkit.registry.ollama_key import OllamaKey

from ..ollama._cli import cli_env, run
from .conftest import FAST, OLLAMA_SEED, stored_model
from .servers import PASSWORD, USER

pytestmark = pytest.mark.network

WRONG = "hunter2-Wrong-pa55word"  # distinctive: the tests look for it in every output


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """Nothing from the environment or the user's docker config."""
    monkeypatch.delenv("WEIGHTKIT_REGISTRY_USER", raising=False)
    monkeypatch.delenv("WEIGHTKIT_REGISTRY_PASSWORD", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-docker-config"))


def with_env(monkeypatch, user: str, password: str) -> None:
    monkeypatch.setenv("WEIGHTKIT_REGISTRY_USER", user)
    monkeypatch.setenv("WEIGHTKIT_REGISTRY_PASSWORD", password)


def test_basic_with_credentials_from_the_environment(tmp_path, basic_registry, tiny_gguf, no_credentials, monkeypatch):
    name = f"{basic_registry.host}/library/tiny:v1"
    store = stored_model(tmp_path / "a", name, tiny_gguf)
    with pytest.raises(RegistryAuthError, match=r"requires a login: set WEIGHTKIT_REGISTRY_USER"):
        push(name, store, insecure=True, options=FAST)
    with_env(monkeypatch, USER, PASSWORD)
    push(name, store, insecure=True, options=FAST)
    assert pull(name, Store(tmp_path / "b"), insecure=True, options=FAST).digest


def test_basic_with_credentials_from_docker_config(tmp_path, basic_registry, tiny_gguf, no_credentials, monkeypatch):
    name = f"{basic_registry.host}/library/tiny:v1"
    store = stored_model(tmp_path / "a", name, tiny_gguf)
    config = tmp_path / "docker"
    config.mkdir()
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    (config / "config.json").write_text(json.dumps({"auths": {f"http://{basic_registry.host}/v2/": {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    push(name, store, insecure=True, options=FAST)
    (config / "config.json").write_text(json.dumps({"auths": {basic_registry.host: {"auth": auth}}}))  # host:port
    assert pull(name, Store(tmp_path / "c"), insecure=True, options=FAST).transferred

    (config / "config.json").write_text(json.dumps({"auths": {}, "credsStore": "desktop"}))
    with pytest.raises(RegistryAuthError, match="credential helper, which weightkit does not run"):
        pull(name, Store(tmp_path / "b"), insecure=True, options=FAST)


@pytest.mark.slow
def test_a_wrong_password_is_one_clear_line_without_it(tmp_path, basic_registry, token_registry, tiny_gguf):
    """In the message, the repr, the command's output: never the password, nor its base64."""
    secrets = (WRONG, base64.b64encode(f"{USER}:{WRONG}".encode()).decode())
    options = RegistryOptions(credentials=Credentials(USER, WRONG, "the test"), backoff=0.01)
    assert WRONG not in repr(options)
    for registry, message in ((basic_registry, "refused the user name and password from the test"),
                              (token_registry[0], "token server refused the credentials from the test")):  # fmt: skip
        name = f"{registry.host}/library/tiny:v1"
        with pytest.raises(RegistryAuthError, match=message) as error:
            pull(name, Store(tmp_path / "b"), insecure=True, options=options)
        shown = f"{error.value} {error.value!r} {error.value.__context__!r} {error.value.__cause__!r}"
        assert not any(s in shown for s in secrets)
        env = cli_env(WEIGHTKIT_REGISTRY_USER=USER, WEIGHTKIT_REGISTRY_PASSWORD=WRONG, HOME=str(tmp_path))
        done = run("pull", name, "--insecure", "--store", tmp_path / "c", env=env)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "refused" in done.stderr, done.stderr
        assert not any(s in done.stdout + done.stderr for s in secrets)


def test_bearer_tokens(tmp_path, token_registry, tiny_gguf, no_credentials):
    registry, tokens = token_registry
    name = f"{registry.host}/team/tiny:v1"
    store = stored_model(tmp_path / "a", name, tiny_gguf)
    anonymous = FAST
    with pytest.raises(RegistryAuthError, match=r"denied repository:team/tiny:pull,push: set WEIGHTKIT_REGISTRY_USER"):
        push(name, store, insecure=True, options=anonymous)
    alice = RegistryOptions(credentials=Credentials(USER, PASSWORD, "the test"), backoff=0.01, part_size=1 << 20)
    push(name, store, insecure=True, options=alice)
    assert any(r["authorization"].startswith("Basic ") for r in tokens.requests)
    pushed = [r["path"] for r in tokens.requests if r["authorization"]]
    assert any("scope=repository%3Ateam%2Ftiny%3Apull%2Cpush" in path for path in pushed)
    pulled = pull(name, Store(tmp_path / "b"), insecure=True, options=anonymous)  # anonymous pull is allowed
    assert pulled.transferred == pulled.size

    store.copy(name, f"{registry.host}/other/tiny:v1")  # a mount asks for pull on the source too
    result = push(f"{registry.host}/other/tiny:v1", store, insecure=True, options=alice)
    assert {b.status for b in result.blobs} == {"mounted"}


def test_challenges_are_parsed_like_rfc_7235():
    header = (
        'Basic realm="a, b", Bearer realm="https://auth.example/token",service="reg",'
        'scope="repository:x/y:pull,push repository:z:pull",error="insufficient_scope", Other x=1'
    )
    assert parse_challenges(header) == [
        ("basic", {"realm": "a, b"}),
        ("bearer", {"realm": "https://auth.example/token", "service": "reg",
                    "scope": "repository:x/y:pull,push repository:z:pull", "error": "insufficient_scope"}),
        ("other", {"x": "1"}),
    ]  # fmt: skip
    assert parse_challenges('Bearer realm="quoted \\"q\\""') == [("bearer", {"realm": 'quoted "q"'})]
    assert parse_challenges("") == []


# Ollama's signed token requests. The worked vector: seed 0..31, URL as Ollama builds it (Go's url.Values.Encode).
VECTOR_URL = (
    "https://registry.ollama.ai/v2/token?nonce=AAECAwQFBgcICQoLDA0ODw&"
    "scope=repository%3Alibrary%2Fllama3%3Apull&service=ollama.com&ts=1700000000"
)
VECTOR_AUTHORIZATION = (
    "AAAAC3NzaC1lZDI1NTE5AAAAIAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4:"
    "F4Bgr6ZX0fiCzqa2lOBiYpRntfQFy9+XhfZJdsLt9KpnZuH70q0zByyMjZ3oHehWu1YYSvFGxaOOKCryjGJxCw=="
)


def ollama_key_file(path: Path, seed: bytes = OLLAMA_SEED) -> Path:
    """The key file Ollama writes (OpenSSH, unencrypted), made by `cryptography`."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.from_private_bytes(seed)
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))  # fmt: skip
    return path


def test_ollama_signature_vector(tmp_path):
    url = token_url("https://registry.ollama.ai/v2/token", [
        ("service", "ollama.com"), ("scope", "repository:library/llama3:pull"), ("ts", "1700000000"),
        ("nonce", "AAECAwQFBgcICQoLDA0ODw"),
    ])  # fmt: skip
    assert url == VECTOR_URL
    key = OllamaKey.load(ollama_key_file(tmp_path / "id_ed25519"))
    assert key.authorization(VECTOR_URL) == VECTOR_AUTHORIZATION
    assert "seed" not in repr(key) and OLLAMA_SEED.hex() not in repr(key)


def test_ollama_signature_verifies_with_the_public_key(tmp_path):
    """Checked by another implementation: `cryptography` verifies it with the key of `id_ed25519.pub`."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    public_b64, signature = VECTOR_AUTHORIZATION.split(":")
    wire = base64.b64decode(public_b64)
    assert wire[:15] == b"\x00\x00\x00\x0bssh-ed25519" and wire[15:19] == b"\x00\x00\x00\x20"
    zero = "ZTNiMGM0NDI5OGZjMWMxNDlhZmJmNGM4OTk2ZmI5MjQyN2FlNDFlNDY0OWI5MzRjYTQ5NTk5MWI3ODUyYjg1NQ=="
    Ed25519PublicKey.from_public_bytes(wire[19:]).verify(
        base64.b64decode(signature), f"GET,{VECTOR_URL},{zero}".encode()
    )


@pytest.mark.parametrize(
    ("secret", "public", "message", "signature"),
    [  # RFC 8032 section 7.1, tests 1 to 3
        ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
         "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
        ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
         "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
         "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
        ("c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
         "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
         "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
    ],
)  # fmt: skip
def test_ed25519_rfc_8032_vectors(secret, public, message, signature):
    assert ed25519.public_key(bytes.fromhex(secret)).hex() == public
    assert ed25519.sign(bytes.fromhex(secret), bytes.fromhex(message)).hex() == signature


def test_key_files_that_are_not_ollamas(tmp_path):
    good = ollama_key_file(tmp_path / "id_ed25519").read_text()
    blob = base64.b64decode("".join(good.splitlines()[1:-1]))
    encrypted = blob.replace(b"\x00\x00\x00\x04none", b"\x00\x00\x00\x0aaes256-ctr", 1)
    (tmp_path / "encrypted").write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + base64.b64encode(encrypted).decode()
        + "\n-----END OPENSSH PRIVATE KEY-----\n"
    )  # fmt: skip
    (tmp_path / "text").write_text("not a key")
    for name, message in (("encrypted", "is encrypted"), ("text", "no OpenSSH private key"), ("gone", "cannot read")):
        with pytest.raises(RegistryAuthError, match=message):
            OllamaKey.load(tmp_path / name)


def test_signed_token_requests_end_to_end(tmp_path, ollama_registry, tiny_gguf, no_credentials):
    proxy, tokens = ollama_registry
    key = ollama_key_file(tmp_path / "id_ed25519")
    signing = RegistryOptions(ollama_key=key, signed_hosts=frozenset({proxy.host}), backoff=0.01)
    name = f"{proxy.host}/me/tiny:v1"
    store = stored_model(tmp_path / "a", name, tiny_gguf)
    push(name, store, insecure=True, options=signing)
    assert pull(name, Store(tmp_path / "b"), insecure=True, options=signing).digest
    assert tokens.requests and all(
        r["authorization"].startswith("AAAAC3NzaC1lZDI1NTE5AAAAIAOh") for r in tokens.requests
    )

    other_key = ollama_key_file(tmp_path / "other", bytes(32))
    with pytest.raises(RegistryAuthError, match=r"refused the request signed with .*other"):
        pull(name, Store(tmp_path / "c"), insecure=True, options=RegistryOptions(ollama_key=other_key,
             signed_hosts=frozenset({proxy.host}), backoff=0.01))  # fmt: skip
    with pytest.raises(RegistryAuthError, match="wants requests signed with Ollama's key: none at"):
        pull(name, Store(tmp_path / "c"), insecure=True, options=RegistryOptions(ollama_key=tmp_path / "missing",
             signed_hosts=frozenset({proxy.host}), backoff=0.01))  # fmt: skip


def test_no_signature_for_a_token_server_on_another_host(tmp_path, token_registry, tiny_gguf, no_credentials):
    """As Ollama since CVE-2025-51471: the realm must be the registry's own host and port."""
    registry, tokens = token_registry
    name = f"{registry.host}/signed/tiny:v1"
    alice = RegistryOptions(credentials=Credentials(USER, PASSWORD, "the test"), backoff=0.01)
    push(name, stored_model(tmp_path / "a", name, tiny_gguf), insecure=True, options=alice)
    key = ollama_key_file(tmp_path / "id_ed25519")
    signing = RegistryOptions(ollama_key=key, signed_hosts=frozenset({registry.host}), backoff=0.01)
    before = len(tokens.requests)
    pull(name, Store(tmp_path / "b"), insecure=True, options=signing)  # anonymous: pulling needs no login
    assert tokens.requests[before:] and all(r["authorization"] == "" for r in tokens.requests[before:])


def test_remote_reading_signs_in_as_pull_does(tmp_path, token_registry, tiny_gguf, no_credentials, monkeypatch):
    """`--remote` reads through the registry client: a bearer token for the manifest, the same token on
    the blobs' range requests (with credentials from docker's config.json for a private repository)."""
    registry, tokens = token_registry
    name = f"{registry.host}/remote/tiny:v1"
    alice = RegistryOptions(credentials=Credentials(USER, PASSWORD, "the test"), backoff=0.01, part_size=1 << 20)
    push(name, stored_model(tmp_path / "a", name, tiny_gguf), insecure=True, options=alice)
    config = tmp_path / "docker"
    config.mkdir()
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    (config / "config.json").write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    tokens.requests.clear()
    with weightkit.open(f"http://{name}", remote=True) as remote, weightkit.open(tiny_gguf) as local:
        assert list(remote.tensors) == list(local.tensors)
        assert np.array_equal(remote.tensor("w"), local.tensor("w"))  # tensor data: a range request of its own
        assert remote.remote.requests >= 4  # the manifest (twice: before and after the token), the header, "w"
    assert [r["authorization"].split()[0] for r in tokens.requests] == ["Basic"]  # one token for it all
    assert "scope=repository%3Aremote%2Ftiny%3Apull" in tokens.requests[0]["path"]
