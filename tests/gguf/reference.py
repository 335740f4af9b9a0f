"""What gguf-py (llama.cpp's own Python reader) sees in a file, in a shape easy to compare with weightkit."""

from __future__ import annotations

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
        flat = [x for inner in ours.value for x in (inner.value.tolist() if isinstance(inner.value, np.ndarray)
                                                    else inner.value)]  # fmt: skip
        return list(theirs) == flat
    if ours.element == GGUFValueType.STRING:
        return list(ours.value) == list(theirs)
    return np.array_equal(np.asarray(ours.value), np.asarray(theirs), equal_nan=True)
