"""GGUF, llama.cpp's model format: read (v2/v3, either byte order, split models) and write (streaming, atomic)."""

from .constants import DEFAULT_ALIGNMENT, GGUFValueType
from .edit import edit_gguf
from .file import GGUFFile, GGUFSplit
from .split import open_gguf, split_path, write_split
from .values import Metadata, Value
from .writer import GGUFWriter, plan_tensor, row_groups, write_gguf, write_gguf_skeleton

__all__ = [
    "DEFAULT_ALIGNMENT",
    "GGUFFile",
    "GGUFSplit",
    "GGUFValueType",
    "GGUFWriter",
    "Metadata",
    "Value",
    "edit_gguf",
    "open_gguf",
    "plan_tensor",
    "row_groups",
    "split_path",
    "write_gguf",
    "write_gguf_skeleton",
    "write_split",
]
