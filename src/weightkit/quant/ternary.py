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


def _tq1_trit_tables() -> np.ndarray:
    """Value (trit - 1) of trit n of every TQ1_0 byte, as ggml's `((uint8_t)(q * 3**n) * 3) >> 8` reads it:
    row n is the table for trit n."""
    q = (np.arange(256)[None, :] * 3 ** np.arange(5)[:, None]) & 0xFF
    return (((q * 3) >> 8) - 1).astype(np.float32)


def _tq2_trit_tables() -> np.ndarray:
    """Value (code - 1) of the 2-bit code at bits 2n of every byte: row n is the table for code n."""
    return (((np.arange(256)[None, :] >> (2 * np.arange(4))[:, None]) & 3) - 1).astype(np.float32)


_TQ1_TRITS = _tq1_trit_tables()  # (5, 256)
_TQ2_TRITS = _tq2_trit_tables()  # (4, 256)
# TQ1_0 byte groups: (first byte, bytes, trits per byte); trit n of byte m of a group covers element
# start + n*bytes + m, where start counts the elements of the groups before.
_TQ1_GROUPS = ((0, 32, 5), (32, 16, 5), (48, 4, 4))


def _scale(blocks: np.ndarray) -> np.ndarray:
    """The f16 scale stored at the end of each block, as float32 (n, 1)."""
    return blocks[:, -2:].copy().view(np.float16).astype(np.float32)


def dequantize_tq1_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """ggml's `dequantize_row_tq1_0`: one table lookup per trit position, each filling a run of outputs."""
    d = _scale(blocks)
    start = 0
    with np.errstate(invalid="ignore"):  # 0 * inf is NaN in ggml too
        for first, size, n_trits in _TQ1_GROUPS:
            qs = blocks[:, first : first + size]
            for n in range(n_trits):
                np.multiply(np.take(_TQ1_TRITS[n], qs), d, out=out[:, start : start + size])
                start += size


def dequantize_tq2_0(blocks: np.ndarray, out: np.ndarray) -> None:
    """ggml's `dequantize_row_tq2_0`: one table lookup per 2-bit position, each filling 32 outputs."""
    d = _scale(blocks)
    with np.errstate(invalid="ignore"):
        for half in range(2):
            qs = blocks[:, 32 * half : 32 * half + 32]
            for n in range(4):
                start = 128 * half + 32 * n
                np.multiply(np.take(_TQ2_TRITS[n], qs), d, out=out[:, start : start + 32])


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
