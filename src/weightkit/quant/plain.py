"""The unquantized types: IEEE floats, bfloat16 and integers, converted with numpy casts.

F16 and BF16 are also ggml "quantization" targets: casting float32 to them rounds to nearest-even, as
ggml's `GGML_FP32_TO_FP16` and `ggml_compute_fp32_to_bf16` do (BF16 keeps NaN quiet instead of rounding).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import GGML_TYPES, GGMLType


def _dequantizer(t: GGMLType):
    dtype = GGML_TYPES[t].numpy

    def dequantize(blocks: np.ndarray, out: np.ndarray) -> None:
        out[:, 0] = blocks.reshape(-1).view(dtype)

    return dequantize


def _quantizer(t: GGMLType):
    dtype = GGML_TYPES[t].numpy

    def quantize(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
        with np.errstate(over="ignore"):  # too large for F16: inf, as ggml's conversion gives
            return x.astype(dtype).view(np.uint8).reshape(x.shape[0], -1)

    return quantize


DEQUANTIZERS = {t: _dequantizer(t) for t in (GGMLType.F32, GGMLType.F16, GGMLType.BF16)}
QUANTIZERS = {t: _quantizer(t) for t in (GGMLType.F32, GGMLType.F16, GGMLType.BF16)}
