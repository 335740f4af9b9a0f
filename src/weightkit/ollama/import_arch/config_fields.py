"""Reading config.json as Go's decoder reads it into the policies' structs."""

from __future__ import annotations


def int_field(config: dict, *paths: tuple[str, ...]) -> int:
    """The first non-zero integer at one of `paths` in the config (Go's zero value where absent)."""
    for path in paths:
        value = config
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value:
            return value
    return 0
