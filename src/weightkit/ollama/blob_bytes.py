"""The bytes of a tensor blob as `ollama create` writes them, so a blob's digest is Ollama's.

A blob made without MLX (tensors copied, relabelled or stacked) is Go's packed safetensors
(x/safetensors.BuildPackedSafetensorsReaderWithMetadata): the header is `encoding/json`'s map (keys sorted,
`<`, `>` and `&` escaped, each tensor's fields in the order dtype, shape, data_offsets), padded with spaces to
8 bytes, the data in the order given. A blob that passed through MLX (quantized, or decoded from FP8) is MLX's
`save_safetensors` of a `std::unordered_map` filled in sorted order (x/mlxrunner/mlx.SaveSafetensorsWithMetadata):
nlohmann's JSON (keys sorted, `__metadata__` null when empty), no padding, and the data in the map's iteration
order, which is libstdc++'s (Linux; Ollama on macOS builds against libc++, whose order differs).
"""

from __future__ import annotations

import bisect
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BlobTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    data: Any  # bytes-like of exactly the tensor's size


def go_packed_header(tensors: Sequence[BlobTensor], metadata: Mapping[str, str] | None) -> bytes:
    """The 8-byte length and header of Go's packed blob; its data follows in `tensors`' order."""
    header: dict[str, Any] = {}
    offset = 0
    for t in tensors:
        size = memoryview(t.data).nbytes
        header[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    if metadata:
        header["__metadata__"] = dict(sorted(metadata.items()))
    text = json.dumps(dict(sorted(header.items())), separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                         ("\u2029", "\\u2029")):  # fmt: skip
        text = text.replace(raw, escaped)
    data = text.encode()
    data += b" " * (-len(data) % 8)
    return struct.pack("<Q", len(data)) + data


def mlx_blob(arrays: Mapping[str, BlobTensor], metadata: Mapping[str, str] | None) -> tuple[bytes, list[BlobTensor]]:
    """MLX's header for `arrays` and the order their data follows it in."""
    ordered = [arrays[name] for name in unordered_map_order(sorted(arrays))]
    header: dict[str, Any] = {"__metadata__": dict(sorted(metadata.items())) if metadata else None}
    offset = 0
    for t in ordered:
        size = memoryview(t.data).nbytes
        header[t.name] = {"data_offsets": [offset, offset + size], "dtype": t.dtype, "shape": list(t.shape)}
        offset += size
    text = json.dumps(dict(sorted(header.items())), separators=(",", ":"), ensure_ascii=False).encode()
    return struct.pack("<Q", len(text)) + text, ordered


# libstdc++'s std::unordered_map<std::string, T>: std::hash is _Hash_bytes (a 64-bit Murmur variant) with
# its seed, the bucket counts come from _Prime_rehash_policy (first insertion: 13 buckets; then the next
# listed prime past twice the count), and a node goes first in its bucket, or first in the whole list when
# its bucket was empty. Checked against MLX's own save_safetensors for key sets up to 300 (tests/ollama).
_MASK = (1 << 64) - 1
_MUL = (0xC6A4A793 << 32) + 0x5BD1E995
_SEED = 0xC70F6907
_FAST_BUCKETS = (2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13)
_PRIMES = (
    2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 103, 109, 113,
    127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313, 337, 359, 383, 409, 439, 467,
    503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109,
)  # fmt: skip


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def stdlib_hash(key: str) -> int:
    """libstdc++'s std::hash<std::string> on 64-bit Linux."""
    b = key.encode()
    h = _SEED ^ (len(b) * _MUL & _MASK)
    whole = len(b) & ~7
    for i in range(0, whole, 8):
        h = (h ^ (_shift_mix(int.from_bytes(b[i : i + 8], "little") * _MUL & _MASK) * _MUL & _MASK)) * _MUL & _MASK
    if len(b) & 7:
        h = (h ^ int.from_bytes(b[whole:], "little")) * _MUL & _MASK
    return _shift_mix(_shift_mix(h) * _MUL & _MASK)


def _next_buckets(n: int) -> int:
    if n < len(_FAST_BUCKETS):
        return _FAST_BUCKETS[n]
    i = bisect.bisect_left(_PRIMES, n, 6)
    if i == len(_PRIMES):
        raise ValueError(f"a blob of more than {_PRIMES[-1]} arrays")
    return _PRIMES[i]


def unordered_map_order(keys: Sequence[str]) -> list[str]:
    """The iteration order of a libstdc++ unordered_map after inserting `keys` in this order."""
    n_buckets, next_resize = 1, 0
    nodes: list[tuple[str, int]] = []  # the node list, each bucket's nodes together

    def insert(nodes: list[tuple[str, int]], key: str, h: int) -> None:
        b = h % n_buckets
        at = next((i for i, (_, other) in enumerate(nodes) if other % n_buckets == b), 0)
        nodes.insert(at, (key, h))

    for key in keys:
        h = stdlib_hash(key)
        if len(nodes) + 1 > next_resize:
            wanted = max(len(nodes) + 1, 0 if next_resize else 11)
            if wanted >= n_buckets:
                n_buckets = next_resize = _next_buckets(max(wanted + 1, n_buckets * 2))
                rehashed: list[tuple[str, int]] = []
                for old_key, old_h in nodes:
                    insert(rehashed, old_key, old_h)
                nodes = rehashed
            else:
                next_resize = n_buckets
        insert(nodes, key, h)
    return [key for key, _ in nodes]
