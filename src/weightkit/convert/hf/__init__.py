"""Hugging Face checkpoints to GGUF, byte for byte as llama.cpp's `convert_hf_to_gguf.py`.

`convert_hf(folder, output, outtype)` is the front door (`convert_lora`: a PEFT adapter, as
`convert_lora_to_gguf.py`); what it knows of each model family (the classes it
converts, transformers' config defaults) is declared in `convert.families`.
"""

from .convert import OUTTYPE_CHOICES, ConvertReport, convert_hf
from .lora import LORA_OUTTYPES, convert_lora

__all__ = ["LORA_OUTTYPES", "OUTTYPE_CHOICES", "ConvertReport", "convert_hf", "convert_lora"]
