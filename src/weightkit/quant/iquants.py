"""The IQ ("importance quantization") types: IQ1_S/M, IQ2_XXS/XS/S, IQ3_XXS/S, IQ4_NL/XS.

Kernels live in `iq_dequant` (decoding) and the `iq*_quant` modules (encoding); this module only
gathers their tables for `weightkit.quant`.
"""

from __future__ import annotations

from . import iq1_quant, iq4_quant, iq_grid_quant
from .iq_dequant import DEQUANTIZERS

QUANTIZERS = {**iq4_quant.QUANTIZERS, **iq_grid_quant.QUANTIZERS, **iq1_quant.QUANTIZERS}

__all__ = ["DEQUANTIZERS", "QUANTIZERS"]
