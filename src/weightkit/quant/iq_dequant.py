"""Dequantizers of the IQ types, bit-exact with ggml's `dequantize_row_iq*`.

Every IQ type stores, per group of 4 or 8 weights, a codebook index plus sign bits (or a shift, for
IQ1), and per sub-block a small integer scale. We fold codebook entry and signs into one float32 lookup
table indexed by the packed bits, gather whole rows of it straight into `out` with `np.take`, then
multiply by the per-sub-block scale in place. The tables hold `±grid` (or `grid ± delta`) exactly, and
ggml computes `scale * grid * ±1`, which rounds identically to `scale * (±grid)`; only the sign of a
NaN (from a garbage f16 scale) can differ, and `_flip_nan_signs` patches those blocks.

Each kernel is a handful of whole-array numpy calls: the Python work between calls holds the GIL, so
fewer, larger calls are what lets the thread pool's chunks overlap.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import GGMLType
from ._block_layout import half
from ._gather import gather
from ._scale_search import quiet
from .iq_tables import cached, codebooks, grid_bytes, sign_bits

_F32 = np.float32
_U32_SIGN = np.uint32(0x80000000)
_SHIFT7 = np.array([0, 7, 14, 21])  # where a uint32 packs four 7-bit ksigns_iq2xs indices
_BYTES = np.arange(256)


def _take(table: np.ndarray, idx: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """table[idx] along the first axis, into `out` when given (a C-contiguous view: no temporary)."""
    return gather(table, idx, out, axis=0)


def _flip_nan_signs(table: np.ndarray, idx: np.ndarray, out: np.ndarray, d: np.ndarray) -> None:
    """Give NaN results the sign ggml gives them.

    ggml negates `scale * grid` where a sign bit is set, which also flips the sign of a NaN, while
    `scale * (-grid)` keeps the NaN's sign. Only blocks whose f16 scale `d` is NaN produce NaNs, so
    we patch just those: `out` is the output viewed like `table[idx]`.
    """
    bad = np.isnan(d[:, 0])
    if bad.any():
        bits = out.view(np.uint32)
        bits[bad] ^= _take(table.view(np.uint32), idx[bad]) & _U32_SIGN


def _signed(grid: np.ndarray, negate: np.ndarray) -> np.ndarray:
    """float32 table of grid entries (rows of `grid`) under every sign pattern (rows of `negate`),
    indexed [pattern, entry]."""
    g = grid.astype(_F32)
    return np.where(negate[:, None, :], -g[None], g[None])


def _bits(values: np.ndarray, shifts, width: int) -> np.ndarray:
    """Bit fields: (values[..., None] >> shifts) & (2**width - 1)."""
    return (values[..., None] >> np.asarray(shifts)) & ((1 << width) - 1)


# ----------------------------------------------------------------------------------------- tables
# Codebook tables are float32 rows indexed by the packed code bits (IQ2_S's is the largest, 8 MB);
# the small "unpacking" tables map a byte (or uint16) of packed fields straight to the index bits or
# the scale factor they encode, saving the shift-and-mask calls.


@cached
def _iq2xxs_table() -> np.ndarray:
    """(128 * 256, 8): row `sign << 8 | entry` is iq2xxs_grid[entry] signed by ksigns_iq2xs[sign]."""
    return _signed(grid_bytes("iq2xxs_grid").view(np.uint8), sign_bits()).reshape(-1, 8)


@cached
def _iq2xs_table() -> np.ndarray:
    """(65536, 8): row `q` holds the 8 values of IQ2_XS code `q` (sign << 9 | entry)."""
    return _signed(grid_bytes("iq2xs_grid").view(np.uint8), sign_bits()).reshape(-1, 8)


@cached
def _iq2s_table() -> np.ndarray:
    """(256 * 1024, 8): row `signs << 10 | entry` is iq2s_grid[entry] signed by the 8 bits of `signs`."""
    return _signed(grid_bytes("iq2s_grid").view(np.uint8), _bits(_BYTES, range(8), 1) != 0).reshape(-1, 8)


@cached
def _iq3xxs_table() -> np.ndarray:
    """(128 * 2 * 256, 4): row `sign << 9 | half << 8 | entry` is iq3xxs_grid[entry] signed by bits
    4*half .. 4*half+3 of ksigns_iq2xs[sign] (each sign byte covers two 4-wide entries)."""
    g = grid_bytes("iq3xxs_grid").view(np.uint8).astype(_F32)
    negate = sign_bits().reshape(128, 2, 1, 4)
    return np.where(negate, -g, g).reshape(-1, 4)


@cached
def _iq3s_table() -> np.ndarray:
    """(16 * 512, 4): row `nibble << 9 | entry` is iq3s_grid[entry] signed by the 4 bits of `nibble`."""
    return _signed(grid_bytes("iq3s_grid").view(np.uint8), _bits(np.arange(16), range(4), 1) != 0).reshape(-1, 4)


@cached
def _iq1_table() -> np.ndarray:
    """(2 * 2048, 8): row `negative << 11 | entry` is iq1s_grid[entry] + (∓IQ1S_DELTA), as ggml's
    `grid[j] + delta` computes it (IQ1_M decodes with IQ1S_DELTA too)."""
    g = grid_bytes("iq1s_grid").astype(_F32)
    delta = codebooks()["IQ1S_DELTA"]
    return np.concatenate([g + delta, g + (-delta)])


@cached
def _iq4_pair_table() -> np.ndarray:
    """(2 * 65536,) uint64: the float32 pair that two IQ4 index bytes (read as uint16 `u`) decode to,
    low nibbles at row `u`, high nibbles at row 65536 + `u`. IQ4 stores 16 bytes per 32 weights with
    the low nibbles first, so gathering pairs lands them in output order."""
    kv = codebooks()["kvalues_iq4nl"].astype(_F32)
    u = np.arange(65536)
    first, second = u & 255, u >> 8
    lo = np.stack([kv[first & 15], kv[second & 15]], axis=1)
    hi = np.stack([kv[first >> 4], kv[second >> 4]], axis=1)
    return np.concatenate([lo, hi]).view(np.uint64).reshape(-1)


@cached
def _iq1s_high() -> np.ndarray:
    """(65536, 4) intp: an IQ1_S uint16 `qh` -> for each of its 4 groups, the table-index bits above
    the low entry byte (3 entry bits, and the delta sign at bit 11)."""
    q = np.arange(65536)
    return (_bits(q, [0, 3, 6, 9], 3) << 8 | (q[:, None] >> 15) << 11).astype(np.intp)


@cached
def _iq1s_scale() -> np.ndarray:
    """(65536,) float32: an IQ1_S uint16 `qh` -> its sub-block multiplier 2 * scale + 1."""
    return (2 * ((np.arange(65536) >> 12) & 7) + 1).astype(_F32)


@cached
def _iq1m_high() -> np.ndarray:
    """(256, 2) intp: an IQ1_M qh byte -> the table-index bits (nibble << 8) of its two groups."""
    return (_bits(_BYTES, [0, 4], 4) << 8).astype(np.intp)


@cached
def _iq1m_scale() -> np.ndarray:
    """(4096, 4) float32: the low 12 bits of an IQ1_M scale word -> its four multipliers 2 * s + 1."""
    return (2 * _bits(np.arange(4096), [0, 3, 6, 9], 3) + 1).astype(_F32)


@cached
def _iq2s_high() -> np.ndarray:
    """(256, 4) intp: an IQ2_S qh byte -> bits 8-9 of the entry index of each of its 4 groups."""
    return (_bits(_BYTES, [0, 2, 4, 6], 2) << 8).astype(np.intp)


@cached
def _iq3s_high() -> np.ndarray:
    """(256, 8) intp: an IQ3_S qh byte -> bit 8 of the entry index of each of its 8 groups."""
    return (_bits(_BYTES, range(8), 1) << 8).astype(np.intp)


@cached
def _iq3s_sign_nibbles() -> np.ndarray:
    """(256, 2) intp: an IQ3_S sign byte -> its two nibbles, placed at table-index bit 9."""
    return (_bits(_BYTES, [0, 4], 4) << 9).astype(np.intp)


@cached
def _half_plus_nibbles() -> np.ndarray:
    """(256, 2) float32: a byte of two 4-bit scales -> 0.5 + scale, as IQ2_XS/IQ2_S decode them."""
    return (_F32(0.5) + _bits(_BYTES, [0, 4], 4)).astype(_F32)


@cached
def _odd_nibbles() -> np.ndarray:
    """(256, 2) float32: a byte of two 4-bit scales -> 1 + 2 * scale, as IQ3_S decodes them."""
    return (1 + 2 * _bits(_BYTES, [0, 4], 4)).astype(_F32)


@cached
def _iq4xs_low() -> np.ndarray:
    """(256, 2) int16: a scales_l byte -> the low 4 bits of two IQ4_XS sub-block scales."""
    return _bits(_BYTES, [0, 4], 4).astype(np.int16)


@cached
def _iq4xs_high() -> np.ndarray:
    """(256, 4) int16: a scales_h byte -> (high 2 bits << 4) - 32 of four sub-block scales."""
    return ((_bits(_BYTES, [0, 2, 4, 6], 2) << 4) - 32).astype(np.int16)


# ------------------------------------------------------------------------------------ dequantizers


def dequantize_iq2_xxs(blocks: np.ndarray, out: np.ndarray) -> None:
    """66-byte blocks: f16 d, then per 32 weights 4 entry bytes and a uint32 of 4x7 sign bits + 4-bit scale."""
    n = len(blocks)
    q = blocks[:, 2:66].reshape(n, 8, 8)
    aux = q[:, :, 4:8].view("<u4")  # (n, 8, 1)
    d = half(blocks, 0)
    db = d[:, :, None] * (_F32(0.5) + (aux >> 28).astype(_F32)) * _F32(0.25)
    idx = (aux.astype(np.intp) << 8 >> _SHIFT7) & (127 << 8)
    idx |= q[:, :, :4]
    view = out.reshape(n, 8, 4, 8)
    _take(_iq2xxs_table(), idx, view)
    out.reshape(n, 8, 32)[...] *= db
    _flip_nan_signs(_iq2xxs_table(), idx, view, d)


def dequantize_iq2_xs(blocks: np.ndarray, out: np.ndarray) -> None:
    """74-byte blocks: f16 d, 32 uint16 codes (9-bit entry, 7-bit sign index), 16 4-bit scales."""
    n = len(blocks)
    d = half(blocks, 0)
    db = _take(_half_plus_nibbles(), blocks[:, 66:74]).reshape(n, 16)
    db *= d
    db *= _F32(0.25)
    idx = blocks[:, 2:66].view("<u2").astype(np.intp)
    view = out.reshape(n, 32, 8)
    _take(_iq2xs_table(), idx, view)
    out.reshape(n, 16, 16)[...] *= db[:, :, None]
    _flip_nan_signs(_iq2xs_table(), idx, view, d)


def dequantize_iq2_s(blocks: np.ndarray, out: np.ndarray) -> None:
    """82-byte blocks: f16 d, 32 low entry bytes, 32 sign bytes, 8 bytes of entry high bits, 16 scales."""
    n = len(blocks)
    d = half(blocks, 0)
    db = _take(_half_plus_nibbles(), blocks[:, 74:82]).reshape(n, 16)
    db *= d
    db *= _F32(0.25)
    idx = _take(_iq2s_high(), blocks[:, 66:74]).reshape(n, 32)
    idx |= blocks[:, 2:34]
    idx |= np.left_shift(blocks[:, 34:66], 10, dtype=np.intp)
    view = out.reshape(n, 32, 8)
    _take(_iq2s_table(), idx, view)
    out.reshape(n, 16, 16)[...] *= db[:, :, None]
    _flip_nan_signs(_iq2s_table(), idx, view, d)


def dequantize_iq3_xxs(blocks: np.ndarray, out: np.ndarray) -> None:
    """98-byte blocks: f16 d, 64 entry bytes (4 weights each), 8 uint32 of 4x7 sign bits + 4-bit scale."""
    n = len(blocks)
    aux = blocks[:, 66:98].view("<u4")[:, :, None]  # (n, 8, 1)
    d = half(blocks, 0)
    db = d[:, :, None] * (_F32(0.5) + (aux >> 28).astype(_F32)) * _F32(0.5)
    sign = (aux.astype(np.intp) << 9 >> _SHIFT7) & (127 << 9)  # (n, 8, 4): one per 8 weights
    idx = np.bitwise_or(sign[..., None], blocks[:, 2:66].reshape(n, 8, 4, 2))
    idx[..., 1] |= 256
    view = out.reshape(n, 8, 4, 2, 4)
    _take(_iq3xxs_table(), idx, view)
    out.reshape(n, 8, 32)[...] *= db
    _flip_nan_signs(_iq3xxs_table(), idx, view, d)


def dequantize_iq3_s(blocks: np.ndarray, out: np.ndarray) -> None:
    """110-byte blocks: f16 d, 64 low entry bytes, 8 bytes of entry bit 8, 32 sign bytes, 8 4-bit scales."""
    n = len(blocks)
    d = half(blocks, 0)
    db = _take(_odd_nibbles(), blocks[:, 106:110]).reshape(n, 8)
    db *= d
    idx = _take(_iq3s_sign_nibbles(), blocks[:, 74:106]).reshape(n, 64)
    idx |= _take(_iq3s_high(), blocks[:, 66:74]).reshape(n, 64)
    idx |= blocks[:, 2:66]
    view = out.reshape(n, 64, 4)
    _take(_iq3s_table(), idx, view)
    out.reshape(n, 8, 32)[...] *= db[:, :, None]
    _flip_nan_signs(_iq3s_table(), idx, view, d)


def dequantize_iq1_s(blocks: np.ndarray, out: np.ndarray) -> None:
    """50-byte blocks: f16 d, 32 low entry bytes, 8 uint16 (4x3 entry high bits, 3-bit scale, delta sign)."""
    n = len(blocks)
    qh = blocks[:, 34:50].view("<u2")
    dl = _take(_iq1s_scale(), qh)
    dl *= half(blocks, 0)
    idx = _take(_iq1s_high(), qh)
    idx += blocks[:, 2:34].reshape(n, 8, 4)
    _take(_iq1_table(), idx, out.reshape(n, 8, 4, 8))
    out.reshape(n, 8, 32)[...] *= dl[:, :, None]


def dequantize_iq1_m(blocks: np.ndarray, out: np.ndarray) -> None:
    """56-byte blocks: 32 low entry bytes, 16 bytes of (3 entry high bits + delta sign) nibbles, then 4
    uint16 holding 16 3-bit scales in their low 12 bits and the f16 super-scale in their top nibbles."""
    n = len(blocks)
    sc = blocks[:, 48:56].view("<u2")  # (n, 4)
    d16 = (sc[:, 0] >> 12) | (sc[:, 1] >> 8) & 0x00F0 | (sc[:, 2] >> 4) & 0x0F00 | sc[:, 3] & 0xF000
    dl = _take(_iq1m_scale(), sc & 0x0FFF).reshape(n, 16)  # one per 16 weights
    dl *= d16.view("<f2").astype(_F32)[:, None]
    idx = _take(_iq1m_high(), blocks[:, 32:48]).reshape(n, 32)
    idx += blocks[:, 0:32]
    _take(_iq1_table(), idx, out.reshape(n, 32, 8))
    out.reshape(n, 16, 16)[...] *= dl[:, :, None]


@cached
def _iq4_offsets(groups: int) -> np.ndarray:
    """(groups, 2, 8) intp: 0 for the low-nibble half of each group, 65536 for the high half."""
    return np.broadcast_to(np.array([[0], [65536]]), (groups, 2, 8)).copy()


def _iq4_gather(codes: np.ndarray, out: np.ndarray) -> None:
    """Decode IQ4 index bytes (groups, 16) into unscaled values `out` (groups, 32).

    Each uint16 of two index bytes picks a float32 pair from the pair table twice: once among the
    low-nibble rows, once among the high-nibble rows. (Building the (groups, 2, 8) index with
    `np.repeat` and a cached offset array beats a broadcasting add, whose inner loops are 8 long.)
    """
    groups = len(codes)
    idx = np.repeat(codes.view("<u2").astype(np.intp)[:, None, :], 2, axis=1)
    idx += _iq4_offsets(1 << (groups - 1).bit_length())[:groups]  # cached per power of two
    _take(_iq4_pair_table(), idx, out.view(np.uint64).reshape(groups, 2, 8))


def dequantize_iq4_nl(blocks: np.ndarray, out: np.ndarray) -> None:
    """18-byte blocks: f16 d and 32 4-bit indices into kvalues_iq4nl (16 bytes, low nibbles first)."""
    _iq4_gather(blocks[:, 2:18], out)
    out *= half(blocks, 0)


def dequantize_iq4_xs(blocks: np.ndarray, out: np.ndarray) -> None:
    """136-byte blocks: f16 d, 8 6-bit scales (a uint16 of high bits, 4 bytes of low nibbles), 128 index bytes."""
    n = len(blocks)
    ls = _take(_iq4xs_low(), blocks[:, 4:8]).reshape(n, 8)
    ls += _take(_iq4xs_high(), blocks[:, 2:4]).reshape(n, 8)
    dl = ls * half(blocks, 0)  # ggml: d * (ls - 32)
    _iq4_gather(blocks[:, 8:136].reshape(n * 8, 16), out.reshape(n * 8, 32))
    out.reshape(n, 8, 32)[...] *= dl[:, :, None]


DEQUANTIZERS = {
    t: quiet(k)
    for t, k in {
        GGMLType.IQ2_XXS: dequantize_iq2_xxs,
        GGMLType.IQ2_XS: dequantize_iq2_xs,
        GGMLType.IQ2_S: dequantize_iq2_s,
        GGMLType.IQ3_XXS: dequantize_iq3_xxs,
        GGMLType.IQ3_S: dequantize_iq3_s,
        GGMLType.IQ1_S: dequantize_iq1_s,
        GGMLType.IQ1_M: dequantize_iq1_m,
        GGMLType.IQ4_NL: dequantize_iq4_nl,
        GGMLType.IQ4_XS: dequantize_iq4_xs,
    }.items()
}
