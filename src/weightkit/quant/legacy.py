"""ggml's "legacy" block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q1_0 and Q2_0.

One float16 scale (and for the `_1` types a float16 min) per block of 32 values (128 for Q1_0, 64 for
Q2_0), codes packed as nibbles or bits. Quantizers follow ggml's `quantize_row_*_ref` and, when given an
importance matrix, the weighted `quantize_row_*_impl` paths, with float32 arithmetic in C's order so the
bytes match ggml's.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import GGMLType
from ._block_layout import assemble, bitfields, block_bytes, half, packfields, scale_codes_into, to_half
from ._gather import gather
from ._parallel import Scratch, readonly
from ._scale_search import (
    F32,
    abs_max_rows,
    cap,
    inverse,
    make_qkx_quants,
    make_qx_quants,
    position_major,
    quiet,
    roundf,
    row_min_max,
    seq_sum,
    signed_absmax,
)

# --------------------------------------------------------------------------------------------- dequantize
# Q1_0: byte -> 8 sign masks (bit clear: negate), Q2_0: byte -> 4 codes q - 1 (low bits first).
_Q1_SIGNS = readonly(np.where((np.arange(256)[:, None] >> np.arange(8)) & 1, 0, 0x80000000).astype(np.uint32))
_Q2_CODES = readonly((((np.arange(256)[:, None] >> (2 * np.arange(4))) & 3) - 1).astype(np.int8))


def _nibbles(qs: np.ndarray, scratch: Scratch) -> np.ndarray:
    """Codes of 32-blocks from 16 bytes each: low nibbles are values 0..15, high nibbles 16..31."""
    return bitfields(qs, (0, 4), 0x0F, scratch=scratch).reshape(-1, 32)


def _with_high_bits(q: np.ndarray, qh: np.ndarray, centred: bool = False) -> np.ndarray:
    """Add the 5th bit of each of 32 values: bit j of the little-endian uint32 `qh`.

    `centred` gives the code minus 16 instead, as int8 (Q5_0), in the same passes: where the bit is
    clear, ORing 0xF0 into the nibble makes it nibble - 16; where it is set, the nibble is the answer.
    """
    bits = block_bytes(qh)
    if centred:
        np.invert(bits, out=bits)
    high = np.unpackbits(bits.reshape(-1), bitorder="little").reshape(q.shape)
    q |= np.multiply(high, 0xF0 if centred else 16, out=high)  # numpy's uint8 left shift is slow
    return q.view(np.int8) if centred else q


def _centered(q: np.ndarray, offset: int) -> np.ndarray:
    q8 = q.view(np.int8)
    q8 -= np.int8(offset)
    return q8


def _dequantize_q4_0(blocks: np.ndarray, out: np.ndarray) -> None:
    with Scratch() as scratch:
        scale_codes_into(out, _centered(_nibbles(blocks[:, 2:18], scratch), 8), half(blocks, 0))


def _dequantize_q4_1(blocks: np.ndarray, out: np.ndarray) -> None:
    with Scratch() as scratch:
        scale_codes_into(out, _nibbles(blocks[:, 4:20], scratch), half(blocks, 0, 2))


def _dequantize_q5_0(blocks: np.ndarray, out: np.ndarray) -> None:
    with Scratch() as scratch:
        q = _with_high_bits(_nibbles(blocks[:, 6:22], scratch), blocks[:, 2:6], centred=True)
        scale_codes_into(out, q, half(blocks, 0))


def _dequantize_q5_1(blocks: np.ndarray, out: np.ndarray) -> None:
    with Scratch() as scratch:
        q = _with_high_bits(_nibbles(blocks[:, 8:24], scratch), blocks[:, 4:8])
        scale_codes_into(out, q, half(blocks, 0, 2))


def _dequantize_q8_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """The codes are gathered into one run first: casting them row by row from the blocks costs more than
    the gather."""
    scale_codes_into(out, block_bytes(blocks[:, 2:]).view(np.int8), half(blocks, 0))


def _dequantize_q8_1(blocks: np.ndarray, out: np.ndarray) -> None:
    """ggml has no to_float for Q8_1 (it only feeds dot products); d * q is what the block means."""
    scale_codes_into(out, block_bytes(blocks[:, 4:]).view(np.int8), half(blocks, 0))


def _dequantize_q1_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """bit ? d : -d. ggml's float16 decode quiets signalling NaNs (it multiplies), so `* 1` first;
    then -d is a sign flip (xor), which keeps NaN payloads as C's negation does."""
    d = half(blocks, 0) * F32(1)
    signs = gather(_Q1_SIGNS, blocks[:, 2:], axis=0).reshape(out.shape)
    np.bitwise_xor(signs, d.view(np.uint32), out=out.view(np.uint32))


def _dequantize_q2_0(blocks: np.ndarray, out: np.ndarray) -> None:
    scale_codes_into(out, gather(_Q2_CODES, blocks[:, 2:], axis=0), half(blocks, 0))


# --------------------------------------------------------------------------------------------- quantize
def _blocks(x: np.ndarray, size: int) -> np.ndarray:
    return x.reshape(-1, size)


def _pack_nibbles(q: np.ndarray) -> np.ndarray:
    """Low nibbles of codes (n, 32) to ggml's 16 bytes: value j low nibble, value j+16 high nibble."""
    return packfields(q.reshape(-1, 2, 16) & 0x0F, (0, 4))


def _pack_high_bits(q: np.ndarray) -> np.ndarray:
    """Bit 4 of each of 32 codes into the little-endian uint32 `qh` (4 bytes)."""
    return np.packbits((q >> 4).reshape(-1), bitorder="little").reshape(-1, 4)


def _symmetric_codes(x: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0/Q5_0 reference: d = max / -levels, code = MIN(2*levels-1, (int8)(x/d + levels + 0.5))."""
    xb = _blocks(x, 32)
    _, mx = signed_absmax(xb, axis=1)
    d = mx / F32(-levels)
    v = xb * inverse(d)[:, None]
    v += F32(levels + 0.5)
    return d, cap(v.astype(np.uint8), 2 * levels - 1)


def _affine_codes(x: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q4_1/Q5_1 reference: d = (max - min) / (levels - 1), code = (int)((x - min)/d + 0.5)."""
    xb = _blocks(x, 32)
    mn, mx = row_min_max(xb)
    d = (mx - mn) / F32(levels - 1)
    v = xb - mn[:, None]
    v *= inverse(d)[:, None]
    v += F32(0.5)
    return d, mn, cap(v.astype(np.uint8), levels - 1)


def _row_weights(x: np.ndarray, imatrix: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    """Position-major x and the legacy imatrix weights qw * sqrt(sigma2 + x²), sigma2 = mean x² of the row."""
    n_rows, n_per_row = x.shape
    sigma2 = seq_sum(np.ascontiguousarray((x * x).T)) / F32(n_per_row)
    xs = position_major(x, group)
    qw = np.tile(imatrix.reshape(-1, group), (n_rows, 1)).T
    s2 = np.repeat(sigma2, n_per_row // group)
    return xs, qw * np.sqrt(s2 + xs * xs)


def _symmetric(x: np.ndarray, imatrix: np.ndarray | None, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0/Q5_0 (d, codes): the reference rounding, or the imatrix path (make_qx_quants)."""
    if imatrix is None:
        return _symmetric_codes(x, nmax)
    xs, w = _row_weights(x, imatrix, 32)
    d, levels = make_qx_quants(xs, nmax, w)
    return d, levels.T


def _quantize_q4_0(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    d, q = _symmetric(x, imatrix, 8)
    return assemble(len(x), to_half(d), _pack_nibbles(q))


def _quantize_q5_0(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    d, q = _symmetric(x, imatrix, 16)
    return assemble(len(x), to_half(d), _pack_high_bits(q), _pack_nibbles(q))


def _affine(x: np.ndarray, imatrix: np.ndarray | None, levels: int) -> tuple[np.ndarray, ...]:
    """Q4_1/Q5_1 (d, min, codes): reference, or the imatrix path (make_qkx3_quants, 37 steps)."""
    if imatrix is None:
        return _affine_codes(x, levels)
    xs, w = _row_weights(x, imatrix, 32)
    d, the_min, L = make_qkx_quants(xs, w, levels - 1, -0.9, 0.05, 36, use_mad=False)
    return d, -the_min, L.T


def _quantize_q4_1(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    d, m, q = _affine(x, imatrix, 16)
    return assemble(len(x), to_half(d), to_half(m), _pack_nibbles(q))


def _quantize_q5_1(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    d, m, q = _affine(x, imatrix, 32)
    return assemble(len(x), to_half(d), to_half(m), _pack_high_bits(q), _pack_nibbles(q))


def _q8_codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d = max|x| / 127 (float32, before the float16 store), codes roundf(x / d)."""
    xb = _blocks(x, 32)
    d = abs_max_rows(xb) / F32(127)
    return d, roundf(xb * inverse(d)[:, None], np.int8)


def _quantize_q8_0(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    d, q = _q8_codes(x)
    return assemble(len(x), to_half(d), q)


def _quantize_q8_1(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """`quantize_row_q8_1_ref`: Q8_0's codes plus s = d * sum(codes)."""
    d, q = _q8_codes(x)
    s = q.sum(axis=1, dtype=np.int32).astype(F32) * d
    return assemble(len(x), to_half(d), to_half(s), q)


def _quantize_q1_0(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """d = mean |x| (summed in order), one sign bit per value (x >= 0 sets it)."""
    xb = _blocks(x, 128)
    d = seq_sum(position_major(np.abs(xb), 128)) / F32(128)
    signs = np.packbits((xb >= 0).reshape(-1), bitorder="little").reshape(-1, 16)
    return assemble(len(x), to_half(d), signs)


def _quantize_q2_0(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """d = max |x|, codes roundf(x / d) + 1 clipped to [0, 3], four 2-bit codes per byte."""
    xb = _blocks(x, 64)
    d = abs_max_rows(xb)
    q = np.clip(roundf(xb * inverse(d)[:, None]) + F32(1), 0, 3).astype(np.uint8)
    w = q.view(np.uint32)  # codes 4j..4j+3 in the bytes of word j
    qs = (w | (w >> 6) | (w >> 12) | (w >> 18)) & 0xFF
    return assemble(len(x), to_half(d), qs.astype(np.uint8))


_T = GGMLType
DEQUANTIZERS = {
    _T.Q4_0: quiet(_dequantize_q4_0),
    _T.Q4_1: quiet(_dequantize_q4_1),
    _T.Q5_0: quiet(_dequantize_q5_0),
    _T.Q5_1: quiet(_dequantize_q5_1),
    _T.Q8_0: quiet(_dequantize_q8_0),
    _T.Q8_1: quiet(_dequantize_q8_1),
    _T.Q1_0: quiet(_dequantize_q1_0),
    _T.Q2_0: quiet(_dequantize_q2_0),
}
QUANTIZERS = {
    _T.Q4_0: quiet(_quantize_q4_0),
    _T.Q4_1: quiet(_quantize_q4_1),
    _T.Q5_0: quiet(_quantize_q5_0),
    _T.Q5_1: quiet(_quantize_q5_1),
    _T.Q8_0: quiet(_quantize_q8_0),
    _T.Q8_1: quiet(_quantize_q8_1),
    _T.Q1_0: quiet(_quantize_q1_0),
    _T.Q2_0: quiet(_quantize_q2_0),
}
