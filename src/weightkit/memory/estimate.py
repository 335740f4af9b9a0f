"""The whole estimate for one model: Ollama's settings resolution, graph and KV sizes, and the layout.

This is what `weightkit estimate` shows: for a model, a context length and a set of GPUs, how much VRAM
and RAM the model takes and how its layers split, the way Ollama (at f63eea3d) would load it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..model import ModelFile
from .graph import GraphEstimate, graph_size, layer_sizes
from .layout import GPU, LayoutPlan, SystemMemory, layout_env, plan_layout

GIB = 1 << 30
QUANTIZED_KV = ("q8_0", "q4_0")
# Architectures Ollama's scheduler loads with num_parallel 1 (server/sched.go).
SINGLE_SEQUENCE = frozenset({
    "mllama", "qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe", "qwen3next", "lfm2", "lfm2moe", "nemotron_h",
    "nemotron_h_moe", "nemotron_h_omni",
})  # fmt: skip


@dataclass(frozen=True)
class Settings:
    """Ollama's load settings, after its defaults and adjustments."""

    context: int
    batch: int
    parallel: int
    kv_cache_type: str
    flash_attention: bool
    gpu_overhead: int
    sched_spread: bool
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Estimate:
    settings: Settings
    weights: int  # all tensor weights, as Ollama sizes them
    graph: GraphEstimate
    layout: LayoutPlan
    notes: tuple[str, ...] = field(default=())

    @property
    def gpu_share(self) -> float:
        """What `ollama ps` shows as the GPU percentage: VRAM over the whole footprint."""
        return self.layout.vram / self.layout.total if self.layout.total else 0.0


def default_context(gpus: Sequence[GPU], gpu_overhead: int) -> int:
    """Ollama's VRAM-tier default num_ctx when OLLAMA_CONTEXT_LENGTH is unset (server/routes.go)."""
    vram = sum(max((g.total or g.free) - gpu_overhead, 0) for g in gpus)
    return 262144 if vram >= 47 * GIB else 32768 if vram >= 23 * GIB else 4096


def resolve_settings(
    model: ModelFile,
    gpus: Sequence[GPU],
    *,
    context: int | None = None,
    batch: int = 512,
    parallel: int | None = None,
    kv_cache_type: str | None = None,
    flash_attention: bool | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Flags first, then Ollama's variables (OLLAMA_CONTEXT_LENGTH, OLLAMA_NUM_PARALLEL, OLLAMA_FLASH_ATTENTION,
    OLLAMA_KV_CACHE_TYPE, OLLAMA_GPU_OVERHEAD, OLLAMA_SCHED_SPREAD), then Ollama's defaults; then Ollama's
    adjustments: the context capped at the model's trained length, the batch at the context (raised to it
    for embedding models), and a quantized KV cache only with flash attention."""
    env = os.environ if environ is None else environ
    lenv = layout_env(env)
    notes = []
    if context is None:
        context = _uint(env, "OLLAMA_CONTEXT_LENGTH", 0) or default_context(gpus, lenv.gpu_overhead)
    if parallel is None:
        parallel = max(_uint(env, "OLLAMA_NUM_PARALLEL", 1), 1)
    if flash_attention is None:
        flash_attention = env.get("OLLAMA_FLASH_ATTENTION", "").strip().lower() in ("1", "true", "t", "yes", "on")
    if kv_cache_type is None:
        kv_cache_type = env.get("OLLAMA_KV_CACHE_TYPE", "").strip().lower() or "f16"
    arch = model.metadata.get("general.architecture", "")
    trained = model.metadata.get(f"{arch}.context_length")
    if isinstance(trained, int) and 0 < trained < context:
        notes.append(f"context {context} is longer than the model's trained {trained}: Ollama uses {trained}")
        context = trained
    batch = min(batch, context)
    embedding = f"{arch}.pooling_type" in model.metadata
    if embedding and batch < context:
        batch = context  # embedding models take the whole context as one batch
    if parallel != 1 and (embedding or arch in SINGLE_SEQUENCE):
        notes.append(f"Ollama loads {'embedding models' if embedding else arch} with one parallel sequence")
        parallel = 1
    if kv_cache_type in QUANTIZED_KV and not flash_attention:
        notes.append(f"a {kv_cache_type} KV cache needs flash attention: Ollama falls back to f16")
        kv_cache_type = "f16"
    return Settings(context, batch, parallel, kv_cache_type, flash_attention, lenv.gpu_overhead, lenv.sched_spread,
                    tuple(notes))  # fmt: skip


def _uint(env: Mapping[str, str], key: str, default: int) -> int:
    text = env.get(key, "").strip()
    try:
        return int(text) if text else default
    except ValueError:
        return default  # Ollama logs and uses the default


def estimate(
    model: ModelFile,
    gpus: Sequence[GPU],
    settings: Settings,
    *,
    num_gpu: int = -1,
    system: SystemMemory | None = None,
    require_full: bool = False,
) -> Estimate:
    """Graph, KV and layout for `model` under `settings` (see `resolve_settings`)."""
    graph = graph_size(
        model, settings.context, settings.batch, settings.parallel, settings.kv_cache_type, settings.flash_attention
    )
    sizes = layer_sizes(model)
    blocks = len(graph.kv)
    layout = plan_layout(
        [sizes.block(i) for i in range(blocks)],
        list(graph.kv),
        sizes.output,
        graph.full_offload,
        graph.partial_offload,
        gpus,
        num_gpu=num_gpu,
        require_full=require_full,
        system=system,
        gpu_overhead=settings.gpu_overhead,
        sched_spread=settings.sched_spread,
    )
    weights = sum(sizes.groups.values())
    return Estimate(settings, weights, graph, layout, settings.notes)
