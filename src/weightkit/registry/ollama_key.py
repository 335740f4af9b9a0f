"""Ollama's identity key (`~/.ollama/id_ed25519`) and the signed token requests registry.ollama.ai expects.

As Ollama's server/auth.go and auth/auth.go: the token URL carries `ts` and `nonce`, its query is encoded as
Go's url.Values.Encode (keys sorted), and the request's Authorization is `<public key>:<signature>`, no scheme
word, where the public key is the middle field of `id_ed25519.pub` and the signature is Ed25519 over
`GET,<token URL>,<base64 of the hex sha256 of the empty body>`.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RegistryAuthError
from . import ed25519

_BEGIN, _END = "-----BEGIN OPENSSH PRIVATE KEY-----", "-----END OPENSSH PRIVATE KEY-----"
_MAGIC = b"openssh-key-v1\x00"
_EMPTY_BODY = base64.b64encode(hashlib.sha256(b"").hexdigest().encode()).decode()


def default_key_path() -> Path:
    """Where Ollama keeps its key: `~/.ollama/id_ed25519` (Ollama has no setting for it)."""
    return Path.home() / ".ollama" / "id_ed25519"


@dataclass(frozen=True)
class OllamaKey:
    """An Ed25519 key as Ollama writes it (OpenSSH format, unencrypted)."""

    seed: bytes = field(repr=False)
    public: bytes

    @classmethod
    def load(cls, path: Path) -> OllamaKey:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise RegistryAuthError(f"cannot read Ollama's key {path}: {getattr(e, 'strerror', None) or e}") from None
        try:
            return cls(*_parse_openssh_ed25519(text))
        except (ValueError, IndexError, struct.error) as e:
            raise RegistryAuthError(f"{path} is not an Ollama key: {e}") from None

    @property
    def public_b64(self) -> str:
        """The middle field of `id_ed25519.pub`: the public key in SSH wire format, base64."""
        return base64.b64encode(_ssh_string(b"ssh-ed25519") + _ssh_string(self.public)).decode()

    def authorization(self, url: str) -> str:
        """The Authorization value for a GET of `url`, exactly as Ollama signs it."""
        signature = ed25519.sign(self.seed, f"GET,{url},{_EMPTY_BODY}".encode())
        return f"{self.public_b64}:{base64.b64encode(signature).decode()}"


def signed_params() -> list[tuple[str, str]]:
    """What Ollama adds to a token request it signs: the time and a random nonce (16 bytes, base64url)."""
    nonce = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode()
    return [("ts", str(int(time.time()))), ("nonce", nonce)]


def _ssh_string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _read_string(data: bytes, at: int) -> tuple[bytes, int]:
    (n,) = struct.unpack_from(">I", data, at)
    if at + 4 + n > len(data):
        raise ValueError("truncated")
    return data[at + 4 : at + 4 + n], at + 4 + n


def _parse_openssh_ed25519(text: str) -> tuple[bytes, bytes]:
    """(private seed, public key) of an unencrypted openssh-key-v1 Ed25519 key."""
    if _BEGIN not in text or _END not in text:
        raise ValueError("no OpenSSH private key in it")
    blob = base64.b64decode("".join(text.split(_BEGIN, 1)[1].split(_END, 1)[0].split()), validate=True)
    if not blob.startswith(_MAGIC):
        raise ValueError("not an openssh-key-v1 key")
    cipher, at = _read_string(blob, len(_MAGIC))
    kdf, at = _read_string(blob, at)
    _, at = _read_string(blob, at)  # kdf options
    if cipher != b"none" or kdf != b"none":
        raise ValueError("the key is encrypted (Ollama writes it without a passphrase)")
    (count,) = struct.unpack_from(">I", blob, at)
    if count != 1:
        raise ValueError(f"{count} keys in the file, expected one")
    _, at = _read_string(blob, at + 4)  # the public key again
    private, _ = _read_string(blob, at)
    if private[:4] != private[4:8]:
        raise ValueError("corrupt (its check numbers differ)")
    kind, at = _read_string(private, 8)
    if kind != b"ssh-ed25519":
        raise ValueError(f"a {kind.decode(errors='replace')} key, Ollama's are ssh-ed25519")
    public, at = _read_string(private, at)
    secret, _ = _read_string(private, at)
    if len(public) != 32 or len(secret) != 64 or secret[32:] != public or ed25519.public_key(secret[:32]) != public:
        raise ValueError("malformed Ed25519 key")
    return secret[:32], public
