"""llama.cpp's importance matrices, in both of the formats llama-quantize reads (`common_imatrix_load`).

- GGUF (llama-imatrix's default since 2025): per weight, `<name>.in_sum2` (sums of squared activations,
  one row per matrix: experts have several) and `<name>.counts` (tokens seen per matrix); the weights are
  the sums over the counts rounded to integers, or 1 for a matrix no token reached.
- Legacy `.dat`: int32 entry count; per entry int32 name length, the name, int32 `ncall`, int32 value
  count, float32 values; then optionally the chunk count and dataset name. The values are sums already
  divided by tokens and multiplied by `ncall`, so the weights are the values over `ncall` (as they are
  when `ncall` is not positive).
"""

from __future__ import annotations

import os
import struct

import numpy as np

from .._io import ByteSource
from ..errors import FormatError
from ..gguf.file import GGUFFile

_I32 = struct.Struct("<i")
_GGUF_MAGIC = b"GGUF"


def read_imatrix(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Importance weights per weight matrix name: float32, one row per matrix (experts have several)."""
    with open(path, "rb") as f:
        magic = f.read(4)
    return _read_gguf(path) if magic == _GGUF_MAGIC else _read_legacy(path)


def _read_gguf(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
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
        return out


def _read_legacy(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
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
    return out
