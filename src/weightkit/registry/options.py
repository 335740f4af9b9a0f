"""How pull and push talk to a registry: parallelism, part sizes, retries, and where credentials come from."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path

from .._version import __version__
from ..errors import ArgumentError
from ..net import retry
from ..ollama.names import DEFAULT_HOST


@dataclass(frozen=True)
class Credentials:
    """A user name and password for a registry, and where they came from (said in errors, as the password
    never is)."""

    username: str
    password: str = field(repr=False)
    source: str = "the caller"


@dataclass(frozen=True)
class RegistryOptions:
    """Settings for `pull` and `push`; the defaults suit a real registry over the internet.

    - `connections`: parallel connections of one pull (ranged parts of large blobs, several blobs at once).
    - `part_size`: bytes per PATCH of an upload, and at most per ranged GET of a download (whose parts are
      smaller when a blob would otherwise give a connection fewer than four).
    - `retries`, `backoff`: a dropped connection or a 5xx is tried again up to `retries` times in a row,
      waiting `backoff` seconds, doubled each time (with jitter, at most 30 s, longer if the server says so
      in Retry-After); bytes received since the last failure reset the count.
    - `timeout`: seconds without a byte before a connection counts as dropped.
    - `credentials`: used for any registry that asks; None: $WEIGHTKIT_REGISTRY_USER and
      $WEIGHTKIT_REGISTRY_PASSWORD, else the `auths` entry of docker's config.json for the registry's host.
    - `docker_config`: that config.json (None: $DOCKER_CONFIG/config.json, else ~/.docker/config.json).
    - `ollama_key`: Ollama's key for signed token requests (None: ~/.ollama/id_ed25519).
    - `signed_hosts`: the registries whose token requests are signed with it, as Ollama signs them (and
      only when the token server is on the registry's own host and port).
    """

    connections: int = 8
    part_size: int = 64 << 20
    retries: int = retry.DEFAULT.retries
    backoff: float = retry.DEFAULT.backoff
    timeout: float = 30.0
    credentials: Credentials | None = None
    docker_config: Path | None = None
    ollama_key: Path | None = None
    signed_hosts: frozenset[str] = frozenset({DEFAULT_HOST})
    user_agent: str = f"weightkit/{__version__} (Python {platform.python_version()})"

    def __post_init__(self) -> None:
        if self.connections < 1:
            raise ArgumentError(f"connections must be at least 1, not {self.connections}")
        if self.part_size < 1 << 16:
            raise ArgumentError(f"part_size must be at least 64 KiB, not {self.part_size}")
        if self.retries < 0 or self.backoff < 0 or self.timeout <= 0:
            raise ArgumentError("retries and backoff must be non-negative, timeout positive")
