"""Reading config.json as Go's decoder reads it into the policies' structs: an absent or null field is its zero
value, a field of another JSON type fails the whole policy (`ConfigFieldError`), as Ollama's factories fail."""

from __future__ import annotations


class ConfigFieldError(ValueError):
    """A config.json field a policy reads has the wrong JSON type (`plan` names the file)."""


def _at(config: dict, path: tuple[str, ...]):
    value = config
    for i, key in enumerate(path):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ConfigFieldError(f"{'.'.join(path[:i])} is not an object")
        value = value.get(key)
    return value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def int_field(config: dict, *paths: tuple[str, ...]) -> int:
    """The first non-zero integer at one of `paths` in the config."""
    values = [_at(config, path) for path in paths]
    for path, value in zip(paths, values, strict=True):
        if value is not None and not _is_int(value):
            raise ConfigFieldError(f"{'.'.join(path)} is not an integer: {value!r}")
    return next((v for v in values if v), 0)


def list_field(config: dict, key: str, kind: type) -> list:
    """A list of `kind` (int or str) at `key`, [] when absent."""
    value = _at(config, (key,))
    ok = value is None or (isinstance(value, list) and all(_is_int(v) if kind is int else isinstance(v, kind)
                                                            for v in value))  # fmt: skip
    if not ok:
        raise ConfigFieldError(f"{key} is not a list of {kind.__name__}")
    return value or []
