"""llama.cpp's memory, from a GGUF's metadata and tensor infos: weights, KV cache, recurrent state, output and
compute buffers per device, as the llama.cpp that llama-cpp-python 0.3.36 bundles allocates them."""

from .context import ContextParams, ContextRefused
from .engine import DeviceMemory, LlamaCppEstimate, estimate
from .hparams import ARCHITECTURES
from .settings import LlamaCppSettings

__all__ = ["ARCHITECTURES", "ContextParams", "ContextRefused", "DeviceMemory", "LlamaCppEstimate",
           "LlamaCppSettings", "estimate"]  # fmt: skip
