"""Memory planning: how much memory a model takes on each device, and whether it fits.

The front door is `estimate(model, settings, gpus)`. The settings choose the engine whose allocations are
reproduced: `LlamaCppSettings` (the default) for llama.cpp's own, as llama-server, Ollama and LM Studio run it
(`weightkit.memory.llamacpp`); `OllamaSettings` for the estimate Ollama used before it moved to llama.cpp's fit
(`weightkit.memory.ollama`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ArgumentError, FullFitRequired, LayoutInputError, SystemMemoryExceeded
from ..model import ModelFile
from . import llamacpp, ollama
from .devices import GPU, METAL_MINIMUM_MEMORY, MINIMUM_MEMORY, SystemMemory
from .env import OllamaEnv, ollama_env
from .llamacpp import DeviceMemory, LlamaCppEstimate, LlamaCppSettings
from .ollama import OllamaEstimate, OllamaSettings

__all__ = [
    "GPU",
    "METAL_MINIMUM_MEMORY",
    "MINIMUM_MEMORY",
    "DeviceMemory",
    "FullFitRequired",
    "LayoutInputError",
    "LlamaCppEstimate",
    "LlamaCppSettings",
    "OllamaEnv",
    "OllamaEstimate",
    "OllamaSettings",
    "SystemMemory",
    "SystemMemoryExceeded",
    "estimate",
    "ollama_env",
]


def estimate(
    model: ModelFile,
    settings: LlamaCppSettings | OllamaSettings | None = None,
    gpus: Sequence[GPU] = (),
    *,
    system: SystemMemory | None = None,
    adapters: Sequence[ModelFile] = (),
    adapter_scales: Sequence[float] = (),
) -> LlamaCppEstimate | OllamaEstimate:
    """The memory `model` takes with `settings` (default: llama-server's defaults) on `gpus` (none: the CPU
    alone), from metadata and tensor infos only. With Ollama's settings and `system` given, a load that needs
    more system memory than it has raises `SystemMemoryExceeded`. `adapters`: LoRA adapter GGUFs llama.cpp loads
    with it (`--lora`; Ollama no longer loads adapters), at `adapter_scales` (`--lora-scaled`; 1 where not given)."""
    if isinstance(settings, OllamaSettings):
        if adapters:
            raise ArgumentError("LoRA adapters: Ollama no longer loads them; estimate them with llama.cpp's settings")
        return ollama.estimate(model, settings, gpus, system=system)
    return llamacpp.estimate(model, settings, gpus, adapters=adapters, adapter_scales=adapter_scales)
