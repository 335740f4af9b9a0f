"""ggml's K-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K, in super-blocks of 256 values.

Each super-block holds float16 super-scales and 8 or 16 sub-block scales (and mins) quantized to 4, 6 or 8
bits. Quantizers follow ggml's `quantize_row_*_ref` and, with an importance matrix, the weighted
`quantize_row_*_impl` paths; the per-sub-block scale searches live in `_scale_search`.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import GGMLType
from ._block_layout import assemble, bitfields, block_bytes, group_scales, half, packfields, scale_codes_into, to_half
from ._parallel import Scratch, readonly
from ._scale_search import (
    F32,
    GROUP_MAX_EPS,
    clamped_codes,
    half_round,
    make_q3_quants,
    make_qkx_quants,
    make_qp_quants,
    make_qx_quants,
    nearest_int,
    position_major,
    quiet,
    seq_sum,
    signed_absmax,
)

QK = 256


def _column(values: list[int]) -> np.ndarray:
    return readonly(np.array(values, dtype=np.uint32)[:, None])


# ------------------------------------------------------------------------------------------ bit fields
def _unpack_2bit(qs: np.ndarray, scratch: Scratch, to: int = 0) -> np.ndarray:
    """64 bytes to 256 two-bit codes (n, 2, 4, 32): byte 32h+l holds values 128h+l, +32, +64, +96."""
    return bitfields(qs.reshape(-1, 2, 32), (0, 2, 4, 6), 3, to, scratch=scratch)


def _pack_2bit(L: np.ndarray) -> np.ndarray:
    return packfields(L.reshape(-1, 2, 4, 32), (0, 2, 4, 6)).reshape(-1, 64)


def _bit_planes(bits: np.ndarray, scratch: Scratch, to: int = 0) -> np.ndarray:
    """32 bytes to (8, 32) bits: plane s holds bit s of every byte (Q3_K's hmask, Q5_K's qh)."""
    return bitfields(bits, tuple(range(8)), 1, to, scratch=scratch)


def _pack_bit_planes(planes: np.ndarray) -> np.ndarray:
    return packfields(planes.reshape(-1, 8, 32).astype(np.uint8), tuple(range(8)))


# get_scale_min_k4 on uint32 words w0 w1 w2 (bytes 0-3, 4-7, 8-11), 4 sub-blocks per result word:
# scales 0-3 = w0 & 63, scales 4-7 = (w2 & 15) | top bits of w0 (>> 6, << 4); mins from w1 and w2 >> 4.
_K4_LOW = (readonly(np.array([0, 2, 1, 2])), _column([0, 0, 0, 4]), _column([0x3F3F3F3F, 0x0F0F0F0F] * 2))
_K4_TOP = (readonly(np.array([0, 0, 1, 1])), np.uint32(2), _column([0, 0x30303030] * 2))


def _word_rows(s: np.ndarray) -> np.ndarray:
    """12 scale bytes per block as 3 little-endian uint32 words (4 byte lanes each), word-major (3, n)."""
    return block_bytes(s).view(np.uint32).T


def _lanes(words: np.ndarray) -> np.ndarray:
    """Word-major (k, n) uint32 back to per-block bytes (n, 4k)."""
    return np.ascontiguousarray(words.T).view(np.uint8)


def _unpack_k4_scales(s: np.ndarray) -> np.ndarray:
    """ggml `get_scale_min_k4` for all 8 sub-blocks: 12 bytes to (n, 2, 8) 6-bit scales, then mins.

    Bytes 0-3 hold scales 0-3 (low 6 bits), 4-7 mins 0-3; bytes 8-11 the low nibbles of scales 4-7 (low)
    and mins 4-7 (high), whose top 2 bits sit in the top bits of bytes 0-7. Done on uint32 words.
    """
    w = _word_rows(s)
    (ia, sa, ma), (ib, sb, mb) = _K4_LOW, _K4_TOP
    out = (w[ia] >> sa) & ma
    out |= (w[ib] >> sb) & mb
    return _lanes(out).reshape(-1, 2, 8)


def _pack_k4_scales(ls: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """Inverse of `_unpack_k4_scales`, with C's uint8 arithmetic (stray high bits leak the same way)."""
    return np.concatenate(
        [
            ls[:, :4] | ((ls[:, 4:] >> 4) << 6),
            lm[:, :4] | ((lm[:, 4:] >> 4) << 6),
            (ls[:, 4:] & 0x0F) | ((lm[:, 4:] & 0x0F) << 4),
        ],
        axis=1,
    )


_Q3_LOW = (readonly(np.array([0, 1, 0, 1])), _column([0, 0, 4, 4]), np.uint32(0x0F0F0F0F))
_Q3_TOP = (readonly(np.array([2, 2, 2, 2])), _column([0, 2, 4, 6]), np.uint32(0x03030303))


def _unpack_q3_scales(s: np.ndarray) -> np.ndarray:
    """Q3_K's 12 bytes to 16 signed 6-bit scales (stored +32).

    Low nibbles of bytes 0-7 are scales 0-7, their high nibbles scales 8-15; byte 8+r holds the top 2 bits
    of scales r, r+4, r+8, r+12 at bits 0, 2, 4, 6. Done on uint32 words, 4 lanes at once.
    """
    w = _word_rows(s)
    (ia, sa, ma), (ib, sb, mb) = _Q3_LOW, _Q3_TOP
    words = (w[ia] >> sa) & ma
    words |= ((w[ib] >> sb) & mb) << np.uint32(4)
    scales = _lanes(words).view(np.int8)
    scales -= np.int8(32)
    return scales


def _pack_q3_scales(codes: np.ndarray) -> np.ndarray:
    """16 codes in [0, 64) to Q3_K's 12 bytes."""
    high = (codes >> 4).reshape(-1, 4, 4) << (2 * np.arange(4, dtype=np.uint8))[None, :, None]
    return np.concatenate(
        [(codes[:, :8] & 0x0F) | ((codes[:, 8:] & 0x0F) << 4), high[:, 0] | high[:, 1] | high[:, 2] | high[:, 3]],
        axis=1,
    )


# ---------------------------------------------------------------------------------------- dequantize
def _dequantize_q2_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """Sub-block s of 16 values: d*(sc[s] & 15) * q - dmin*(sc[s] >> 4)."""
    sc = block_bytes(blocks[:, :16])
    codes = np.stack([sc & 0x0F, sc >> 4], axis=1)  # scale codes, min codes
    with Scratch() as scratch:
        q = _unpack_2bit(blocks[:, 16:80], scratch)
        scale_codes_into(out, q, group_scales(half(blocks, 80, 2), codes), -1)


def _dequantize_q3_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """Sub-block s of 16 values: d*(sc[s] - 32) * (q - 4 if the hmask bit is clear else q)."""
    with Scratch() as scratch:
        q = _unpack_2bit(blocks[:, 32:96], scratch).reshape(-1, 8, 32).view(np.int8)
        q += _bit_planes(blocks[:, :32], scratch, to=2).view(np.int8)
        q -= np.int8(4)
        scale_codes_into(out, q, group_scales(half(blocks, 108), _unpack_q3_scales(blocks[:, 96:108])[:, None]))


def _k4_scales(blocks: np.ndarray) -> np.ndarray:
    """Q4_K/Q5_K (n, 2, 8) sub-block scales d*sc[s], then mins dmin*m[s]."""
    return group_scales(half(blocks, 0, 2), _unpack_k4_scales(blocks[:, 4:16]))


# Q4_K blocks (144 bytes) are whole uint64 words: the nibbles are cut out of the whole block in two long
# ufunc loops, without first copying the code bytes out, and cast from that strided view.
_NIBBLE_SHIFTS = readonly(np.array([0, 4], dtype=np.uint64)[:, None, None])
_LOW_NIBBLES = np.uint64(0x0F0F0F0F0F0F0F0F)


def _dequantize_q4_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """Sub-block s of 32 values is d*sc[s]*q - dmin*m[s]; byte l of the 32-byte run j of the codes (from
    byte 16) holds value l of sub-block 2j (low nibble) and 2j+1 (high)."""
    n = len(blocks)
    with Scratch() as scratch:
        nibbles = scratch.empty((2, n, 18), np.uint64)
        np.right_shift(blocks.view(np.uint64), _NIBBLE_SHIFTS, out=nibbles)
        nibbles &= _LOW_NIBBLES
        q = nibbles.view(np.uint8)[:, :, 16:144].reshape(2, n, 4, 32).transpose(1, 2, 0, 3)
        scale_codes_into(out, q, _k4_scales(blocks), -1)


def _dequantize_q5_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """Q4_K's layout (codes from byte 48) plus bit s of qh byte l (from byte 16) as bit 4 of value l of
    sub-block s. The bits are ORed into contiguous codes: on Q4_K's strided view that pass costs more."""
    with Scratch() as scratch:
        # (n, 4, 2, 32), in value order
        q = bitfields(blocks[:, 48:176].reshape(-1, 4, 32), (0, 4), 0x0F, scratch=scratch)
        q |= _bit_planes(blocks[:, 16:48], scratch, to=4).reshape(q.shape)
        scale_codes_into(out, q, _k4_scales(blocks), -1)


def _dequantize_q6_k(blocks: np.ndarray, out: np.ndarray) -> None:
    """Value 128h + 32k + l: low nibble of ql[64h + 32(k&1) + l] (k < 2) or high (k >= 2), top two bits
    from qh[32h + l] >> 2k; times (d * sc[16-group]), rounded in that order as in C."""
    with Scratch() as scratch:
        q = bitfields(blocks[:, :128].reshape(-1, 2, 64), (0, 4), 0x0F, scratch=scratch).reshape(-1, 2, 4, 32)
        q |= _unpack_2bit(blocks[:, 128:192], scratch, to=4)
        q8 = q.view(np.int8)
        q8 -= np.int8(32)
        scale_codes_into(out, q8, group_scales(half(blocks, 208), blocks[:, None, 192:208].view(np.int8)))


def _dequantize_q8_k(blocks: np.ndarray, out: np.ndarray) -> None:
    scale_codes_into(out, blocks[:, 4:260].view(np.int8), blocks[:, :4].view(F32))


# ------------------------------------------------------------------------------------------ quantize
def _superblock_sigma2(x: np.ndarray) -> np.ndarray:
    """Σ x² over each super-block of 256, summed in order (the imatrix paths' sigma2 numerator)."""
    xs = position_major(x, QK)
    return seq_sum(xs * xs)


def _imatrix_weights(x: np.ndarray, xs: np.ndarray, imatrix: np.ndarray, sigma2: np.ndarray, group: int) -> np.ndarray:
    """qw * sqrt(sigma2 + x²) in position-major layout; sigma2 is per super-block."""
    qw = np.tile(imatrix.reshape(-1, group), (len(x), 1)).T
    s2 = np.repeat(sigma2, QK // group)
    return qw * np.sqrt(s2 + xs * xs)


def _tiled_imatrix(x: np.ndarray, imatrix: np.ndarray, group: int) -> np.ndarray:
    return np.ascontiguousarray(np.tile(imatrix.reshape(-1, group), (len(x), 1)).T)


def _requantize(x: np.ndarray, L: np.ndarray, d: np.ndarray, dm: np.ndarray | None, lo: int, hi: int) -> np.ndarray:
    """ggml's final pass: with the stored (float16) scales, codes = clamp(nearest_int((x + dm)/d)).

    Sub-blocks whose scale is 0 keep the codes of the search (`if (!d) continue;`). Shapes: x, L
    (nb, n_sub, size); d, dm (nb, n_sub). Codes come back offset by -lo, as uint8.
    """
    v = x + dm[..., None] if dm is not None else x.copy()
    v /= d[..., None]
    q = clamped_codes(v, lo, hi).astype(np.uint8)
    keep = d == 0
    q[keep] = L[keep]
    return q


def _positive_max(v: np.ndarray) -> np.ndarray:
    """`max = 0; if (v > max) max = v;` over each row."""
    return np.maximum(v.max(axis=1), F32(0))


def _scale_codes(v: np.ndarray, vmax: np.ndarray, nmax: int) -> np.ndarray:
    """nearest_int(nmax/vmax * v) as int32 (0 where vmax is 0): sub-block scales against the largest."""
    inv = np.where(vmax > 0, F32(nmax) / np.where(vmax > 0, vmax, F32(1)), F32(0))
    return nearest_int(inv[:, None] * v)


def _quantize_q2_k(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    xs = position_major(x, 16)
    nb = x.size // QK
    if imatrix is None:
        scales, mins, L = make_qkx_quants(xs, np.abs(xs), 3, -0.5, 0.1, 15, use_mad=True)
        scales, mins = scales.reshape(nb, 16), mins.reshape(nb, 16)
        max_scale, max_min = _positive_max(scales), _positive_max(mins)
        ls = _scale_codes(scales, max_scale, 15)
        lm = _scale_codes(mins, max_min, 15)
        lm = np.where(max_min[:, None] > 0, lm, 0)  # C leaves the min nibble 0 when all mins are 0
        sc = ((ls | (lm << 4)) & 0xFF).astype(np.uint8)  # stored as uint8, as C's assignment truncates
        d = np.where(max_scale > 0, max_scale / F32(15), F32(0))
        dmin = np.where(max_min > 0, max_min / F32(15), F32(0))
    else:
        sigma2 = _superblock_sigma2(x) / F32(QK)
        w = _imatrix_weights(x, xs, imatrix, sigma2, 16)
        sw = seq_sum(w).reshape(nb, 16).T
        scales, mins, L = make_qkx_quants(xs, w, 3, -0.9, 0.05, 36, use_mad=False)
        d, ls = make_qp_quants(np.ascontiguousarray(scales.reshape(nb, 16).T), 15, sw)
        dmin, lm = make_qp_quants(np.ascontiguousarray(mins.reshape(nb, 16).T), 15, sw)
        sc = ls.T | (lm.T << 4)
    dd = half_round(d)[:, None] * (sc & 0x0F)
    dm = half_round(dmin)[:, None] * (sc >> 4)
    L = _requantize(x.reshape(nb, 16, 16), L.T.reshape(nb, 16, 16), dd, dm, 0, 3)
    return assemble(len(x), sc, _pack_2bit(L), to_half(d), to_half(dmin))


def _quantize_q3_k(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    xs = position_major(x, 16)
    nb = x.size // QK
    if imatrix is None:
        scales, L = make_q3_quants(xs, 4)
        scales = scales.reshape(nb, 16)
        _, max_scale = signed_absmax(scales, axis=1)
        has = max_scale != 0
        iscale = F32(-32) / np.where(has, max_scale, F32(1))
        ls = nearest_int(iscale[:, None] * scales).astype(np.int8)
        ls = (np.clip(ls, -32, 31) + 32).astype(np.uint8)
        packed = np.where(has[:, None], _pack_q3_scales(ls), np.uint8(0))
        d = np.where(has, F32(1) / iscale, F32(0))
    else:
        sigma2 = F32(2) * _superblock_sigma2(x) / F32(QK)
        w = _imatrix_weights(x, xs, imatrix, sigma2, 16)
        sw = seq_sum(w)
        scales, L = make_qx_quants(xs, 4, w)
        d, ls = make_qx_quants(
            np.ascontiguousarray(scales.reshape(nb, 16).T), 32, np.ascontiguousarray(sw.reshape(nb, 16).T)
        )
        packed = _pack_q3_scales(ls.T)
    dd = half_round(d)[:, None] * _unpack_q3_scales(packed)
    L = _requantize(x.reshape(nb, 16, 16), L.T.reshape(nb, 16, 16), dd, None, -4, 3).reshape(nb, QK)
    high = L > 3
    return assemble(len(x), _pack_bit_planes(high), _pack_2bit(L & 3), packed, to_half(d))


def _quantize_k4(x: np.ndarray, imatrix: np.ndarray | None, nmax: int) -> tuple[np.ndarray, ...]:
    """Q4_K/Q5_K shared part: (d, dmin, packed scales, codes (nb, 256) in [0, nmax])."""
    xs = position_major(x, 32)
    nb = x.size // QK
    if imatrix is None:
        av_x = np.sqrt(seq_sum(xs * xs) / F32(32))
        w = av_x + np.abs(xs)
        rmin, nstep = (-1.0, 20) if nmax == 15 else (-0.5, 15)
        scales, mins, L = make_qkx_quants(xs, w, nmax, rmin, 0.1, nstep, use_mad=False)
        scales, mins = scales.reshape(nb, 8), mins.reshape(nb, 8)
        max_scale, max_min = _positive_max(scales), _positive_max(mins)
        ls = np.minimum(_scale_codes(scales, max_scale, 63) & 0xFF, 63).astype(np.uint8)
        lm = np.minimum(_scale_codes(mins, max_min, 63) & 0xFF, 63).astype(np.uint8)
        d, dmin = max_scale / F32(63), max_min / F32(63)
    else:
        sigma2 = F32(2) * _superblock_sigma2(x) / F32(QK)
        w = _imatrix_weights(x, xs, imatrix, sigma2, 32)
        sw = np.ascontiguousarray(seq_sum(w).reshape(nb, 8).T)
        scales, mins, L = make_qkx_quants(xs, w, nmax, -0.9, 0.05, 36, use_mad=False)
        d, ls = make_qp_quants(np.ascontiguousarray(scales.reshape(nb, 8).T), 63, sw)
        dmin, lm = make_qp_quants(np.ascontiguousarray(mins.reshape(nb, 8).T), 63, sw)
        ls, lm = ls.T, lm.T
        if nmax == 31:
            ls, lm = np.minimum(ls, 63), np.minimum(lm, 63)
    packed = _pack_k4_scales(ls, lm)
    sc, mn = _unpack_k4_scales(packed).transpose(1, 0, 2)
    dd = half_round(d)[:, None] * sc
    dm = half_round(dmin)[:, None] * mn
    L = _requantize(x.reshape(nb, 8, 32), L.T.reshape(nb, 8, 32), dd, dm, 0, nmax).reshape(nb, QK)
    return d, dmin, packed, L


def _quantize_q4_k(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    d, dmin, packed, L = _quantize_k4(x, imatrix, 15)
    return assemble(len(x), to_half(d), to_half(dmin), packed, packfields(L.reshape(-1, 4, 2, 32), (0, 4)))


def _quantize_q5_k(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    d, dmin, packed, L = _quantize_k4(x, imatrix, 31)
    ql = packfields((L & 0x0F).reshape(-1, 4, 2, 32), (0, 4))
    return assemble(len(x), to_half(d), to_half(dmin), packed, _pack_bit_planes(L >> 4), ql)


def _quantize_q6_k(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    xs = position_major(x, 16)
    nb = x.size // QK
    w = xs * xs if imatrix is None else _tiled_imatrix(x, imatrix, 16)
    scales, L = make_qx_quants(xs, 32, w)
    scales = scales.reshape(nb, 16)
    amax, max_scale = signed_absmax(scales, axis=1)
    zero = amax < GROUP_MAX_EPS
    iscale = F32(-128) / np.where(zero, F32(1), max_scale)
    d = np.where(zero, F32(0), F32(1) / iscale)
    sc = np.minimum(127, nearest_int(iscale[:, None] * scales)).astype(np.int8)
    sc[zero] = 0
    dd = half_round(d)[:, None] * sc
    L = _requantize(x.reshape(nb, 16, 16), L.T.reshape(nb, 16, 16), dd, None, -32, 31)
    L[zero] = 0
    ql = packfields((L & 0x0F).reshape(nb, 2, 2, 64), (0, 4))
    qh = _pack_2bit(L >> 4)
    return assemble(len(x), ql, qh, sc, to_half(d))


def _quantize_q8_k(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """`quantize_row_q8_K_ref`: float32 d = max/-127, codes MIN(127, nearest_int(x/d)), 16-value sums."""
    xb = x.reshape(-1, QK)
    amax, mx = signed_absmax(xb, axis=1)
    zero = amax == 0
    iscale = F32(-127) / np.where(zero, F32(1), mx)
    q = np.minimum(127, nearest_int(iscale[:, None] * xb)).astype(np.int8)
    q[zero] = 0
    bsums = q.reshape(-1, 16, 16).sum(axis=2, dtype=np.int32).astype(np.int16)
    d = np.where(zero, F32(0), F32(1) / iscale)
    return assemble(len(x), d.astype(F32), q, bsums)


_T = GGMLType
DEQUANTIZERS = {
    _T.Q2_K: quiet(_dequantize_q2_k),
    _T.Q3_K: quiet(_dequantize_q3_k),
    _T.Q4_K: quiet(_dequantize_q4_k),
    _T.Q5_K: quiet(_dequantize_q5_k),
    _T.Q6_K: quiet(_dequantize_q6_k),
    _T.Q8_K: quiet(_dequantize_q8_k),
}
QUANTIZERS = {
    _T.Q2_K: quiet(_quantize_q2_k),
    _T.Q3_K: quiet(_quantize_q3_k),
    _T.Q4_K: quiet(_quantize_q4_k),
    _T.Q5_K: quiet(_quantize_q5_k),
    _T.Q6_K: quiet(_quantize_q6_k),
    _T.Q8_K: quiet(_quantize_q8_k),
}
