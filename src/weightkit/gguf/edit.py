"""Change a GGUF file's metadata without decoding its tensors: the tensor bytes are copied as they are."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ArgumentError
from .file import GGUFFile
from .values import Value, infer
from .writer import GGUFWriter, plan_tensor


def edited_metadata(old: GGUFFile, set: Mapping[str, Any], remove: Iterable[str]) -> dict[str, Value]:
    """`old`'s typed metadata with keys removed and set; a key that exists keeps its GGUF type, and every
    key not set keeps the very bytes the file holds (see `GGUFFile.value_bytes`)."""
    values = {
        key: dataclasses.replace(value, encoded=(old.byte_order, old.value_bytes(key)))
        for key, value in old.metadata.typed_items()
    }
    for key in remove:
        if key not in values:
            raise ArgumentError(f"{old.path}: no metadata key {key!r} to remove")
        del values[key]
    for key, value in set.items():
        current = values.get(key)
        keep = current is not None and not isinstance(value, Value)
        values[key] = infer(value, current.type if keep else None, key)
    return values


def edit_gguf(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    set: Mapping[str, Any] | None = None,
    remove: Iterable[str] = (),
) -> None:
    """Write `path` again (to `out`, or in place) with metadata keys set or removed; untouched keys are
    copied byte for byte.

    Tensor data is streamed from the mapped file; the write is atomic, so editing in place is safe.
    """
    with GGUFFile(path) as old:
        values = edited_metadata(old, set or {}, remove)
        with GGUFWriter(out if out is not None else path, values, byte_order=old.byte_order) as w:
            for name, info in old.tensors.items():
                w.add_planned(plan_tensor(name, info.shape, info.dtype, old.raw(name)))
