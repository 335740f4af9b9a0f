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

import math
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np

from .._torch import from_torch
from ..dtypes import GGMLType, GGMLTypeInfo, ggml_type
from ..errors import ArgumentError, ArgumentTypeError, UnsupportedError
from . import fp4, iquants, kquants, legacy, plain, ternary
from ._forked import can_fork, fork_map, shared_empty
from ._parallel import Scratch, in_task, map_chunks, workers

RawBytes = np.ndarray | bytes | memoryview
Dequantizer = Callable[[np.ndarray, np.ndarray], None]
Quantizer = Callable[[np.ndarray, "np.ndarray | None"], np.ndarray]

DEQUANTIZERS: dict[GGMLType, Dequantizer] = {}
QUANTIZERS: dict[GGMLType, Quantizer] = {}
for _family in (plain, legacy, kquants, ternary, fp4, iquants):
    DEQUANTIZERS.update(_family.DEQUANTIZERS)
    QUANTIZERS.update(_family.QUANTIZERS)

# Elements per dequantizing task (quantizing: `_quantize_chunk`). Each kernel makes a few dozen numpy
# calls per chunk, and threads only overlap inside those calls (numpy releases the GIL there): chunks must
# be large enough that the calls dominate the hand-offs (much smaller chunks make two threads slower than
# one). The working set stays bounded by the chunk. Measurements: docs/benchmarks.md.
CHUNK_ELEMENTS = 1 << 20

__all__ = [
    "DEQUANTIZERS",
    "QUANTIZERS",
    "can_dequantize",
    "can_quantize",
    "dequantize",
    "dequantize_many",
    "quantize",
    "quantize_rows",
]


def can_dequantize(qtype: GGMLType | int | str) -> bool:
    return ggml_type(qtype).type in DEQUANTIZERS


def can_quantize(qtype: GGMLType | int | str) -> bool:
    return ggml_type(qtype).type in QUANTIZERS


def _check_row_length(info: GGMLTypeInfo, n_per_row: int, argument: str) -> None:
    """Rows (the last axis of `argument`) must be whole blocks of a type ggml still has."""
    if info.removed:
        raise UnsupportedError(f"GGML type {info.name} was removed from ggml")
    if n_per_row % info.block_size:
        raise ArgumentError(
            f"{argument}: {info.name} stores rows in blocks of {info.block_size} elements; "
            f"a row of {n_per_row} is not a multiple of that"
        )


# Below this many elements a task is not worth handing to another thread.
MIN_TASK_ELEMENTS = 1 << 16


def _step(n_units: int, per_chunk: int, per_min: int) -> int:
    """Units per task: at most a chunk, few enough that every worker gets a share, but not tiny."""
    return max(1, per_min, min(per_chunk, -(-n_units // workers())))


def dequantize(raw: RawBytes, qtype: GGMLType | int | str, shape) -> np.ndarray:
    """Decode `raw` (the bytes of one tensor of GGML type `qtype`) to a float32 array of `shape`.

    `shape` is in numpy order (outermost first); the last axis is the row, whose length must be a
    multiple of the type's block size. Results are bit-identical to ggml's `to_float`.
    """
    return dequantize_many([(raw, qtype, shape)])[0]


# Each tensor's place in the shared output starts on a 64-byte line, as a fresh numpy array would.
_ALIGN_ELEMENTS = 16


def dequantize_many(tensors: Iterable[tuple[RawBytes, GGMLType | int | str, Any]]) -> list[np.ndarray]:
    """Decode several tensors, each given as `(raw, qtype, shape)` as for `dequantize`, in one go.

    The results are views into one float32 allocation (freed when the last of them is), and the work is
    one queue of chunks across all the tensors for every core. For a model of many small tensors this is
    much faster than one `dequantize` call each: no per-tensor hand-offs or idle cores, and one large
    allocation page-faults far less than many small ones (numpy asks the kernel for huge pages from 4 MiB).
    Tensors of one type sit side by side in the allocation, so one chunk can decode several small ones.
    """
    jobs = [_dequantize_job(raw, qtype, shape) for raw, qtype, shape in tensors]
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].qtype)
    starts, total = [0] * len(jobs), 0
    for i in order:
        starts[i] = total
        total += -(-jobs[i].n // _ALIGN_ELEMENTS) * _ALIGN_ELEMENTS
    spare = np.empty(total + _ALIGN_ELEMENTS, dtype=np.float32)
    first = -spare.ctypes.data % (4 * _ALIGN_ELEMENTS) // 4  # malloc aligns to 16 bytes only
    arena = spare[first : first + total]
    tasks = []
    for run in _runs([(jobs[i], starts[i]) for i in order]):
        size = run.block_size
        # Each worker's share of all the elements, not of this run's: with many tensors the queue keeps
        # both cores busy, so chunks stay at full size.
        step = _step(-(-total // size), CHUNK_ELEMENTS // size, MIN_TASK_ELEMENTS // size)
        start = run.start
        for chunk in _cut(run.blocks, step):
            end = start + sum(len(blocks) for blocks in chunk) * size
            tasks.append((run.kernel, chunk, arena[start:end].reshape(-1, size)))
            start = end
    map_chunks(_decode, tasks)
    return [arena[start : start + job.n].reshape(job.shape) for job, start in zip(jobs, starts, strict=True)]


class _Run(NamedTuple):
    """Tensors of one type whose outputs follow each other in the allocation with no gap."""

    kernel: Dequantizer
    block_size: int
    blocks: list[np.ndarray]
    start: int


def _runs(placed: list[tuple[_Job, int]]) -> list[_Run]:
    """Group `(job, output start)` pairs, in allocation order, into runs: a new one starts where the type
    changes or alignment left a gap (only types of single-element blocks can leave one)."""
    runs: list[_Run] = []
    qtype, end = None, -1
    for job, start in placed:
        if job.qtype == qtype and start == end:
            runs[-1].blocks.append(job.blocks)
        else:
            runs.append(_Run(job.kernel, job.block_size, [job.blocks], start))
        qtype, end = job.qtype, start + job.n
    return runs


def _cut(tensors: list[np.ndarray], step: int) -> list[list[np.ndarray]]:
    """The blocks of consecutive tensors cut into chunks of `step` blocks; a chunk may span tensors."""
    chunks: list[list[np.ndarray]] = []
    chunk: list[np.ndarray] = []
    room = step
    for blocks in tensors:
        while len(blocks):
            chunk.append(blocks[:room])
            room -= len(chunk[-1])
            blocks = blocks[len(chunk[-1]) :]
            if not room:
                chunks.append(chunk)
                chunk, room = [], step
    if chunk:
        chunks.append(chunk)
    return chunks


def _decode(task: tuple[Dequantizer, list[np.ndarray], np.ndarray]) -> None:
    """Run one chunk. Pieces of several tensors are first copied into one run of blocks: one kernel call
    over them costs far less than one each. A call makes a few dozen numpy calls, and short ones serialize
    the threads on the GIL, so small chunks would not decode faster on two threads than on one."""
    kernel, pieces, out = task
    if len(pieces) == 1:
        kernel(pieces[0], out)
        return
    with Scratch() as scratch:
        blocks = scratch.empty((len(out), pieces[0].shape[1]), np.uint8)
        np.concatenate(pieces, out=blocks)
        kernel(blocks, out)


class _Job(NamedTuple):
    """One tensor to decode: its type, kernel, raw blocks (n_blocks, type_size), shape and sizes."""

    qtype: GGMLType
    kernel: Dequantizer
    blocks: np.ndarray
    shape: tuple[int, ...]
    n: int
    block_size: int


def _dequantize_job(raw: RawBytes, qtype: GGMLType | int | str, shape: Any) -> _Job:
    """The job for one tensor, its arguments checked."""
    info = ggml_type(qtype)
    shape = tuple(int(d) for d in (shape if np.ndim(shape) else (shape,)))
    if any(d < 0 for d in shape):
        raise ArgumentError(f"shape: {shape} has a negative dimension")
    n = math.prod(shape)
    _check_row_length(info, shape[-1] if shape else 1, "shape")
    kernel = DEQUANTIZERS.get(info.type)
    if kernel is None:
        raise UnsupportedError(f"dequantizing {info.name} is not supported yet")
    raw = from_torch(raw)
    data = raw.reshape(-1).view(np.uint8) if isinstance(raw, np.ndarray) else np.frombuffer(raw, dtype=np.uint8)
    if data.size != info.nbytes(n):
        raise ArgumentError(
            f"raw: a {info.name} tensor of shape {shape} takes {info.nbytes(n)} bytes, but {data.size} were given"
        )
    return _Job(info.type, kernel, data.reshape(n // info.block_size, info.type_size), shape, n, info.block_size)


# The quantizers that search (K-quants, IQ types, and every importance-weighted path) carry several
# chunk-sized float32 temporaries through dozens of passes: with a 1M-element chunk per thread those spill
# out of the shared L3 cache, so they take 256K chunks. Plain rounding does best in between (512K).
# Two kinds do better with 1M: the ternary types, and Q3_K without an imatrix, whose refinement makes
# many small numpy calls per chunk whatever its size. Measurements: docs/benchmarks.md.
_SEARCHING = frozenset(iquants.QUANTIZERS) | {GGMLType.Q2_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K}
_FEW_CALLS_MATTER = frozenset(ternary.QUANTIZERS)


def _quantize_chunk(qtype: GGMLType, weighted: bool) -> int:
    """Elements per quantizing task for `qtype` (with an importance matrix when `weighted`)."""
    if qtype in _FEW_CALLS_MATTER or (qtype == GGMLType.Q3_K and not weighted):
        return 1 << 20
    if weighted or qtype in _SEARCHING:
        return 1 << 18
    return 1 << 19


def quantize(x: np.ndarray, qtype: GGMLType | int | str, imatrix: np.ndarray | None = None) -> np.ndarray:
    """Encode `x` (rows along the last axis) as GGML type `qtype`; returns the bytes ggml would write.

    `imatrix` holds one importance weight per column (llama.cpp's imatrix); types whose ggml quantizer
    takes one follow ggml's weighted path when it is given.
    """
    qtype = ggml_type(qtype).type
    x = np.asarray(from_torch(x))
    if x.dtype.kind in "cOSUMm":  # complex, objects, text, dates (ml_dtypes floats are kind V)
        raise ArgumentTypeError(f"x: quantize takes real numbers, not {x.dtype} values")
    if x.ndim == 0:
        x = x.reshape(1)
    rows = x.reshape(-1, x.shape[-1])  # cast to float32 chunk by chunk, on the pool's threads
    return quantize_rows(lambda start, stop: rows[start:stop], rows.shape, qtype, imatrix).reshape(-1)


RowMaker = Callable[[int, int], np.ndarray]


def quantize_rows(
    rows: RowMaker,
    shape: tuple[int, int],
    qtype: GGMLType | int | str,
    imatrix: np.ndarray | None = None,
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """`quantize` of a matrix of `shape` (rows, row length) given by `rows(start, stop)`, which makes rows
    start:stop (real numbers of any float type). Each task, on the pool's threads or in forked processes
    (`_processes`), makes only the rows it encodes, so the matrix is never held whole, and making them
    overlaps the encoding of others. Returns, or fills `out` with, the encoded rows (uint8, one row of bytes
    each)."""
    info = ggml_type(qtype)
    n_rows, n_per_row = shape
    _check_row_length(info, n_per_row, "x")
    kernel = QUANTIZERS.get(info.type)
    if kernel is None:
        raise UnsupportedError(f"quantizing to {info.name} is not supported yet")
    if imatrix is not None:
        imatrix = np.ascontiguousarray(imatrix, dtype=np.float32).reshape(-1)
        if imatrix.size != n_per_row:
            raise ArgumentError(
                f"imatrix: {imatrix.size} values, but rows of x have {n_per_row} (one weight per column)"
            )
    chunk = _quantize_chunk(info.type, imatrix is not None)
    step = _step(n_rows, chunk // max(n_per_row, 1), MIN_TASK_ELEMENTS // max(n_per_row, 1))
    starts = range(0, n_rows, step)
    processes = _processes(info, imatrix is not None, n_rows * n_per_row, len(starts))
    encoded = (n_rows, info.nbytes(n_per_row))
    # forked workers write to shared memory: returned as it is, or copied into the caller's `out`
    into = shared_empty(encoded, np.uint8) if processes > 1 else np.empty(encoded, np.uint8) if out is None else out

    def run(start: int) -> None:
        stop = min(start + step, n_rows)
        values = rows(start, stop)
        direct = plain.DIRECT.get((values.dtype, info.type))
        if direct is not None:
            into[start:stop] = direct(values)
        else:
            into[start:stop] = kernel(plain.as_float32(values), imatrix)

    if processes > 1:
        fork_map(run, starts, processes)
    else:
        map_chunks(run, starts)
    if out is None:
        return into
    if into is not out:
        out[...] = into
    return out


# Searching quantizations (K-quants, i-quants, and any with an importance matrix) of at least this many
# elements run in forked processes where they can (`_processes`).
MIN_FORKED_ELEMENTS = 1 << 22


def _processes(info: GGMLTypeInfo, weighted: bool, n_elements: int, n_tasks: int) -> int:
    """How many processes should encode a matrix: more than one only for a searching quantization large
    enough, and cut into tasks enough, to be worth a fork (milliseconds) per worker, where this system can
    fork. Searching holds the GIL for about a quarter of the time, which only processes overlap; the other
    kernels make few numpy calls per chunk and run as fast on threads, with no copy out of shared memory."""
    n = min(workers(), n_tasks)
    searching = weighted or info.type in _SEARCHING
    if n < 2 or not searching or n_elements < MIN_FORKED_ELEMENTS or in_task() or not can_fork():
        return 1
    return n
