"""The inputs of gguf-py's tests/test_quants.py `do_test`, seeded and smaller, shared by tests/gguf/test_quants.py
and tests/data/make_gguf_py_quants.py, which records ggml's outputs for them."""

from __future__ import annotations

import hashlib

import numpy as np

from weightkit.dtypes import GGMLType, ggml_type

SHAPE = (2, 4, 1024)
SEED = 20240917


def upstream_inputs(qtype: GGMLType) -> tuple[np.ndarray, np.ndarray]:
    """`do_test`'s inputs: float32 normal values with a zero row, and random float16 values laid out as the
    bytes of (2, 4, 512) values of the type, whose bytes are then read as (2, 4, 1024) values of it."""
    rng = np.random.RandomState(SEED)
    values = rng.randn(*SHAPE).astype(np.float32)
    values[0, 0, :] = 0
    info = ggml_type(qtype)
    noise = rng.random_sample((*SHAPE[:-1], SHAPE[-1] // 2 // info.block_size * info.type_size))
    return values, noise.astype(np.float16).view(np.uint8)


def sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
