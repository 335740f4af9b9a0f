"""GGUF models to Hugging Face folders that transformers loads: `convert_gguf_to_hf(gguf, folder, dtype)`.

`EXPORTS` is the table of supported GGUF architectures (one entry each, its names and transforms the forward
table's, inverted).
"""

from .architectures import EXPORTS, Export
from .export import DTYPE_CHOICES, ExportReport, convert_gguf_to_hf

__all__ = ["DTYPE_CHOICES", "EXPORTS", "Export", "ExportReport", "convert_gguf_to_hf"]
