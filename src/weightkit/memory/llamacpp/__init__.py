"""llama.cpp's memory, from a GGUF's metadata and tensor infos: weights, KV cache, recurrent state, output and
compute buffers per device, as the llama.cpp that llama-cpp-python 0.3.36 bundles allocates them."""

from .architectures import ARCHITECTURES, read_hparams
from .cache import make_memory
from .compute import compute_buffer
from .context import ContextParams, ContextRefused, make_context
from .engine import DeviceMemory, LlamaCppEstimate, estimate
from .fitting import fit
from .placement import place_layers
from .projector import ProjectorEstimate, estimate_projector
from .settings import LlamaCppSettings

__all__ = ["ARCHITECTURES", "ContextParams", "ContextRefused", "DeviceMemory", "LlamaCppEstimate",
           "LlamaCppSettings", "ProjectorEstimate", "compute_buffer", "estimate", "estimate_projector", "fit",
           "make_context", "make_memory", "place_layers", "read_hparams"]  # fmt: skip
