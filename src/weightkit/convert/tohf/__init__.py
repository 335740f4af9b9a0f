"""GGUF models to Hugging Face folders that transformers loads: `convert_gguf_to_hf(gguf, folder, dtype)`.

What it writes for each GGUF architecture is its family's `Export` (`convert.families`), whose names and
transforms are the forward conversion's, inverted.
"""

from .export import DTYPE_CHOICES, ExportReport, convert_gguf_to_hf

__all__ = ["DTYPE_CHOICES", "ExportReport", "convert_gguf_to_hf"]
