"""safetensors: read with every rule of Hugging Face's reference, write as it does."""

from .checkpoint import SafetensorsCheckpoint, write_checkpoint
from .file import SafetensorsFile
from .reader import MAX_HEADER_SIZE
from .writer import SafetensorsTensor, tensor_from, write_safetensors

__all__ = [
    "MAX_HEADER_SIZE",
    "SafetensorsCheckpoint",
    "SafetensorsFile",
    "SafetensorsTensor",
    "tensor_from",
    "write_checkpoint",
    "write_safetensors",
]
