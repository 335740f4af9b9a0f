"""ggml's block layouts: the fields of a block (float16 scales, packed codes, bit planes) read and written.

Dequantizers read fields with `half`, `block_bytes` and `bitfields`, then turn codes into values with
`group_scales` and `scale_codes_into`; quantizers write them with `to_half`, `packfields` and `assemble`.
These helpers exist for speed: numpy is slow on many short rows, so they move whole byte runs as opaque
items and keep ufunc loops long.
"""

from __future__ import annotations

import functools

import numpy as np

from ._parallel import Scratch, readonly


def half(blocks: np.ndarray, offset: int, count: int = 1) -> np.ndarray:
    """`count` float16 values at byte `offset` of every block, widened to float32: (n_blocks, count)."""
    return blocks[:, offset : offset + 2 * count].view(np.float16).astype(np.float32)


def to_half(v: np.ndarray) -> np.ndarray:
    """`GGML_FP32_TO_FP16` (round to nearest even) of every value, as raw bytes: shape (..., 2) uint8."""
    return np.asarray(v, dtype=np.float32).astype(np.float16)[..., None].view(np.uint8)


def group_scales(d: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Super-block scales d (n, k) times integer sub-block scale codes (n, k, G): float32 (n, k, G)."""
    return np.multiply(d[:, :, None], codes, dtype=np.float32)


_BYTE_LANES = 0x0101010101010101


@functools.cache
def _word_shifts(shifts: tuple[int, ...]) -> np.ndarray:
    return readonly(np.array(shifts, dtype=np.uint64)[:, None])


def bitfields(data: np.ndarray, shifts: tuple[int, ...], mask: int, to: int = 0, *, scratch: Scratch) -> np.ndarray:
    """Unpack codes: bytes (..., L) to (..., len(shifts), L) uint8, field i = ((byte >> shifts[i]) & mask) << to.

    This is how ggml lays codes out (nibbles, 2-bit fields, bit planes of one byte run go to consecutive
    runs of values). Works 8 bytes at a time with every field in one long ufunc loop, then interleaves the
    runs by moving them as opaque L-byte items: numpy is slow on many short rows (and on uint8 left shifts),
    fast on long ones. L must be a multiple of 8.
    The result is an array of the caller's block `scratch`, valid while that block is open; the temporaries
    come from a block of this call's own.
    """
    run, k = data.shape[-1], len(shifts)
    item = np.dtype((np.void, run))
    items = data.view(item)
    n_items = items.size
    runs = scratch.empty((*data.shape[:-1], k, run), np.uint8)
    with Scratch() as tmp:
        if items.flags.c_contiguous:
            words = items.view(np.uint64).reshape(-1)
        else:
            words = tmp.empty((n_items * run // 8,), np.uint64)
            np.copyto(words.view(item).reshape(items.shape), items)
        fields = tmp.empty((k, words.size), np.uint64)
        np.right_shift(words, _word_shifts(shifts), out=fields)
        fields &= np.uint64(mask * _BYTE_LANES)
        if to:
            fields <<= np.uint64(to)
        _transpose_items(fields.view(item).reshape(k, n_items), runs.view(item).reshape(n_items, k).T)
    return runs


def _transpose_items(src: np.ndarray, dst: np.ndarray) -> None:
    """dst[i] = src[i] for each of the k rows of two (k, n) arrays of opaque items, one row at a time.

    One copy of the whole (k, n) <-> (n, k) transposition walks the memory-order side in rows of k items,
    and numpy pays for every short row: k long loops are faster, even for k = 2.
    """
    for i in range(len(src)):
        np.copyto(dst[i], src[i])


def packfields(codes: np.ndarray, shifts: tuple[int, ...]) -> np.ndarray:
    """Inverse of `bitfields`: (..., k, L) codes to (..., L) bytes, OR of codes[..., i, :] << shifts[i].

    Codes must fit their field (no carry into the next byte); L must be a multiple of 8.
    """
    k, run = codes.shape[-2:]
    item = np.dtype((np.void, run))
    fields = np.ascontiguousarray(codes).reshape(-1, k, run).view(item)[..., 0]
    words = np.empty((k, len(fields) * run // 8), np.uint64)
    _transpose_items(fields.T, words.view(item))
    packed = words[0] << np.uint64(shifts[0])
    for i in range(1, k):
        packed |= words[i] << np.uint64(shifts[i])
    return packed.view(np.uint8).reshape(*codes.shape[:-2], run)


def block_bytes(fields: np.ndarray) -> np.ndarray:
    """A contiguous copy of a few bytes of every block (a strided (n, k) slice of uint8 blocks).

    Moved as one k-byte item per block in a single long loop: np.ascontiguousarray copies each block's k
    bytes as a short row of its own, which is far slower.
    """
    if fields.strides[-1] != 1:  # not a slice of blocks: the bytes must be gathered one by one anyway
        return np.ascontiguousarray(fields)
    item = np.dtype((np.void, fields.shape[-1]))
    out = np.empty(fields.shape, np.uint8)
    np.copyto(out.view(item)[:, 0], fields.view(item)[:, 0])
    return out


def _items(a: np.ndarray) -> np.ndarray:
    """View each row's bytes as one opaque item: moves of whole rows then run in one long loop."""
    rows = np.ascontiguousarray(a).reshape(len(a), -1).view(np.uint8)
    return rows.view(np.dtype((np.void, rows.shape[1])))[:, 0]


def assemble(n_rows: int, *parts: np.ndarray) -> np.ndarray:
    """Lay per-block fields (any dtype, first axis = block) side by side into `n_rows` rows of ggml blocks."""
    items = [_items(p) for p in parts]
    sizes = [i.dtype.itemsize for i in items]
    out = np.empty((len(items[0]), sum(sizes)), np.uint8)
    offset = 0
    for item, size in zip(items, sizes, strict=True):
        out[:, offset : offset + size].view(item.dtype)[:, 0] = item
        offset += size
    return out.reshape(n_rows, -1)


def scale_codes_into(out: np.ndarray, codes: np.ndarray, scales: np.ndarray, sign: int = 1) -> None:
    """out = codes * scale + sign * shift, one scale (and shift) per equal group of values of each block.

    `out` float32 (n_blocks, block_size); `codes` any integer array (or strided view) whose elements in
    C order are the output's; `scales` float32 (n_blocks, 1, n_groups) of scales, or (n_blocks, 2,
    n_groups) of scales then shifts; (n_blocks, k) means one group per block.
    The product is rounded before the add, as ggml's `d * q + m` / `d * q - m` are (no fused
    multiply-add in its generic code). The codes are cast straight into `out` (a strided view costs no
    temporary) and the scales broadcast over their groups: materializing them (np.repeat) costs a pass
    and holds the GIL, so the pool's threads would not overlap.
    """
    if scales.ndim == 2:
        scales = scales[:, :, None]
    np.copyto(out.reshape(codes.shape), codes)
    groups = out.reshape(out.shape[0], scales.shape[2], -1)
    groups *= scales[:, 0, :, None]
    if scales.shape[1] == 2:
        (np.add if sign > 0 else np.subtract)(groups, scales[:, 1, :, None], out=groups)
