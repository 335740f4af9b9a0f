"""Dequantize and quantize every GGML tensor type: pure functions over numpy arrays, no file I/O.

Each family of types lives in its own module and exports two tables, `DEQUANTIZERS` and `QUANTIZERS`,
of block kernels; this module checks the arguments, splits the work into cache-sized chunks and runs them
on a thread pool (numpy releases the GIL), so callers get one entry point for every type.

Kernel contracts:
- dequantizer `(blocks, out) -> None`: `blocks` is uint8 `(n_blocks, type_size)`, `out` float32
  `(n_blocks, block_size)` to fill.
- quantizer `(x, imatrix) -> uint8 (n_rows, row_bytes)`: `x` float32 `(n_rows, n_per_row)`, `imatrix` None or
  float32 `(n_per_row,)`. Rows are the unit because ggml's importance-weighted paths use row statistics.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dtypes import GGMLType, GGMLTypeInfo, ggml_type
from ..errors import UnsupportedError
from . import fp4, iquants, kquants, legacy, plain, ternary
from ._parallel import map_chunks, workers

Dequantizer = Callable[[np.ndarray, np.ndarray], None]
Quantizer = Callable[[np.ndarray, "np.ndarray | None"], np.ndarray]

DEQUANTIZERS: dict[GGMLType, Dequantizer] = {}
QUANTIZERS: dict[GGMLType, Quantizer] = {}
for _family in (plain, legacy, kquants, ternary, fp4, iquants):
    DEQUANTIZERS.update(_family.DEQUANTIZERS)
    QUANTIZERS.update(_family.QUANTIZERS)

# Elements handled per task. Each kernel makes a few dozen numpy calls per chunk, and threads only
# overlap inside those calls (numpy releases the GIL there): chunks must be large enough that the calls
# dominate the hand-offs. Measured on 2 cores: 64K-element chunks made two threads slower than one;
# 1M-element chunks run 1.3-2x faster than one thread. The working set stays bounded by the chunk.
CHUNK_ELEMENTS = 1 << 20

__all__ = ["DEQUANTIZERS", "QUANTIZERS", "can_dequantize", "can_quantize", "dequantize", "quantize"]


def can_dequantize(qtype: GGMLType | int | str) -> bool:
    return ggml_type(qtype).type in DEQUANTIZERS


def can_quantize(qtype: GGMLType | int | str) -> bool:
    return ggml_type(qtype).type in QUANTIZERS


def _check_row_length(info: GGMLTypeInfo, n_per_row: int) -> None:
    if info.removed:
        raise UnsupportedError(f"GGML type {info.name} was removed from ggml")
    if n_per_row % info.block_size:
        raise ValueError(
            f"{info.name} stores rows in blocks of {info.block_size} elements; "
            f"a row of {n_per_row} is not a multiple of that"
        )


# Below this many elements a task is not worth handing to another thread.
MIN_TASK_ELEMENTS = 1 << 16


def _step(n_units: int, per_chunk: int, per_min: int) -> int:
    """Units per task: at most a chunk, few enough that every worker gets a share, but not tiny."""
    return max(1, per_min, min(per_chunk, -(-n_units // workers())))


def dequantize(raw: np.ndarray | bytes | memoryview, qtype: GGMLType | int | str, shape) -> np.ndarray:
    """Decode `raw` (the bytes of one tensor of GGML type `qtype`) to a float32 array of `shape`.

    `shape` is in numpy order (outermost first); the last axis is the row, whose length must be a
    multiple of the type's block size. Results are bit-identical to ggml's `to_float`.
    """
    info = ggml_type(qtype)
    shape = tuple(int(d) for d in (shape if np.ndim(shape) else (shape,)))
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    _check_row_length(info, shape[-1] if shape else 1)
    kernel = DEQUANTIZERS.get(info.type)
    if kernel is None:
        raise UnsupportedError(f"dequantizing {info.name} is not supported yet")
    data = raw.reshape(-1).view(np.uint8) if isinstance(raw, np.ndarray) else np.frombuffer(raw, dtype=np.uint8)
    if data.size != info.nbytes(n):
        raise ValueError(
            f"{info.name} tensor of shape {shape} takes {info.nbytes(n)} bytes, but {data.size} were given"
        )
    out = np.empty(shape, dtype=np.float32)
    n_blocks = n // info.block_size
    blocks = data.reshape(n_blocks, info.type_size)
    out_blocks = out.reshape(n_blocks, info.block_size)
    step = _step(n_blocks, CHUNK_ELEMENTS // info.block_size, MIN_TASK_ELEMENTS // info.block_size)

    def run(start: int) -> None:
        kernel(blocks[start : start + step], out_blocks[start : start + step])

    map_chunks(run, range(0, n_blocks, step))
    return out


def quantize(x: np.ndarray, qtype: GGMLType | int | str, imatrix: np.ndarray | None = None) -> np.ndarray:
    """Encode `x` (rows along the last axis) as GGML type `qtype`; returns the bytes ggml would write.

    `imatrix` holds one importance weight per column (llama.cpp's imatrix); types whose ggml quantizer
    takes one follow ggml's weighted path when it is given.
    """
    info = ggml_type(qtype)
    x = np.asarray(x)
    if x.ndim == 0:
        x = x.reshape(1)
    n_per_row = x.shape[-1]
    _check_row_length(info, n_per_row)
    kernel = QUANTIZERS.get(info.type)
    if kernel is None:
        raise UnsupportedError(f"quantizing to {info.name} is not supported yet")
    rows = np.ascontiguousarray(x.reshape(-1, n_per_row), dtype=np.float32)
    if imatrix is not None:
        imatrix = np.ascontiguousarray(imatrix, dtype=np.float32).reshape(-1)
        if imatrix.size != n_per_row:
            raise ValueError(f"the importance matrix has {imatrix.size} values; rows have {n_per_row}")
    row_bytes = info.nbytes(n_per_row)
    out = np.empty((rows.shape[0], row_bytes), dtype=np.uint8)
    step = _step(rows.shape[0], CHUNK_ELEMENTS // max(n_per_row, 1), MIN_TASK_ELEMENTS // max(n_per_row, 1))

    def run(start: int) -> None:
        out[start : start + step] = kernel(rows[start : start + step], imatrix)

    map_chunks(run, range(0, rows.shape[0], step))
    return out.reshape(-1)
