"""Hugging Face checkpoints: a folder of safetensors shards with `model.safetensors.index.json`, opened as
one model, and written the way `save_pretrained` shards them."""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .._io import Openable, atomic_write
from ..dtypes import DataSource
from ..errors import ArgumentTypeError, FormatError
from ..model import ShardedModelFile, TensorInfo
from .file import SafetensorsFile, SafetensorsModel
from .writer import SafetensorsTensor, described, write_safetensors

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
MAX_INDEX_BYTES = 64 << 20  # an index lists names only; anything this large is not one


def read_config(folder: Path) -> dict[str, Any] | None:
    """The folder's `config.json` as a dict, or None when there is none or it is not a JSON object."""
    path = folder / "config.json"
    try:
        if path.stat().st_size > MAX_INDEX_BYTES:
            return None
        return parse_config(path.read_bytes())
    except OSError:
        return None


def parse_config(data: bytes) -> dict[str, Any] | None:
    """A config.json's bytes as a dict, or None when they are not a JSON object."""
    try:
        config = json.loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError included
        return None
    return config if isinstance(config, dict) else None


def read_index(path: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """(weight_map, metadata) of an index file, refusing names that would leave the folder."""
    check_index_size(path, path.stat().st_size)
    return parse_index(path, path.read_bytes())


def check_index_size(where: str | os.PathLike[str], size: int) -> None:
    if size > MAX_INDEX_BYTES:
        raise FormatError(where, 0, f"index of {size} bytes is larger than any real index ({MAX_INDEX_BYTES})")


def parse_index(where: str | os.PathLike[str], data: bytes) -> tuple[dict[str, str], dict[str, Any]]:
    """(weight_map, metadata) of an index file's bytes; `where` names it in errors."""
    try:
        index = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise FormatError(where, 0, f"not a JSON index: {e}") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        raise FormatError(where, 0, "the index has no 'weight_map' of tensor names to file names")
    for file in set(weight_map.values()):
        if not file or Path(file).name != file or file in (".", ".."):
            raise FormatError(where, 0, f"the index names {file!r}, which is not a file in the checkpoint folder")
    metadata = index.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise FormatError(where, 0, "the index's 'metadata' is not an object")
    return weight_map, metadata


class SafetensorsCheckpoint(SafetensorsModel, ShardedModelFile):
    """A sharded (or single-file) Hugging Face checkpoint folder as one model. `TensorInfo.shard` indexes
    `.files`; `.config` is the folder's config.json (or None)."""

    def __init__(self, path: str | os.PathLike[str], *, framework: str = "numpy") -> None:
        path = Path(path)
        folder, index = (path.parent, path) if path.is_file() else (path, path / INDEX_NAME)
        if index.is_file():
            weight_map, index_meta = read_index(index)
            files = list(dict.fromkeys(weight_map.values()))
        else:
            weight_map, index_meta = None, {}
            files = sorted(p.name for p in folder.glob("*.safetensors"))
            if not files:
                raise FormatError(folder, None, "no model.safetensors.index.json and no .safetensors files")
        shards = [folder / f for f in files]
        self._assemble(folder, index, files, shards, weight_map, index_meta, read_config(folder), framework)

    @classmethod
    def from_index(
        cls,
        index: Openable,
        weight_map: dict[str, str],
        index_meta: dict[str, Any],
        config: dict[str, Any] | None,
        *,
        framework: str = "numpy",
    ) -> SafetensorsCheckpoint:
        """The checkpoint a remote index describes (its shards are the index's siblings)."""
        files = list(dict.fromkeys(weight_map.values()))
        model = cls.__new__(cls)
        shards = [index.with_name(f) for f in files]
        model._assemble(index.display, index.display, files, shards, weight_map, index_meta, config, framework)
        return model

    def _assemble(
        self,
        path: Path | str,
        index: Path | str,
        files: list[str],
        shards: list[Path] | list[Openable],
        weight_map: dict[str, str] | None,
        index_meta: dict[str, Any],
        config: dict[str, Any] | None,
        framework: str,
    ) -> None:
        """Open the shards (`files` by name, `shards` where they are) and gather their tensors."""
        self.config = config
        self.files = files
        self.shards: list[SafetensorsFile] = []
        try:
            self.shards = [SafetensorsFile(shard, framework=framework) for shard in shards]
            tensors = self._tensors(index, weight_map)
        except BaseException:
            self.close()
            raise
        self.framework = framework
        metadata = {**self.shards[0].metadata, **{k: str(v) for k, v in index_meta.items()}}
        super().__init__(path, MappingProxyType(metadata), tensors)

    def _tensors(self, index: Path | str, weight_map: dict[str, str] | None) -> dict[str, TensorInfo]:
        found: dict[str, TensorInfo] = {}
        for i, shard in enumerate(self.shards):
            for name, info in shard.tensors.items():
                if weight_map is None and name in found:
                    raise FormatError(shard.path, None, f"tensor {name!r} is also in {self.files[found[name].shard]}")
                if weight_map is None or weight_map.get(name) == self.files[i]:
                    found[name] = TensorInfo(name, info.dtype, info.shape, info.offset, info.nbytes, i)
        if weight_map is not None:
            for name, file in weight_map.items():
                if name not in found:
                    raise FormatError(index, None, f"the index puts tensor {name!r} in {file}, which lacks it")
            found = {name: found[name] for name in weight_map}
        return found


def plan_shards(tensors: list[SafetensorsTensor], max_shard_bytes: int) -> list[list[SafetensorsTensor]]:
    """Group tensors in order, as huggingface_hub does: a new shard when the next tensor would overflow
    the current one; a tensor larger than the limit gets a shard of its own."""
    shards: list[list[SafetensorsTensor]] = []
    size = 0
    for t in tensors:
        if not shards or (shards[-1] and size + t.nbytes > max_shard_bytes):
            shards.append([])
            size = 0
        shards[-1].append(t)
        size += t.nbytes
    return shards or [[]]


def write_checkpoint(
    folder: str | os.PathLike[str],
    tensors: Mapping[str, DataSource] | Iterable[SafetensorsTensor],
    metadata: Mapping[str, str] | None = None,
    *,
    max_shard_bytes: int = 5 * 10**9,
) -> list[Path]:
    """Write `model-0000i-of-0000n.safetensors` shards and `model.safetensors.index.json` into `folder`
    (one shard: just `model.safetensors`, as save_pretrained does). Returns the files written."""
    try:
        max_shard_bytes = operator.index(max_shard_bytes)
    except TypeError:
        raise ArgumentTypeError(f"max_shard_bytes is a number of bytes, not {max_shard_bytes!r}") from None
    shards = plan_shards(described(tensors), max_shard_bytes)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if len(shards) == 1:
        write_safetensors(folder / SINGLE_NAME, shards[0], metadata)
        return [folder / SINGLE_NAME]
    names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    for name, shard in zip(names, shards, strict=True):
        write_safetensors(folder / name, shard, metadata)
    index = {
        "metadata": {"total_size": sum(t.nbytes for shard in shards for t in shard)},
        "weight_map": {t.name: name for name, shard in zip(names, shards, strict=True) for t in shard},
    }
    with atomic_write(folder / INDEX_NAME) as f:  # last: an index never points at a missing shard
        f.write((json.dumps(index, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return [folder / n for n in names] + [folder / INDEX_NAME]
