"""Hugging Face checkpoints to GGUF, byte for byte as llama.cpp's `convert_hf_to_gguf.py`.

`convert_hf(folder, output, outtype)` is the front door; what it knows of each model family (the classes it
converts, transformers' config defaults) is declared in `convert.families`.
"""

from .convert import OUTTYPE_CHOICES, ConvertReport, convert_hf

__all__ = ["OUTTYPE_CHOICES", "ConvertReport", "convert_hf"]
