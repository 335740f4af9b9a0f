"""Conversions between formats and tensor types: streaming, atomic, one tensor at a time."""

from .imatrix import read_imatrix
from .options import QuantizeOptions, resolve_target
from .quantize import QuantizeReport, plan_types, quantize_gguf

__all__ = ["QuantizeOptions", "QuantizeReport", "plan_types", "quantize_gguf", "read_imatrix", "resolve_target"]
