"""Memory planning: how much memory a model takes on each device, and whether it fits.

The front door is `estimate(model, settings, gpus)`. The settings choose the engine whose behaviour is
reproduced: `OllamaSettings` for Ollama's own estimate and layer layout (`weightkit.memory.ollama`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import FullFitRequired, LayoutInputError, SystemMemoryExceeded
from ..model import ModelFile
from . import ollama
from .devices import GPU, METAL_MINIMUM_MEMORY, MINIMUM_MEMORY, SystemMemory
from .env import OllamaEnv, ollama_env
from .ollama import OllamaEstimate, OllamaSettings

__all__ = [
    "GPU",
    "METAL_MINIMUM_MEMORY",
    "MINIMUM_MEMORY",
    "FullFitRequired",
    "LayoutInputError",
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
    settings: OllamaSettings | None = None,
    gpus: Sequence[GPU] = (),
    *,
    system: SystemMemory | None = None,
) -> OllamaEstimate:
    """The memory `model` takes with `settings` on `gpus` (none: the CPU alone), from metadata and tensor
    infos only. With `system` given, a load that needs more system memory than it has raises
    `SystemMemoryExceeded`."""
    return ollama.estimate(model, settings, gpus, system=system)
