"""Conversions between formats and tensor types: streaming, atomic, one tensor at a time."""

from .quantize import QuantizeReport, plan_types, quantize_gguf, read_imatrix

__all__ = ["QuantizeReport", "plan_types", "quantize_gguf", "read_imatrix"]
