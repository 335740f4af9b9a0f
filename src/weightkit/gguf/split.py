"""Split GGUF models in llama.cpp's gguf-split convention, and opening them as one model.

Shard i of n is `<prefix>-<i+1:05d>-of-<n:05d>.gguf`. Every shard carries `split.no` (UINT16, from 0),
`split.count` (UINT16) and `split.tensors.count` (INT32, the model's total); the first shard also
carries all the model's metadata. As in gguf-split, a size limit counts tensor data only (each tensor
padded to the alignment) and is soft: a shard always takes at least one tensor.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .._io import Openable
from ..errors import ArgumentError, FormatError
from .constants import DEFAULT_ALIGNMENT, KEY_ALIGNMENT, KEY_SPLIT_COUNT, KEY_SPLIT_NO, KEY_SPLIT_TENSORS, GGUFValueType
from .file import GGUFFile, GGUFSplit
from .values import Value
from .writer import GGUFWriter, PlannedTensor

_NAME = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
_T = GGUFValueType


def split_path(prefix: str | os.PathLike[str], index: int, count: int) -> Path:
    """The path of shard `index` (from 0) of `count`."""
    return Path(f"{os.fspath(prefix)}-{index + 1:05d}-of-{count:05d}.gguf")


SPLIT_KEYS = (KEY_SPLIT_NO, KEY_SPLIT_COUNT, KEY_SPLIT_TENSORS)


def split_keys(index: int, count: int, n_tensors: int) -> dict[str, Value]:
    """The keys shard `index` (from 0) of `count` carries, in gguf-split's order and types."""
    return {
        KEY_SPLIT_NO: Value(index, _T.UINT16),
        KEY_SPLIT_COUNT: Value(count, _T.UINT16),
        KEY_SPLIT_TENSORS: Value(n_tensors, _T.INT32),
    }


def split_prefix(path: str | os.PathLike[str]) -> tuple[str, int, int] | None:
    """(prefix, index from 0, count) if `path` is named like a shard, else None."""
    m = _NAME.match(os.fspath(path))
    if m is None:
        return None
    return m["prefix"], int(m["no"]) - 1, int(m["count"])


def open_gguf(
    path: str | os.PathLike[str] | Openable, *, framework: str = "numpy", header_only: bool = False
) -> GGUFFile | GGUFSplit:
    """Open a GGUF file, local or remote; a shard of a split model (any shard) opens the whole model, its
    siblings found by their names next to it. `header_only` opens files whose tensor data is cut short
    (see `GGUFFile`), every shard of a split model alike."""
    location = Path(path) if isinstance(path, (str, os.PathLike)) else path
    first = GGUFFile(location, framework=framework, header_only=header_only)
    try:
        count = _split_int(first, KEY_SPLIT_COUNT, 1)
        if count <= 1:
            return first
        named = split_prefix(location.name)
        if named is None or named[2] != count:
            raise FormatError(
                first.path,
                None,
                f"shard of a {count}-way split model, but its name does not follow the "
                "<name>-00001-of-0000N.gguf convention, so its siblings cannot be found",
            )
    except BaseException:
        first.close()
        raise
    prefix, index, _ = named
    shards: list[GGUFFile] = []
    try:
        for i in range(count):
            sibling = location.with_name(split_path(prefix, i, count).name)
            shards.append(first if i == index else GGUFFile(sibling, framework=framework, header_only=header_only))
        _check_shards(shards, count)
    except BaseException:
        for s in [*shards, first]:
            s.close()
        raise
    return GGUFSplit(shards)


def open_gguf_shards(
    paths: list[str | os.PathLike[str]] | list[Openable], *, framework: str = "numpy"
) -> GGUFFile | GGUFSplit:
    """Open the shards of a split model given in order, whatever their file names (e.g. store blobs)."""
    shards: list[GGUFFile] = []
    try:
        for p in paths:
            shards.append(GGUFFile(p, framework=framework))
        if len(shards) == 1:
            return shards[0]
        _check_shards(shards, len(shards))
    except BaseException:
        for s in shards:
            s.close()
        raise
    return GGUFSplit(shards)


def _split_int(f: GGUFFile, key: str, default: int) -> int:
    if key not in f.metadata:
        return default
    value = f.metadata[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise FormatError(f.path, None, f"{key} must be an integer, not {type(value).__name__}")
    return value


def _check_shards(shards: list[GGUFFile], count: int) -> None:
    total = _split_int(shards[0], KEY_SPLIT_TENSORS, -1)
    names: set[str] = set()
    for i, shard in enumerate(shards):
        no = _split_int(shard, KEY_SPLIT_NO, -1)
        if no != i or _split_int(shard, KEY_SPLIT_COUNT, -1) != count:
            raise FormatError(shard.path, None, f"expected shard {i} of {count}, found split.no={no}")
        dup = names.intersection(shard.tensors)
        if dup:
            raise FormatError(shard.path, None, f"tensor {sorted(dup)[0]!r} is in more than one shard")
        names.update(shard.tensors)
    if total >= 0 and total != len(names):
        raise FormatError(
            shards[0].path, None, f"{KEY_SPLIT_TENSORS} says {total} tensors; the shards hold {len(names)}"
        )


def plan_split(
    tensors: list[PlannedTensor], *, max_tensors: int | None = None, max_bytes: int | None = None, alignment: int = 32
) -> list[list[PlannedTensor]]:
    """Group tensors into shards as gguf-split does (by tensor count, or by padded data size)."""
    if (max_tensors is None) == (max_bytes is None):
        raise ArgumentError("give exactly one of max_tensors and max_bytes")
    groups: list[list[PlannedTensor]] = [[]]
    size = 0
    for t in tensors:
        padded = -(-t.nbytes // alignment) * alignment
        full = len(groups[-1]) >= max_tensors if max_tensors is not None else size + padded > max_bytes
        if groups[-1] and full:
            groups.append([])
            size = 0
        groups[-1].append(t)
        size += padded
    return groups


def write_split(
    prefix: str | os.PathLike[str],
    metadata: Mapping[str, Any],
    tensors: Iterable[PlannedTensor],
    *,
    max_tensors: int | None = None,
    max_bytes: int | None = None,
) -> list[Path]:
    """Write a model as shards `<prefix>-0000i-of-0000n.gguf`; returns their paths.

    Each shard is written atomically. Tensors are `PlannedTensor`s with data (see `plan_tensor`).
    """
    tensors = list(tensors)
    alignment = metadata.get(KEY_ALIGNMENT, DEFAULT_ALIGNMENT)
    alignment = alignment.value if isinstance(alignment, Value) else int(alignment)
    groups = plan_split(tensors, max_tensors=max_tensors, max_bytes=max_bytes, alignment=alignment)
    paths = []
    for i, group in enumerate(groups):
        path = split_path(prefix, i, len(groups))
        shard_meta = dict(metadata) if i == 0 else {}
        if i and KEY_ALIGNMENT in metadata:
            shard_meta[KEY_ALIGNMENT] = metadata[KEY_ALIGNMENT]
        shard_meta |= split_keys(i, len(groups), len(tensors))
        with GGUFWriter(path, shard_meta) as w:
            for t in group:
                w.add_planned(PlannedTensor(t.name, t.type, t.shape, t.nbytes, data=t.data))
        paths.append(path)
    return paths
