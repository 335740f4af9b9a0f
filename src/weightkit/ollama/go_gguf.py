"""Ollama's fs/ggml as createModel uses it: the KV its decoder holds and that KV's typed readers (which decide
what a GGUF layer is), and its Go GGUF writer (WriteGGUF), which merges a split GGUF that carries compatibility
tensors (copySplitLayerPreservingTensors) and adds a llava projector's default type
(addDefaultLlavaProjectorType), byte for byte as Ollama writes it (recorded by tests/data/make_ollama_split_gguf.go
and make_ollama_projector_gguf.go), or its refusal."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..gguf import GGUFFile, GGUFSplit, GGUFValueType, Value
from ..gguf.constants import KEY_ALIGNMENT, KEY_ARCHITECTURE
from ..gguf.split import SPLIT_KEYS
from ..gguf.writer import encode_value

_T = GGUFValueType
# The value types whose Go type (as fs/ggml's decoder gives it) ggufWriteKV takes; any other is "improper".
_SCALARS = {_T.UINT32, _T.INT32, _T.UINT64, _T.INT64, _T.FLOAT32, _T.BOOL, _T.STRING}
_ELEMENTS = {_T.UINT32, _T.INT32, _T.INT64, _T.FLOAT32, _T.STRING, _T.BOOL}
_KEPT_PREFIXES = ("general.", "adapter.", "tokenizer.")
_GO_MAX_INT = 2**63 - 1
# Go's fmt scanning skips these before a number (isSpace; a newline instead fails the scan).
_GO_SPACES = frozenset("\t\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000").union(map(chr, range(0x2000, 0x200B)))


def _block(name: str) -> int:
    """Tensor.block: fmt.Sscanf(name, "blk.%d.") (spaces skipped, a sign, decimal digits, then a dot), else
    math.MaxInt, so tensors outside blk.N. sort last."""
    if not name.startswith("blk."):
        return _GO_MAX_INT
    i = 4
    while i < len(name) and name[i] in _GO_SPACES:
        i += 1
    j = i + 1 if name[i : i + 1] in ("+", "-") else i
    k = j
    while k < len(name) and "0" <= name[k] <= "9":
        k += 1
    if k == j or name[k : k + 1] != ".":
        return _GO_MAX_INT
    n = int(name[i:k])
    return n if -(2**63) <= n <= _GO_MAX_INT else _GO_MAX_INT


def _shards(model: GGUFFile | GGUFSplit) -> list[GGUFFile]:
    return list(getattr(model, "shards", [model]))


def go_kv(model: GGUFFile | GGUFSplit) -> dict[str, Value]:
    """The KV ggml.Decode holds for `model` (its first shard's): the file's, general.parameter_count set to
    its tensors' element count."""
    first = _shards(model)[0]
    kv = dict(first.metadata.typed_items())
    kv["general.parameter_count"] = Value(sum(t.n_elements for t in first.tensors.values()), _T.UINT64)
    return kv


def go_value(kv: dict[str, Value], key: str, kind: GGUFValueType) -> Any:
    """keyValue: KEY's value (under kv.Architecture() unless a general. or tokenizer. key) when the decoder
    gave it the Go type of `kind`, else None (Go's readers then return their default)."""
    if not key.startswith(("tokenizer.", "general.")):
        key = f"{go_architecture(kv)}.{key}"
    value = kv.get(key)
    return value.value if value is not None and value.type == kind else None


def go_architecture(kv: dict[str, Value]) -> str:
    """kv.Architecture(): general.architecture when a string, else "unknown"."""
    value = kv.get(KEY_ARCHITECTURE)
    return value.value if value is not None and value.type == _T.STRING else "unknown"


def split_merged_kv(model: GGUFSplit) -> dict[str, Value]:
    """The KV copySplitLayerPreservingTensors writes: `go_kv` less the split keys, bare and under the
    architecture (removeSplitMetadata)."""
    kv = go_kv(model)
    arch = go_architecture(kv)
    for key in SPLIT_KEYS:
        kv.pop(key, None)
        kv.pop(f"{arch}.{key}", None)
    return kv


def _encode_kv(path: Path, arch: str, kv: dict[str, Value]) -> list[bytes]:
    """ggufWriteKV over the keys in Go's sorted order: a key outside ARCH., general., adapter. and tokenizer.
    renamed under the architecture, the value with its type tag; a type Go's writer lacks is refused."""
    parts = []
    for key in sorted(kv, key=lambda k: k.encode("utf-8", "surrogateescape")):
        value = kv[key]
        if not key.startswith((f"{arch}.", *_KEPT_PREFIXES)):
            key = f"{arch}.{key}"
        ok = value.type in _SCALARS or (value.type == _T.ARRAY and value.element in _ELEMENTS)
        if not ok:
            raise FormatError(path, None, f"Ollama's GGUF writer refuses it: improper type for '{key}'")
        k = key.encode("utf-8", "surrogateescape")
        parts += [struct.pack("<Q", len(k)), k, struct.pack("<I", value.type), encode_value(value, "<")]
    return parts


def write_go_gguf(model: GGUFFile | GGUFSplit, kv: dict[str, Value], out: Path) -> None:
    """Write `kv` and every shard's tensors of `model` as WriteGGUF writes them: GGUF v3, the keys in Go's
    sorted order, the tensors sorted stably by block number then name, each at the alignment
    (general.alignment when a uint32, else 32) with the gaps left as zeros and none after the last."""
    path = Path(model.path)
    arch = kv.get(KEY_ARCHITECTURE)
    if arch is None or arch.type != _T.STRING or not arch.value:
        raise FormatError(path, None, "Ollama's GGUF writer refuses it: architecture not set")
    tensors = [(shard, t) for shard in _shards(model) for t in shard.tensors.values()]
    tensors.sort(key=lambda st: (_block(st[1].name), st[1].name.encode("utf-8", "surrogateescape")))
    parts = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(kv)), *_encode_kv(path, arch.value, kv)]
    alignment = kv[KEY_ALIGNMENT].value if kv.get(KEY_ALIGNMENT, Value(0, _T.STRING)).type == _T.UINT32 else 32
    offsets, size = [], 0
    for _, t in tensors:
        offsets.append(size)
        name = t.name.encode("utf-8", "surrogateescape")
        dims = tuple(reversed(t.shape))
        parts += [struct.pack("<Q", len(name)), name, struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, t.dtype, size)]
        size += t.nbytes
        size += -size % alignment
    header = b"".join(parts)
    start = len(header) + -len(header) % alignment
    with open(out, "wb") as f:
        f.write(header)
        for (shard, t), offset in zip(tensors, offsets, strict=True):
            if t.nbytes:
                f.seek(start + offset)
                f.write(shard.raw(t.name))
        f.flush()
        os.fsync(f.fileno())
