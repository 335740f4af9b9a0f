"""Where a model name lives on the network: the registry's origin and the repository, from a store name."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ArgumentError, InvalidName
from ..ollama.names import DEFAULT_HOST, ModelName, parse_name

# OCI distribution-spec: what a registry routes (docker-registry answers anything else with a plain-text 404).
_REPOSITORY_PART = re.compile(r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$")


def is_repository_name(text: str) -> bool:
    """Whether a registry routes `text` as a repository (OCI distribution-spec's name grammar)."""
    return all(_REPOSITORY_PART.match(part) for part in text.split("/"))


@dataclass(frozen=True)
class Reference:
    """A model name and the scheme its registry is spoken to with."""

    name: ModelName
    scheme: str  # "https", or "http" when allowed with insecure

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.name.host}"

    @property
    def repository(self) -> str:
        return f"{self.name.namespace}/{self.name.model}"

    def url(self, path: str) -> str:
        """`<origin>/v2/<repository>/<path>`, e.g. `url("manifests/latest")`."""
        return f"{self.origin}/v2/{self.repository}/{path}"

    def __str__(self) -> str:
        return str(self.name)


def parse_reference(text: str, *, insecure: bool = False) -> Reference:
    """A store name (`host[:port]/namespace/model:tag`, Ollama's defaults) for the network: HTTPS, or plain
    HTTP with `insecure` (as `ollama pull --insecure`); a name written `http://...` needs `insecure`. Names a
    registry other than Ollama's must be lowercase OCI repository names."""
    scheme, sep, _ = text.partition("://")
    if sep and scheme not in ("http", "https"):
        raise InvalidName(f"invalid model name {text!r}: a registry is reached over http or https, not {scheme!r}")
    name = parse_name(text)
    if sep and scheme == "http" and not insecure:
        raise ArgumentError(f"{text}: plain HTTP sends everything in the clear; allow it with --insecure")
    if name.host != DEFAULT_HOST:
        for part in (name.namespace, name.model):
            if not is_repository_name(part):
                raise InvalidName(
                    f"invalid model name {text!r} for a registry: {part!r} must be lowercase letters and digits "
                    "joined by '.', '_', '__' or '-' (OCI repository names)"
                )
    return Reference(name, scheme if sep else ("http" if insecure else "https"))
