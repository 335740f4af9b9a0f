"""TQ1_0 and TQ2_0: ternary weights (BitNet b1.58, TriLMs) as {-1, 0, 1} times one f16 scale per 256 values.

TQ2_0 spends 2 bits per trit (code t + 1, four per byte, element m + 32*n of a 128-element half in bits
2n of byte m). TQ1_0 packs 5 trits per byte as a fixed-point fraction: the base-3 number q of the trits
(first trit most significant) is stored as ceil(q * 256 / 243), so trit n is read back as the integer
part of 3 * (byte * 3**n mod 256) / 256; bytes 0-31 hold elements 0-159 (trit n of byte m is element
m + 32n), bytes 32-47 elements 160-239 (stride 16), and the 4 `qh` bytes hold 4 trits each (stride 4).
The scale is the block's max |x|; ggml ignores the importance matrix for both types.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import GGMLType
from ._block_layout import bitfields
from ._parallel import Scratch, readonly

# TQ1_0 byte groups: (first byte, bytes, trits per byte); trit n of byte m of a group covers element
# start + n*bytes + m, where start counts the elements of the groups before.
_TQ1_GROUPS = ((0, 32, 5), (32, 16, 5), (48, 4, 4))
_POW3 = readonly(np.array([1, 3, 9, 27, 81], dtype=np.uint8)[:, None])


def _scale(blocks: np.ndarray) -> np.ndarray:
    """The f16 scale stored at the end of each block, as float32 (n, 1)."""
    return blocks[:, -2:].copy().view(np.float16).astype(np.float32)


def dequantize_tq1_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """ggml's `dequantize_row_tq1_0`: trit n of byte b is `((uint8_t)(b * 3**n) * 3) >> 8`, i.e. 0, 1 or 2
    as the wrapped product q is below 86, below 171, or not.

    Every byte of the chunk is multiplied by each power of 3 in one uint8 loop (the scale bytes too; their
    trits are never read), and the trits of each byte group are cast straight into their runs of `out`.
    The temporaries share one allocation: glibc then keeps it between calls rather than handing it back to
    the OS, whose fresh pages cost more to fault in than the arithmetic.
    """
    n = len(blocks)
    q, low = np.empty((2, len(_POW3), blocks.size), dtype=np.uint8)
    np.multiply(blocks.reshape(1, -1), _POW3, out=q)
    np.less(q, 86, out=low.view(bool))
    trits = np.greater_equal(q, 171, out=q.view(bool)).view(np.int8)
    trits -= low.view(np.int8)  # trit - 1
    trits = trits.reshape(len(_POW3), n, -1)
    start = 0
    for first, size, n_trits in _TQ1_GROUPS:
        runs = out[:, start : start + n_trits * size].reshape(n, n_trits, size)
        np.copyto(runs, trits[:n_trits, :, first : first + size].transpose(1, 0, 2))
        start += n_trits * size
    with np.errstate(invalid="ignore"):  # 0 * inf is NaN in ggml too
        out *= _scale(blocks)


def dequantize_tq2_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """ggml's `dequantize_row_tq2_0`: (code - 1) * d, code n of byte m being element m + 32n of its
    128-element half; the codes are unpacked as int8, shifted by -1, then cast and scaled in `out`."""
    with Scratch() as scratch:
        codes = bitfields(blocks[:, :64].reshape(-1, 2, 32), (0, 2, 4, 6), 3, scratch=scratch).view(np.int8)
        codes -= np.int8(1)
        np.copyto(out.reshape(codes.shape), codes)
    with np.errstate(invalid="ignore"):
        out *= _scale(blocks)


def _abs_max(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-block amax as ggml's `amax = MAX(amax, fabsf(v))` scanned in order from 0, and which blocks
    hold a NaN.

    `MAX(a, b)` is `a > b ? a : b`, so a NaN replaces the running max and the next value replaces the NaN:
    the result is the max of |x| after the last NaN, or NaN when the last value is NaN.
    """
    a = np.abs(x)
    amax = a.max(axis=1)  # NaN exactly in the blocks holding one
    nan_rows = np.isnan(amax)
    if nan_rows.any():
        a = a[nan_rows]
        nan = np.isnan(a)
        last = a.shape[1] - 1 - np.argmax(nan[:, ::-1], axis=1)
        after = np.where(np.arange(a.shape[1]) > last[:, None], a, 0).max(axis=1)
        amax[nan_rows] = np.where(last == a.shape[1] - 1, np.float32(np.nan), after)
    return amax, nan_rows


def _fp16_bits(d: np.ndarray) -> np.ndarray:
    """GGML_FP32_TO_FP16 as two little-endian bytes: round to nearest even, NaN becomes 0x7E00."""
    with np.errstate(over="ignore"):
        h = d.astype("<f2").view(np.uint16)
    h = np.where(np.isnan(d), np.uint16(0x7E00), h).astype("<u2")
    return h.view(np.uint8).reshape(-1, 2)


def _lround_codes(v: np.ndarray) -> np.ndarray:
    """`lroundf(v) + 1` as x86 ggml computes it, mod 256 (the codes only meet uint8 arithmetic):
    lroundf of NaN, infinity or anything past 2**63 is LONG_MIN, so the code is 1."""
    v = v.astype(np.float64)
    r = np.floor(np.abs(v) + 0.5)
    r[~(r < 2.0**63)] = 0
    return ((np.copysign(r, v).astype(np.int64) + 1) & 0xFF).astype(np.uint8)


def _codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`lroundf(x * id) + 1` (mod 256) for each value of blocks `x` (n, 256), and the f16 scale bytes.

    Normally |x * id| <= 1 (plus rounding), where lroundf is two comparisons and NaN gives 1 like ggml;
    only blocks whose NaNs let values exceed the max, or whose 1/amax overflows, need the general rule.
    """
    d, nan_rows = _abs_max(x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
        v = x * inv[:, None]
    codes = (v >= 0.5).view(np.uint8) + np.uint8(1) - (v <= -0.5).view(np.uint8)
    wild = nan_rows | np.isinf(inv)
    if wild.any():
        codes[wild] = _lround_codes(v[wild])
    return codes, _fp16_bits(d)


def _base3(codes: np.ndarray) -> np.ndarray:
    """The trits of `codes` (n, trits, m) as one base-3 number per column, first trit most significant,
    in uint8 arithmetic as ggml's `q = q*3 + xi` does."""
    q = np.zeros((codes.shape[0], codes.shape[2]), dtype=np.uint8)
    for t in range(codes.shape[1]):
        q *= np.uint8(3)
        q += codes[:, t]
    return q


def quantize_tq1_0(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """ggml's `quantize_row_tq1_0_ref`: 5 trits per byte as ceil(q * 256 / 243), in uint8 arithmetic."""
    codes, d = _codes(x.reshape(-1, 256))
    n = codes.shape[0]
    q = np.empty((n, 52), dtype=np.uint8)
    q[:, :32] = _base3(codes[:, :160].reshape(n, 5, 32))
    q[:, 32:48] = _base3(codes[:, 160:240].reshape(n, 5, 16))
    q[:, 48:] = _base3(codes[:, 240:].reshape(n, 4, 4)) * np.uint8(3)  # the 5th trit is 0
    blocks = np.empty((n, 54), dtype=np.uint8)
    blocks[:, :52] = ((q.astype(np.uint16) * 256 + 242) // 243).astype(np.uint8)  # uint8 store wraps
    blocks[:, 52:] = d
    return blocks.reshape(x.shape[0], x.shape[1] // 256 * 54)


def quantize_tq2_0(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """ggml's `quantize_row_tq2_0_ref`: code n of byte m is element m + 32n of its 128-element half."""
    codes, d = _codes(x.reshape(-1, 256))
    n = codes.shape[0]
    codes = codes.reshape(n, 2, 4, 32) & np.uint8(3)
    blocks = np.empty((n, 66), dtype=np.uint8)
    packed = codes[:, :, 0] | (codes[:, :, 1] << 2) | (codes[:, :, 2] << 4) | (codes[:, :, 3] << 6)
    blocks[:, :64] = packed.reshape(n, 64)
    blocks[:, 64:] = d
    return blocks.reshape(x.shape[0], x.shape[1] // 256 * 66)


DEQUANTIZERS = {GGMLType.TQ1_0: dequantize_tq1_0, GGMLType.TQ2_0: dequantize_tq2_0}
QUANTIZERS = {GGMLType.TQ1_0: quantize_tq1_0, GGMLType.TQ2_0: quantize_tq2_0}
