"""The unquantized types: IEEE floats, bfloat16 and integers, converted with numpy casts.

F16 and BF16 are also ggml "quantization" targets: casting float32 to them rounds to nearest-even, as
ggml's `GGML_FP32_TO_FP16` and `ggml_compute_fp32_to_bf16` do. A NaN becomes a BF16 NaN the way ggml (and
gguf-py) make it: the top 16 bits with the quiet bit set, keeping sign and payload.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..dtypes import GGML_TYPES, GGMLType
from ._gather import gather

# Every float16 bit pattern's float32 value, by numpy's own cast: a gather from this 256 KiB table is
# faster than that cast (even with AVX-512), with the same bits.
_F16_TO_F32 = np.arange(1 << 16, dtype=np.uint32).astype("<u2").view("<f2").astype(np.float32)
_F16_TO_F32.flags.writeable = False


# Every bfloat16 bit pattern's float16 value, by numpy's own casts (to float32, which is exact, then to
# float16): one gather from this 128 KiB table instead of the two casts, the second of which is slow.
with np.errstate(over="ignore"):
    _BF16_TO_F16 = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32).astype(np.float16)
_BF16_TO_F16.flags.writeable = False


def _bf16_to_f16(x: np.ndarray) -> np.ndarray:
    """Rows of bfloat16 values as float16 bytes, as casting them through float32 gives."""
    return gather(_BF16_TO_F16, x.view(np.uint16)).view(np.uint8).reshape(x.shape[0], -1)


def _from_f16_bits(bits: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The float32 values of float16 bit patterns (uint16), through the table."""
    return gather(_F16_TO_F32, bits, out=out)


def as_float32(x: np.ndarray) -> np.ndarray:
    """`x` as a C-contiguous float32 array (itself if it already is one); float16 through the table."""
    if x.dtype == np.float16:  # native byte order
        return _from_f16_bits(x.view(np.uint16))
    return np.ascontiguousarray(x, dtype=np.float32)


def _dequantizer(t: GGMLType):
    dtype = GGML_TYPES[t].numpy

    def dequantize(blocks: np.ndarray, out: np.ndarray) -> None:
        out[:, 0] = blocks.reshape(-1).view(dtype)

    return dequantize


def _dequantize_f16(blocks: np.ndarray, out: np.ndarray) -> None:
    _from_f16_bits(blocks.reshape(-1).view("<u2"), out=out.reshape(-1))


def _quantizer(t: GGMLType):
    dtype = GGML_TYPES[t].numpy

    def quantize(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
        with np.errstate(over="ignore"):  # too large for F16: inf, as ggml's conversion gives
            return x.astype(dtype).view(np.uint8).reshape(x.shape[0], -1)

    return quantize


def _quantize_bf16(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """`ggml_compute_fp32_to_bf16`: round to nearest-even on the bits; NaN -> (bits >> 16) | 64."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16  # no overflow: NaNs, the only inputs near 2^32, go below
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    out = np.where(nan, (bits >> 16) | 64, rounded).astype("<u2")
    return out.view(np.uint8).reshape(x.shape[0], -1)


DEQUANTIZERS = {t: _dequantizer(t) for t in (GGMLType.F32, GGMLType.BF16)} | {GGMLType.F16: _dequantize_f16}
QUANTIZERS = {t: _quantizer(t) for t in (GGMLType.F32, GGMLType.F16)} | {GGMLType.BF16: _quantize_bf16}


def _bf16_to_bf16(x: np.ndarray) -> np.ndarray:
    """Rows of bfloat16 values as BF16 bytes, as the float32 route gives them: the same bits, but NaNs quieted."""
    bits = x.view(np.uint16)
    nan = (bits & 0x7FFF) > 0x7F80
    return np.where(nan, bits | 0x40, bits).view(np.uint8).reshape(x.shape[0], -1)


# (source dtype, target): kernels from the source's own values straight to the target's bytes, no float32.
DIRECT = {(np.dtype(ml_dtypes.bfloat16), GGMLType.F16): _bf16_to_f16,
          (np.dtype(ml_dtypes.bfloat16), GGMLType.BF16): _bf16_to_bf16}  # fmt: skip
