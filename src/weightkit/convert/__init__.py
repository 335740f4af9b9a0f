"""Conversions between formats and tensor types: streaming, atomic, one tensor at a time."""

from .imatrix import read_imatrix
from .quantize import QuantizeReport, plan_types, quantize_gguf

__all__ = ["QuantizeReport", "plan_types", "quantize_gguf", "read_imatrix"]
