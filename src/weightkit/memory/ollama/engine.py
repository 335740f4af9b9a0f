"""Ollama's whole estimate for one model: its settings resolution, graph and KV sizes, and the layout.

For a model, a context length and a set of GPUs: how much VRAM and RAM the model takes and how its layers
split, the way Ollama (at f63eea3d, the last version with this estimate) would load it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...errors import ArgumentError
from ...model import ModelFile
from ..devices import GPU, SystemMemory
from ..env import ollama_env
from .graph import KV_CACHE_TYPES, GraphEstimate, graph_size, layer_sizes
from .layout import LayoutPlan, plan_layout

GIB = 1 << 30
QUANTIZED_KV = ("q8_0", "q4_0")
# Architectures Ollama's scheduler loads with num_parallel 1 (server/sched.go).
SINGLE_SEQUENCE = frozenset({
    "mllama", "qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe", "qwen3next", "lfm2", "lfm2moe", "nemotron_h",
    "nemotron_h_moe", "nemotron_h_omni",
})  # fmt: skip


@dataclass(frozen=True)
class OllamaSettings:
    """What to ask Ollama for; None means Ollama's variable (OLLAMA_CONTEXT_LENGTH, OLLAMA_NUM_PARALLEL,
    OLLAMA_KV_CACHE_TYPE, OLLAMA_FLASH_ATTENTION), then its default. `num_gpu` is the number of layers to
    offload (-1: as many as fit). `environ` replaces `os.environ` (for tests and what-ifs)."""

    context: int | None = None
    batch: int = 512
    parallel: int | None = None
    kv_cache_type: str | None = None
    flash_attention: bool | None = None
    num_gpu: int = -1
    environ: Mapping[str, str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name, low in (("context", 1), ("batch", 1), ("parallel", 1), ("num_gpu", -1)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise ArgumentError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.kv_cache_type is not None and self.kv_cache_type.lower() not in KV_CACHE_TYPES:
            known = ", ".join(k for k in KV_CACHE_TYPES if k)
            raise ArgumentError(f"kv_cache_type {self.kv_cache_type!r}: Ollama's are {known}")


@dataclass(frozen=True)
class OllamaLoad:
    """The settings Ollama loads with, after its defaults and adjustments (each adjustment is a note)."""

    context: int
    batch: int
    parallel: int
    kv_cache_type: str
    flash_attention: bool
    gpu_overhead: int
    sched_spread: bool
    num_gpu: int = -1
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class OllamaEstimate:
    load: OllamaLoad
    weights: int  # all tensor weights, as Ollama sizes them
    graph: GraphEstimate
    layout: LayoutPlan

    @property
    def notes(self) -> tuple[str, ...]:
        return self.load.notes

    @property
    def gpu_share(self) -> float:
        """What `ollama ps` shows as the GPU percentage: VRAM over the whole footprint."""
        return self.layout.vram / self.layout.total if self.layout.total else 0.0


def default_context(gpus: Sequence[GPU], gpu_overhead: int) -> int:
    """Ollama's VRAM-tier default num_ctx when OLLAMA_CONTEXT_LENGTH is unset (server/routes.go)."""
    vram = sum(max((g.total or g.free) - gpu_overhead, 0) for g in gpus)
    return 262144 if vram >= 47 * GIB else 32768 if vram >= 23 * GIB else 4096


def resolve(model: ModelFile, gpus: Sequence[GPU], settings: OllamaSettings) -> OllamaLoad:
    """Flags first, then Ollama's variables, then its defaults; then Ollama's adjustments: the context
    capped at the model's trained length, the batch at the context (raised to it for embedding models),
    one sequence for embedding models and a few architectures, and a quantized KV cache only with flash
    attention."""
    env = ollama_env(settings.environ)
    notes = []
    context = settings.context or env.context_length or default_context(gpus, env.gpu_overhead)
    parallel = settings.parallel or env.num_parallel
    flash_attention = env.flash_attention if settings.flash_attention is None else settings.flash_attention
    kv_cache_type = (settings.kv_cache_type or env.kv_cache_type or "f16").lower()
    if kv_cache_type not in KV_CACHE_TYPES:
        notes.append(f"Ollama does not know the KV cache type {kv_cache_type!r}: it uses f16")
        kv_cache_type = "f16"
    arch = model.metadata.get("general.architecture", "")
    trained = model.metadata.get(f"{arch}.context_length")
    if isinstance(trained, int) and 0 < trained < context:
        notes.append(f"context {context} is longer than the model's trained {trained}: Ollama uses {trained}")
        context = trained
    batch = min(settings.batch, context)
    embedding = f"{arch}.pooling_type" in model.metadata
    if embedding and batch < context:
        batch = context  # embedding models take the whole context as one batch
    if parallel != 1 and (embedding or arch in SINGLE_SEQUENCE):
        notes.append(f"Ollama loads {'embedding models' if embedding else arch} with one parallel sequence")
        parallel = 1
    if kv_cache_type in QUANTIZED_KV and not flash_attention:
        notes.append(f"a {kv_cache_type} KV cache needs flash attention: Ollama falls back to f16")
        kv_cache_type = "f16"
    return OllamaLoad(context, batch, parallel, kv_cache_type, flash_attention, env.gpu_overhead,
                      env.sched_spread, settings.num_gpu, tuple(notes))  # fmt: skip


def estimate(
    model: ModelFile,
    settings: OllamaSettings | None = None,
    gpus: Sequence[GPU] = (),
    *,
    system: SystemMemory | None = None,
    require_full: bool = False,
) -> OllamaEstimate:
    """Graph, KV and layout for `model` as Ollama would load it with `settings` on `gpus`."""
    load = resolve(model, gpus, settings or OllamaSettings())
    graph = graph_size(model, load.context, load.batch, load.parallel, load.kv_cache_type, load.flash_attention)
    sizes = layer_sizes(model)
    layout = plan_layout(
        [sizes.block(i) for i in range(len(graph.kv))],
        list(graph.kv),
        sizes.output,
        graph.full_offload,
        graph.partial_offload,
        gpus,
        num_gpu=load.num_gpu,
        require_full=require_full,
        system=system,
        gpu_overhead=load.gpu_overhead,
        sched_spread=load.sched_spread,
    )
    return OllamaEstimate(load, sum(sizes.groups.values()), graph, layout)
