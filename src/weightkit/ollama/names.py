"""Ollama model names (`host/namespace/model:tag`), parsed and validated as Ollama's types/model/name.go does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from ..errors import InvalidName

DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
_MISSING = "!MISSING!"  # what Ollama puts where a separator promised a part that is empty


@dataclass(frozen=True)
class ModelName:
    host: str
    namespace: str
    model: str
    tag: str

    def __str__(self) -> str:
        return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"

    @property
    def short(self) -> str:
        """How Ollama displays it: default host and namespace left out."""
        if self.host.lower() != DEFAULT_HOST:
            return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"
        if self.namespace.lower() != DEFAULT_NAMESPACE:
            return f"{self.namespace}/{self.model}:{self.tag}"
        return f"{self.model}:{self.tag}"

    @property
    def parts(self) -> tuple[str, str, str, str]:
        """The manifest's path below `manifests/`."""
        return (self.host, self.namespace, self.model, self.tag)


def _cut_last(s: str, sep: str) -> tuple[str, str, bool]:
    i = s.rfind(sep)
    if i < 0:
        return s, "", False
    return s[:i] or _MISSING, s[i + len(sep) :] or _MISSING, True


def parse_name(text: str) -> ModelName:
    """Parse like Ollama's ParseName (defaults filled in), then refuse what IsFullyQualified refuses."""
    host = namespace = tag = ""
    s = text
    if s.rfind(":") > s.rfind("/"):
        s, tag, _ = _cut_last(s, ":")
    s, model, promised = _cut_last(s, "/")
    if not promised:
        model = s
    else:
        s, namespace, promised = _cut_last(s, "/")
        if not promised:
            namespace = s
        else:
            scheme, sep, rest = s.partition("://")
            host = rest if sep else scheme
    name = ModelName(host or DEFAULT_HOST, namespace or DEFAULT_NAMESPACE, model, tag or DEFAULT_TAG)
    for kind, part in zip(("host", "namespace", "model", "tag"), name.parts, strict=True):
        if not _valid_part(kind, part):
            raise InvalidName(f"invalid model name {text!r}: bad {kind} {part!r}")
    return name


def _valid_part(kind: str, s: str) -> bool:
    if not 1 <= len(s) <= (350 if kind == "host" else 80):
        return False
    if not _word(s[0]):
        return False
    for c in s[1:]:
        if c in "_-":
            continue
        if c == ".":
            if kind == "namespace":
                return False
        elif c == ":":
            if kind != "host":
                return False
        elif not _word(c):
            return False
    return True


def _word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def name_from_parts(parts: tuple[str, ...]) -> ModelName | None:
    """The name of a manifest found at manifests/<host>/<namespace>/<model>/<tag>, or None if invalid."""
    if len(parts) != 4:
        return None
    name = ModelName(*parts)
    ok = all(_valid_part(k, p) for k, p in zip(("host", "namespace", "model", "tag"), parts, strict=True))
    return name if ok and PurePosixPath(*parts).parts == parts else None
