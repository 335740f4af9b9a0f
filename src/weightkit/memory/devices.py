"""The devices a model is planned onto: GPUs as their runtimes report them, and system memory."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1 << 20
#: VRAM Ollama sets aside on every GPU for context structures (``DeviceInfo.MinimumMemory``).
MINIMUM_MEMORY = 457 * MiB
#: The same on Apple's Metal.
METAL_MINIMUM_MEMORY = 512 * MiB


@dataclass(frozen=True)
class GPU:
    """One GPU as Ollama's ``ml.DeviceInfo`` describes it, reduced to what the layout reads.

    ``id`` is unique only within ``library`` (``"CUDA"``, ``"ROCm"``, ``"Metal"``, ``"Vulkan"``…);
    the pair identifies the device. ``free`` is the free memory in bytes as reported at discovery.
    ``total`` and ``name`` are carried for reports only; the layout does not read them.
    """

    id: str
    library: str
    free: int
    integrated: bool = False
    total: int = 0
    name: str = ""

    @property
    def key(self) -> tuple[str, str]:
        """``(id, library)``: Ollama's ``DeviceID``."""
        return (self.id, self.library)

    @property
    def minimum_memory(self) -> int:
        """VRAM Ollama keeps free on this device: 512 MiB on Metal, 457 MiB elsewhere."""
        return METAL_MINIMUM_MEMORY if self.library == "Metal" else MINIMUM_MEMORY


@dataclass(frozen=True)
class SystemMemory:
    """System RAM in bytes: Ollama's ``ml.SystemInfo`` (total, free, and free swap)."""

    total: int
    free: int
    swap: int = 0
