"""Split GGUF models in llama.cpp's gguf-split convention, and opening them as one model.

Shard i of n is `<prefix>-<i+1:05d>-of-<n:05d>.gguf`. Every shard carries `split.no` (UINT16, from 0),
`split.count` (UINT16) and `split.tensors.count` (INT32, the model's total); the first shard also
carries all the model's metadata. As in gguf-split, a size limit counts tensor data only (each tensor
padded to 32 bytes) and is soft: a shard always takes at least one tensor.

`split_gguf` and `merge_gguf` are llama-gguf-split's `--split` and `--merge`, byte for byte; they stream
tensor data through a fixed buffer and move their files into place only once all are written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .._io import Openable, atomic_write
from ..errors import ArgumentError, FormatError
from .constants import DEFAULT_ALIGNMENT, KEY_ALIGNMENT, KEY_SPLIT_COUNT, KEY_SPLIT_NO, KEY_SPLIT_TENSORS, GGUFValueType
from .file import GGUFFile, GGUFSplit
from .values import Value
from .writer import GGUFWriter, PlannedTensor, encode_header

_NAME = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
_T = GGUFValueType


def split_path(prefix: str | os.PathLike[str], index: int, count: int) -> Path:
    """The path of shard `index` (from 0) of `count`."""
    return Path(f"{os.fspath(prefix)}-{index + 1:05d}-of-{count:05d}.gguf")


SPLIT_KEYS = (KEY_SPLIT_NO, KEY_SPLIT_COUNT, KEY_SPLIT_TENSORS)


def split_keys(index: int, count: int, n_tensors: int) -> dict[str, Value]:
    """The keys shard `index` (from 0) of `count` carries, in their types, in the order llama-quantize
    --keep-split writes them (llama-gguf-split's is `shard_metadata`'s)."""
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
            shards.append(first if i == index else _open_shard(sibling, i, count, framework, header_only))
        _check_shards(shards, count)
    except BaseException:
        for s in [*shards, first]:
            s.close()
        raise
    return GGUFSplit(shards)


def _open_shard(location: Path | Openable, index: int, count: int, framework: str, header_only: bool) -> GGUFFile:
    """Shard `index` of a split model; one that is not there is named as the missing shard it is."""
    try:
        return GGUFFile(location, framework=framework, header_only=header_only)
    except FileNotFoundError:
        name = location.display() if hasattr(location, "display") else os.fspath(location)
        raise FileNotFoundError(
            errno.ENOENT, f"shard {index + 1} of {count} of a split model is missing", name
        ) from None


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
            found = f"split.no={no}, split.count={_split_int(shard, KEY_SPLIT_COUNT, -1)}"
            raise FormatError(shard.path, None, f"shard {i + 1} of {count} should have split.no={i}; it has {found}")
        dup = names.intersection(shard.tensors)
        if dup:
            raise FormatError(shard.path, None, f"tensor {sorted(dup)[0]!r} is in more than one shard")
        names.update(shard.tensors)
    if total >= 0 and total != len(names):
        raise FormatError(
            shards[0].path, None, f"{KEY_SPLIT_TENSORS} says {total} tensors; the shards hold {len(names)}"
        )


def parse_split_size(text: str) -> int:
    """llama-gguf-split's `--split-max-size`: a whole number of decimal megabytes or gigabytes, "500M" or "48G"
    (10**6 and 10**9 bytes). The reference's sscanf would read "1.5G" as 1G; that is refused here instead."""
    m = _SIZE.match(text.strip())
    if m is None:
        raise ArgumentError(
            f"--split-max-size {text!r}: give a whole number of megabytes or gigabytes, e.g. 500M or 48G"
        )
    n = int(m["n"])
    if n <= 0:
        raise ArgumentError(f"--split-max-size {text!r}: the size must be positive")
    return n * _SIZE_UNITS[m["unit"]]


_SIZE = re.compile(r"^(?P<n>[+-]?\d+)(?P<unit>[MG])$")
_SIZE_UNITS = {"M": 1000**2, "G": 1000**3}


def plan_split(
    tensors: Sequence[PlannedTensor],
    *,
    max_tensors: int | None = None,
    max_bytes: int | None = None,
    no_tensor_first_split: bool = False,
) -> list[list[PlannedTensor]]:
    """Group tensors into shards as llama-gguf-split does: a new shard at every `max_tensors`-th tensor, or
    when the shard's tensor data (each tensor padded to 32 bytes) would pass `max_bytes`; a shard holds at
    least one tensor, so the limit is soft. `no_tensor_first_split` gives the first shard metadata only."""
    if (max_tensors is None) == (max_bytes is None):
        raise ArgumentError("give exactly one of max_tensors and max_bytes")
    if max_tensors is not None and max_tensors <= 0:
        raise ArgumentError(f"--split-max-tensors must be positive, not {max_tensors}")
    groups: list[list[PlannedTensor]] = [[], []] if no_tensor_first_split else [[]]
    size = 0
    for i, t in enumerate(tensors):
        padded = _pad(t.nbytes, DEFAULT_ALIGNMENT)
        full = i > 0 and i % max_tensors == 0 if max_tensors is not None else size + padded > max_bytes
        if full:
            if not groups[-1]:
                raise ArgumentError(
                    f"--split-max-size {max_bytes} bytes is less than tensor {t.name!r} ({padded} bytes): "
                    "a shard would hold no tensors"
                )
            groups.append([])
            size = 0
        groups[-1].append(t)
        size += padded
    return groups


def shard_metadata(metadata: Mapping[str, Any], index: int, count: int, n_tensors: int) -> dict[str, Any]:
    """The metadata of shard `index` (from 0) of `count` as llama-gguf-split writes it: the first has all of
    the model's; the others have the split keys only, and `general.alignment` where it is not the default, so
    every shard reads back as laid out. The split keys come last, `split.count` after `split.tensors.count`
    (gguf-split sets it twice, and llama.cpp's gguf_set_val removes a key and appends it)."""
    if index == 0:
        kept = {key: value for key, value in metadata.items() if key not in SPLIT_KEYS}
    else:
        kept = {KEY_ALIGNMENT: metadata[KEY_ALIGNMENT]} if _alignment(metadata) != DEFAULT_ALIGNMENT else {}
    keys = split_keys(index, count, n_tensors)
    return kept | {key: keys[key] for key in (KEY_SPLIT_NO, KEY_SPLIT_TENSORS, KEY_SPLIT_COUNT)}


def _alignment(metadata: Mapping[str, Any]) -> int:
    value = metadata.get(KEY_ALIGNMENT, DEFAULT_ALIGNMENT)
    return int(value.value if isinstance(value, Value) else value)


def _pad(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def write_split(
    prefix: str | os.PathLike[str],
    metadata: Mapping[str, Any],
    tensors: Iterable[PlannedTensor],
    *,
    max_tensors: int | None = None,
    max_bytes: int | None = None,
) -> list[Path]:
    """Write a model as shards `<prefix>-0000i-of-0000n.gguf` grouped as llama-gguf-split groups them; returns
    their paths. Tensors are `PlannedTensor`s with data (see `plan_tensor`); see `write_files`."""
    tensors = list(tensors)
    groups = plan_split(tensors, max_tensors=max_tensors, max_bytes=max_bytes)
    n = len(groups)
    shards = [(split_path(prefix, i, n), shard_metadata(metadata, i, n, len(tensors)), g) for i, g in enumerate(groups)]
    return write_files(shards)


def write_files(files: Sequence[tuple[Path, Mapping[str, Any], Sequence[PlannedTensor]]]) -> list[Path]:
    """Write GGUF files (path, metadata, tensors with their data) all or nothing: each is written whole under a
    hidden name beside its path, and all are renamed into place once every one is; a failure removes them."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, metadata, tensors in files:
            path = Path(path)
            stage = path.with_name(f".{path.name}.staged")
            staged.append((stage, path))
            with GGUFWriter(stage, metadata) as w:
                for t in tensors:
                    w.add_planned(dataclasses.replace(t))  # the writer fills in offsets and lets data go
        for stage, path in staged:
            os.replace(stage, path)
    except BaseException:
        for stage, _ in staged:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stage)
        raise
    return [path for _, path in staged]


@dataclass(frozen=True)
class ConverterSplit:
    """convert_hf_to_gguf.py's `--split-max-tensors`, `--split-max-size` and `--no-tensor-first-split`, which follow
    gguf-py's GGUFWriter, not llama-gguf-split: a new shard starts when the current one holds `max_tensors`
    tensors, or when the next tensor would take its data (unpadded) past `max_bytes` (0: no such limit), a shard
    holding at least one tensor. One shard is the output file itself, without split keys; more are
    `<output stem>-0000i-of-0000n.gguf` beside it, the first with the metadata and every one with `split.no`,
    `split.count`, `split.tensors.count` last."""

    max_tensors: int = 0
    max_bytes: int = 0
    no_tensor_first_split: bool = False

    def files(
        self, output: Path, metadata: Mapping[str, Any], tensors: Sequence[PlannedTensor]
    ) -> list[tuple[Path, dict[str, Any], list[PlannedTensor]]]:
        """(path, metadata, tensors) of each file the converter writes."""
        groups: list[list[PlannedTensor]] = [[], []] if self.no_tensor_first_split else [[]]
        for t in tensors:
            current = groups[-1]
            if current and (
                (self.max_tensors and len(current) >= self.max_tensors)
                or (self.max_bytes and sum(c.nbytes for c in current) + t.nbytes > self.max_bytes)
            ):
                groups.append(current := [])
            current.append(t)
        n = len(groups)
        if n == 1:
            return [(output, dict(metadata), groups[0])]
        stem = output.stem
        return [
            (output.with_name(f"{stem}-{i + 1:05d}-of-{n:05d}.gguf"),
             (dict(metadata) if i == 0 else {}) | split_keys(i, n, len(tensors)), group)
            for i, group in enumerate(groups)
        ]  # fmt: skip


def parse_converter_split_size(text: str) -> int:
    """convert_hf_to_gguf.py's `--split-max-size`: a whole number of bytes, or of decimal K, M or G bytes."""
    m = re.match(r"^(?P<n>\d+)(?P<unit>[KMG]?)$", text.strip())
    if m is None:
        raise ArgumentError(f"--split-max-size {text!r}: give a number of bytes, optionally followed by K, M or G")
    return int(m["n"]) * {"": 1, "K": 1000, **_SIZE_UNITS}[m["unit"]]


@dataclass
class ShardFile:
    """One GGUF file `split_gguf` or `merge_gguf` writes: where, its header, and where each tensor's bytes
    come from (a source file and the absolute offset in it), in the order they are written."""

    path: Path
    header: bytes
    tensors: list[PlannedTensor]
    sources: list[tuple[Path, int]]
    alignment: int

    @property
    def size(self) -> int:
        """The file's size in bytes."""
        return len(self.header) + sum(_pad(t.nbytes, self.alignment) for t in self.tensors)


#: Tensor bytes are copied through a buffer of this size, so memory use does not grow with the model.
COPY_CHUNK = 16 * 2**20

Progress = Callable[[int, int, str], None]


def split_gguf(
    src: str | os.PathLike[str],
    prefix: str | os.PathLike[str],
    *,
    max_tensors: int | None = None,
    max_bytes: int | None = None,
    no_tensor_first_split: bool = False,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> list[ShardFile]:
    """Split a GGUF file into `<prefix>-0000i-of-0000n.gguf` as llama-gguf-split does, byte for byte (the
    tensor limit is its default, 128, unless `max_bytes` is given); returns the shards, written unless
    `dry_run`. Tensor data is streamed; every shard appears at once or none does."""
    if max_tensors is None and max_bytes is None:
        max_tensors = DEFAULT_MAX_TENSORS
    with GGUFFile(src) as model:
        metadata = dict(model.metadata.typed_items())
        planned = _planned(model, model.tensors)
        groups = plan_split(
            planned, max_tensors=max_tensors, max_bytes=max_bytes, no_tensor_first_split=no_tensor_first_split
        )
        shards = []
        for i, group in enumerate(groups):
            shard_meta = shard_metadata(metadata, i, len(groups), len(planned))
            shards.append(_shard_file(split_path(prefix, i, len(groups)), shard_meta, group, model.path, model))
    if not dry_run:
        _write_all(shards, progress)
    return shards


#: llama-gguf-split's default `--split-max-tensors`.
DEFAULT_MAX_TENSORS = 128


def merge_gguf(
    first: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ShardFile:
    """Join a split model (any of its shards names it) into one GGUF file as llama-gguf-split --merge does,
    byte for byte: the first shard's metadata with `split.count` set to 0 (so the file is not taken for a
    shard), then every shard's tensors in order. Streams, writes atomically, and, as the reference, refuses
    an `out` that exists. A missing or mismatched shard is a `FormatError` or `FileNotFoundError` naming it."""
    out = Path(out)
    if out.exists():
        raise ArgumentError(f"{out} already exists; merge does not overwrite (as llama-gguf-split)")
    with open_gguf(first) as model:
        count = model.metadata.get(KEY_SPLIT_COUNT, "missing")
        if isinstance(model, GGUFFile) and count != 1:
            raise FormatError(model.path, None, f"not a shard of a split model: its {KEY_SPLIT_COUNT} is {count}")
        metadata = {key: value for key, value in model.metadata.typed_items() if key != KEY_SPLIT_COUNT}
        metadata[KEY_SPLIT_COUNT] = Value(0, _T.UINT16)
        shard = _shard_file(out, metadata, _planned(model, model.tensors), None, model)
    if not dry_run:
        _write_all([shard], progress)
    return shard


def _planned(model: GGUFFile | GGUFSplit, tensors: Mapping[str, Any]) -> list[PlannedTensor]:
    return [PlannedTensor(name, info.dtype, info.shape, info.nbytes) for name, info in tensors.items()]


def _shard_file(
    path: Path,
    metadata: dict[str, Value],
    tensors: list[PlannedTensor],
    source: Path | None,
    model: GGUFFile | GGUFSplit,
) -> ShardFile:
    """A file's header and sources; a tensor's source is its shard's file, or `source` for one file."""
    alignment = _alignment(metadata)
    header = encode_header(metadata, tensors, alignment, model.byte_order)
    shards = model.shards if isinstance(model, GGUFSplit) else [model]
    sources = []
    for t in tensors:
        info = model.tensors[t.name]
        sources.append((source or shards[info.shard].path, info.offset))
    return ShardFile(path, header, tensors, sources, alignment)


def _write_all(files: list[ShardFile], progress: Progress | None) -> None:
    """Write every file, each to a temporary file first; they are moved into place together at the end,
    so a failure leaves no partial output and overwrites nothing."""
    total = sum(f.size for f in files)
    done = 0
    buffer = bytearray(COPY_CHUNK)
    with contextlib.ExitStack() as outputs, contextlib.ExitStack() as inputs:
        readers: dict[Path, IO[bytes]] = {}
        for f in files:
            out = outputs.enter_context(atomic_write(f.path))
            out.write(f.header)
            done += len(f.header)
            for t, (source, offset) in zip(f.tensors, f.sources, strict=True):
                if source not in readers:
                    readers[source] = inputs.enter_context(open(source, "rb"))
                _copy(readers[source], offset, t.nbytes, out, buffer)
                out.write(bytes(_pad(t.nbytes, f.alignment) - t.nbytes))
                done += _pad(t.nbytes, f.alignment)
                if progress is not None:
                    progress(done, total, t.name)


def _copy(src: IO[bytes], offset: int, length: int, out: IO[bytes], buffer: bytearray) -> None:
    """Copy `length` bytes at `offset` of `src` to `out`, a buffer at a time."""
    view = memoryview(buffer)
    src.seek(offset)
    while length:
        n = src.readinto(view[: min(length, len(view))])
        if not n:
            raise FormatError(getattr(src, "name", None), src.tell(), f"the file ends {length} bytes early")
        out.write(view[:n])
        length -= n
