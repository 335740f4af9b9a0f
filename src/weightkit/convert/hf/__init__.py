"""Hugging Face checkpoints to GGUF, byte for byte as llama.cpp's `convert_hf_to_gguf.py`.

`convert_hf(folder, output, outtype)` is the front door; `ARCHITECTURES` is the table of supported model
classes (one entry each), `CONFIG_CLASSES` transformers' config defaults by model_type.
"""

from .architectures import ARCHITECTURES, Conversion
from .config import CONFIG_CLASSES
from .convert import OUTTYPE_CHOICES, ConvertReport, convert_hf

__all__ = ["ARCHITECTURES", "CONFIG_CLASSES", "OUTTYPE_CHOICES", "Conversion", "ConvertReport", "convert_hf"]
