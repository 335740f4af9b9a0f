"""llama.cpp's importance matrices, in both of the formats llama-quantize reads (`common_imatrix_load`).

- GGUF (llama-imatrix's default since 2025): per weight, `<name>.in_sum2` (sums of squared activations,
  one row per matrix: experts have several) and `<name>.counts` (tokens seen per matrix); the weights are
  the sums over the counts rounded to integers, or 1 for a matrix no token reached.
- Legacy `.dat`: int32 entry count; per entry int32 name length, the name, int32 `ncall`, int32 value
  count, float32 values; then optionally the chunk count and dataset name. The values are sums already
  divided by tokens and multiplied by `ncall`, so the weights are the values over `ncall` (as they are
  when `ncall` is not positive).

Either way the file may say which datasets and how many chunks made it; llama-quantize records that, the
file's name and the number of entries in the model it writes (`ImportanceMatrix.provenance`).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Mapping

import numpy as np

from .._io import ByteSource
from ..errors import ArgumentError, FormatError
from ..gguf import GGUFValueType, Value
from ..gguf.file import GGUFFile

_I32 = struct.Struct("<i")
_GGUF_MAGIC = b"GGUF"
_MAX_STRING = 127  # llama-quantize copies strings into char[128] fields


class ImportanceMatrix(dict):
    """Importance weights per weight matrix name (float32, one row per matrix: experts have several), and
    what the file said about how they were made."""

    def __init__(self, weights: Mapping[str, np.ndarray], datasets: Iterable[str] = (), chunk_count: int = 0):
        super().__init__(weights)
        self.datasets = list(datasets)
        self.chunk_count = chunk_count

    def select(self, include: Iterable[str] = (), exclude: Iterable[str] = ()) -> ImportanceMatrix:
        """llama-quantize's --exclude-weights / --include-weights: drop the entries whose name contains one
        of `exclude`, or keep only those that contain one of `include` (not both)."""
        include, exclude = list(include), list(exclude)
        if include and exclude:
            raise ArgumentError("--include-weights and --exclude-weights cannot be used together")
        kept = {
            name: w
            for name, w in self.items()
            if not any(e in name for e in exclude) and (not include or any(i in name for i in include))
        }
        return ImportanceMatrix(kept, self.datasets, self.chunk_count)

    def provenance(self, path: str | os.PathLike[str]) -> list[tuple[str, Value]]:
        """The keys llama-quantize adds to a model made with this matrix, in its order: the file as named,
        the first dataset, the number of entries, the number of chunks (strings cut to 127 bytes)."""
        keys = [("quantize.imatrix.file", _c_string(os.fsencode(path)))]
        if self.datasets:
            keys.append(("quantize.imatrix.dataset", _c_string(self.datasets[0].encode("utf-8", "surrogateescape"))))
        keys.append(("quantize.imatrix.entries_count", Value(len(self), GGUFValueType.UINT32)))
        if self.chunk_count > 0:
            keys.append(("quantize.imatrix.chunks_count", Value(self.chunk_count, GGUFValueType.UINT32)))
        return keys


def _c_string(raw: bytes) -> Value:
    return Value(raw[:_MAX_STRING].decode("utf-8", "surrogateescape"), GGUFValueType.STRING)


def read_imatrix(path: str | os.PathLike[str]) -> ImportanceMatrix:
    """The importance matrix of a llama.cpp imatrix file in either format."""
    with open(path, "rb") as f:
        magic = f.read(4)
    return _read_gguf(path) if magic == _GGUF_MAGIC else _read_legacy(path)


def _read_gguf(path: str | os.PathLike[str]) -> ImportanceMatrix:
    with GGUFFile(path) as f:
        out = {}
        for key, info in f.tensors.items():
            if not key.endswith(".in_sum2"):
                continue
            name = key[: -len(".in_sum2")]
            counts_key = name + ".counts"
            if counts_key not in f.tensors:
                raise FormatError(path, info.offset, f"imatrix entry {name!r} has no {counts_key!r}")
            sums = f.tensor(key, np.float32).reshape(-1, info.shape[-1])
            counts = f.tensor(counts_key, np.float32).reshape(-1)
            if counts.size != sums.shape[0]:
                raise FormatError(path, info.offset, f"imatrix {name!r}: {sums.shape[0]} rows, {counts.size} counts")
            counts = (np.sign(counts) * np.floor(np.abs(counts) + 0.5)).astype(np.float32)  # C's lround
            with np.errstate(divide="ignore", invalid="ignore"):
                out[name] = np.where(counts[:, None] > 0, sums / counts[:, None], np.float32(1)).astype(np.float32)
        if not out:
            raise FormatError(path, None, "no '<tensor>.in_sum2' entries: not a llama.cpp imatrix GGUF")
        datasets = f.metadata.get("imatrix.datasets", [])
        chunks = f.metadata.get("imatrix.chunk_count", 0)
        return ImportanceMatrix(
            out,
            [d for d in datasets if isinstance(d, str)] if isinstance(datasets, list) else [],
            chunks if isinstance(chunks, int) and not isinstance(chunks, bool) else 0,
        )


def _read_legacy(path: str | os.PathLike[str]) -> ImportanceMatrix:
    src = ByteSource(path)
    (n_entries,) = src.unpack(_I32, 0, "the imatrix entry count")
    if n_entries < 1:
        raise src.error(0, f"{n_entries} entries: neither a GGUF nor a legacy llama.cpp imatrix file")
    out: dict[str, np.ndarray] = {}
    pos = 4
    for i in range(n_entries):
        (length,) = src.unpack(_I32, pos, f"the name length of imatrix entry {i}")
        if length < 0:
            raise src.error(pos, f"imatrix entry {i}: name length {length}")
        name = src.bytes(pos + 4, length, f"the name of imatrix entry {i}").split(b"\0")[0]
        pos += 4 + length
        ncall, nval = src.unpack(struct.Struct("<ii"), pos, f"the counts of imatrix entry {i}")
        if nval < 1:
            raise src.error(pos + 4, f"imatrix entry {i}: {nval} values")
        values = src.array(pos + 8, np.dtype("<f4"), nval, f"the values of imatrix entry {i}")
        pos += 8 + 4 * nval
        weights = values.astype(np.float32)
        if ncall > 0:
            weights /= np.float32(ncall)
        out[name.decode("utf-8", "surrogateescape")] = weights.reshape(1, -1)
    return ImportanceMatrix(out, *_legacy_trailer(src, pos))


def _legacy_trailer(src: ByteSource, pos: int) -> tuple[list[str], int]:
    """The optional chunk count and dataset name after the entries; what is cut short is left out."""
    if pos + 4 > src.size:
        return [], 0
    (chunks,) = src.unpack(_I32, pos, "the chunk count")
    if pos + 8 > src.size:
        return [], chunks
    (length,) = src.unpack(_I32, pos + 4, "the dataset name length")
    if length <= 0 or pos + 8 + length > src.size:
        return [], chunks
    name = src.bytes(pos + 8, length, "the dataset name").split(b"\0")[0]
    return [name.decode("utf-8", "surrogateescape")], chunks
