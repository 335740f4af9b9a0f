"""What gguf-py (llama.cpp's own Python reader) sees in a file, in a shape easy to compare with weightkit."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import gguf
import numpy as np

from weightkit.gguf import GGUFValueType, Value


def gguf_py_view(path: Path | gguf.GGUFReader) -> tuple[dict, list]:
    """(key -> (types, value), [(name, type id, numpy shape, absolute offset, nbytes)]) per gguf-py."""
    r = path if isinstance(path, gguf.GGUFReader) else gguf.GGUFReader(path)
    metadata = {}
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        types = tuple(GGUFValueType(int(t)) for t in field.types)
        metadata[key] = (types, field.contents())
    tensors = [
        (t.name, int(t.tensor_type), tuple(int(d) for d in reversed(t.shape)), int(t.data_offset), int(t.n_bytes))
        for t in r.tensors
    ]
    return metadata, tensors


def same_value(ours: Value, types: tuple, theirs) -> bool:
    """Does weightkit's typed value equal what gguf-py read (type tags and contents)?"""
    if ours.type != types[0]:
        return False
    if ours.type != GGUFValueType.ARRAY:
        if isinstance(ours.value, float):
            return np.float64(ours.value).tobytes() == np.float64(theirs).tobytes() or ours.value == theirs
        return ours.value == theirs
    if len(types) == 1:  # gguf-py records no element type for an empty array
        return len(ours.value) == 0 and len(theirs) == 0
    if ours.element != types[1]:
        return False
    if ours.element == GGUFValueType.ARRAY:  # gguf-py flattens nested arrays
        return list(theirs) == array_items(ours)
    if ours.element == GGUFValueType.STRING:
        return list(ours.value) == list(theirs)
    return np.array_equal(np.asarray(ours.value), np.asarray(theirs), equal_nan=True)


RECORDED_ITEMS = 64  # a recording keeps an array of more items as its length and items_sha256


def array_items(ours: Value) -> list:
    """A weightkit array's items as gguf-py's `contents()` lists them: Python values, nested arrays flattened."""
    if ours.element == GGUFValueType.ARRAY:
        return [x for inner in ours.value for x in array_items(inner)]
    return ours.value.tolist() if isinstance(ours.value, np.ndarray) else list(ours.value)


def items_sha256(items: list) -> str:
    """The SHA-256 of an array's items (Python str, int, float, bool) in one canonical encoding: the UTF-8 bytes of
    their JSON list, `json.dumps(items, ensure_ascii=False, separators=(",", ":"))`; a float is written as its
    shortest round-trip repr (float32 values exactly), NaN and infinities as NaN, Infinity, -Infinity."""
    text = json.dumps(list(items), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def recorded_value(types: tuple, contents) -> dict:
    """gguf-py's view of one key (`gguf_py_view`) as a recording keeps it: the type ids, and the contents, or for
    an array of more than RECORDED_ITEMS items their number and items_sha256."""
    entry: dict = {"types": [int(t) for t in types]}
    if isinstance(contents, list) and len(contents) > RECORDED_ITEMS:
        entry.update(len=len(contents), sha256=items_sha256(contents))
    else:
        entry["contents"] = contents
    return entry


def same_as_recorded(ours: Value, entry: dict) -> bool:
    """Does weightkit's typed value equal gguf-py's, as `recorded_value` kept it?"""
    types = tuple(GGUFValueType(t) for t in entry["types"])
    if "contents" in entry:
        return same_value(ours, types, entry["contents"])
    if (ours.type, ours.element) != types[:2]:
        return False
    items = array_items(ours)
    return len(items) == entry["len"] and items_sha256(items) == entry["sha256"]
