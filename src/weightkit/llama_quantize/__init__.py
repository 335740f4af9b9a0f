"""llama.cpp's llama-quantize: a model re-quantized to a file type (Q4_K_M, ...) or a type, streaming one
tensor at a time into an atomically written GGUF. `QuantizeOptions` holds its flags; `mixes` is its
per-tensor mixture, `imatrix` its importance-matrix files."""

from .imatrix import read_imatrix
from .options import QuantizeOptions, resolve_target
from .quantize import QuantizeReport, plan_types, quantize_gguf, quantize_model

__all__ = [
    "QuantizeOptions",
    "QuantizeReport",
    "plan_types",
    "quantize_gguf",
    "quantize_model",
    "read_imatrix",
    "resolve_target",
]
