"""MXFP4 and NVFP4: 4-bit E2M1 codes under a shared block scale, bit-exact with ggml.

Both store E2M1 codes (sign bit + 3-bit magnitude index) two to a byte, element j of a (sub-)block in
the low nibble and element j + half in the high nibble. ggml keeps the E2M1 values doubled (0, 1, 2, 3,
4, 6, 8, 12) so they are integers, and halves the scale to compensate:
- MXFP4: 32-element blocks, one E8M0 byte `e` (a bare power of two), scale 2**(e - 128).
- NVFP4: 64-element blocks of four 16-element sub-blocks, each with a UE4M3 byte (unsigned FP8, bias 7),
  scale = half its value; ggml decodes 0x7F (E4M3's NaN) as 0.
Quantization rounds each value to the nearest code with ggml's own scan (first strict minimum of the
rounded float32 errors), which is what decides ties and huge or non-finite inputs.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import GGMLType
from ._gather import gather

# The doubled E2M1 values of the 16 codes; code 8 is "-0", which ggml decodes as +0.
_KVALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.float32)
_MAGNITUDES = _KVALUES[:8]
_MIDPOINTS = (_MAGNITUDES[1:] + _MAGNITUDES[:-1]) / np.float32(2)
# Values of the low and high nibble of every byte, so decoding is one gather per half.
_LOW = _KVALUES[np.arange(256) & 15]
_HIGH = _KVALUES[np.arange(256) >> 4]


def _e8m0_half_table() -> np.ndarray:
    """ggml's `ggml_e8m0_to_fp32_half`: 2**(e - 128), with denormal bit patterns for e = 0 and 1."""
    e = np.arange(256, dtype=np.uint32)
    bits = np.where(e < 2, np.uint32(0x00200000) << e, (e - 1) << 23).astype(np.uint32)
    return bits.view(np.float32)


def _ue4m3_table() -> np.ndarray:
    """ggml's `ggml_ue4m3_to_fp32` (value / 2) for every byte; the top bit is ignored, 0x7F reads as 0."""
    x = np.arange(256)
    exp, man = (x >> 3) & 15, x & 7
    raw = np.where(exp == 0, man * 2.0**-9, np.ldexp(1 + man / 8, exp - 7))
    raw[[0, 0x7F]] = 0
    return (raw * 0.5).astype(np.float32)  # exact: at most 4 significant bits


_E8M0_HALF = _e8m0_half_table()
_UE4M3 = _ue4m3_table()


def _decode_nibbles(qs: np.ndarray, d: np.ndarray, out: np.ndarray) -> None:
    """out[..., :h] / out[..., h:] = low / high nibble values of `qs` (..., h) times scale `d` (..., 1)."""
    half = qs.shape[-1]
    with np.errstate(over="ignore"):  # 12 * 2**127 is inf in ggml too
        np.multiply(gather(_LOW, qs), d, out=out[..., :half])
        np.multiply(gather(_HIGH, qs), d, out=out[..., half:])


def dequantize_mxfp4(blocks: np.ndarray, out: np.ndarray) -> None:
    """ggml's `dequantize_row_mxfp4`: byte 0 is the exponent, bytes 1-16 the codes."""
    _decode_nibbles(blocks[:, 1:], gather(_E8M0_HALF, blocks[:, :1]), out)


def dequantize_nvfp4(blocks: np.ndarray, out: np.ndarray) -> None:
    """ggml's `dequantize_row_nvfp4`: bytes 0-3 are the sub-block scales, then 8 code bytes per sub-block."""
    n = blocks.shape[0]
    d = gather(_UE4M3, blocks[:, :4]).reshape(n, 4, 1)
    _decode_nibbles(blocks[:, 4:].reshape(n, 4, 8), d, out.reshape(n, 4, 16))


def _abs_max(x: np.ndarray) -> np.ndarray:
    """Per-row max of |x| as ggml's `if (amax < fabsf(v)) amax = fabsf(v)` from 0: NaNs never get in."""
    return np.fmax.reduce(np.abs(x), axis=1, initial=np.float32(0))


def _scan_magnitudes(a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """ggml's scan over the 8 magnitudes for |x| = `a` with scale `d` (same shape): the first strict
    minimum of the float32 errors |kvalue*d - a|; NaN errors never win, so NaN stays at 0."""
    best = a.copy()  # the error of magnitude 0
    idx = np.zeros(a.shape, dtype=np.uint8)
    err = np.empty_like(a)
    with np.errstate(over="ignore", invalid="ignore"):  # scales that wrapped around, infinite inputs
        for k in range(1, 8):
            np.abs(np.subtract(_MAGNITUDES[k] * d, a, out=err), out=err)
            better = err < best
            np.copyto(best, err, where=better)
            np.copyto(idx, np.uint8(k), where=better)
    return idx


def _nearest_codes(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """ggml's `best_index_mxfp4` for each value of `x` (n, k) with scale `d` (n,): the first of the 16
    codes with the smallest float32 |kvalue*d - x|.

    For x >= 0 no negative code beats code 0, and for x < 0 no positive one does (their errors are at
    least |x|, and code 0 comes first), so only the 8 magnitudes of |x| compete and the sign is added
    after; mirrored errors round the same, so ties break the same way.

    While |x| <= 16d, the two errors around |x| are exact in float32 (Sterbenz: kvalue*d is exact and
    within a factor 2 of |x|) and every other error is larger by about d, so ggml's choice is the larger
    neighbour exactly when |x| > midpoint*d (a product that is exact too). Anything else (huge values
    under a clamped or wrapped scale, scales so large that 12d overflows, zero scales, inf, NaN) goes
    through the literal scan.
    """
    a = np.abs(x)
    d = d[:, None]
    with np.errstate(over="ignore"):  # MXFP4 scales from 2**124 up: the top kvalues*d are inf
        thresholds = _MIDPOINTS * d
        limit = np.where(_MAGNITUDES[-1] * d < np.inf, np.float32(16) * d, np.float32(0))
    odd = ~(a <= limit)
    idx = np.zeros(x.shape, dtype=np.uint8)
    for i in range(_MIDPOINTS.size):
        idx += a > thresholds[:, i : i + 1]
    if odd.any():
        idx[odd] = _scan_magnitudes(a[odd], np.broadcast_to(d, a.shape)[odd])
    idx |= (np.signbit(x) & (idx != 0)).view(np.uint8) << 3
    return idx


def _pack_halves(idx: np.ndarray) -> np.ndarray:
    half = idx.shape[1] // 2
    return idx[:, :half] | (idx[:, half:] << 4)


def _e8m0_exponent(amax: np.ndarray) -> np.ndarray:
    """ggml's `(uint8_t)(floorf(log2f(amax)) - 2 + 127)`, or 0 for amax = 0.

    log2f rounds to float32 before the floor, so values just below a power of two can land on it: the
    float64 log2 rounded to float32 reproduces that. Out-of-range results wrap as the x86 conversion does
    (through a 32-bit int, whose low byte is kept; infinity becomes INT_MIN, so 0).
    """
    with np.errstate(divide="ignore"):
        log2 = np.log2(amax.astype(np.float64)).astype(np.float32)
    e = np.floor(log2) - np.float32(2) + np.float32(127)
    finite = np.isfinite(e)
    e_int = np.where(finite, e, 0).astype(np.int32)
    return np.where(finite & (amax > 0), e_int & 0xFF, 0).astype(np.uint8)


def quantize_mxfp4(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """ggml's `quantize_row_mxfp4_ref` (ggml ignores the importance matrix for MXFP4)."""
    xb = x.reshape(-1, 32)
    e = _e8m0_exponent(_abs_max(xb))
    blocks = np.empty((xb.shape[0], 17), dtype=np.uint8)
    blocks[:, 0] = e
    blocks[:, 1:] = _pack_halves(_nearest_codes(xb, _E8M0_HALF[e]))
    return blocks.reshape(x.shape[0], x.shape[1] // 32 * 17)


def _fp32_to_ue4m3(s: np.ndarray) -> np.ndarray:
    """ggml's `ggml_fp32_to_ue4m3`: clamp to 448, round the mantissa half-up on one bit (no sticky bits),
    saturate at 0x7E; below 2**-6 the subnormal mantissa is `(int)(s*512 + 0.5f)` capped at 7."""
    s = np.minimum(s, np.float32(448))  # NaN is dropped by `positive` below
    bits = s.view(np.uint32)
    exp = ((bits >> 23) & 0xFF).astype(np.int32) - 120
    man = ((bits >> 20) & 7) + ((bits >> 19) & 1)
    carry = man > 7
    exp += carry
    normal = np.where(exp >= 15, 0x7E, (exp << 3) | np.where(carry, 0, man))
    sub = np.minimum((s * np.float32(512) + np.float32(0.5)).astype(np.int32), 7)
    code = np.where(exp - carry <= 0, sub, normal)
    positive = s > 0
    return np.where(positive, code, 0).astype(np.uint8)


def quantize_nvfp4(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """ggml's `quantize_row_nvfp4_ref` (ggml ignores the importance matrix for NVFP4)."""
    xs = x.reshape(-1, 16)
    ue = _fp32_to_ue4m3(_abs_max(xs) / np.float32(6))
    qs = _pack_halves(_nearest_codes(xs, _UE4M3[ue]))
    blocks = np.empty((xs.shape[0] // 4, 36), dtype=np.uint8)
    blocks[:, :4] = ue.reshape(-1, 4)
    blocks[:, 4:] = qs.reshape(-1, 32)
    return blocks.reshape(x.shape[0], x.shape[1] // 64 * 36)


DEQUANTIZERS = {GGMLType.MXFP4: dequantize_mxfp4, GGMLType.NVFP4: dequantize_nvfp4}
QUANTIZERS = {GGMLType.MXFP4: quantize_mxfp4, GGMLType.NVFP4: quantize_nvfp4}
