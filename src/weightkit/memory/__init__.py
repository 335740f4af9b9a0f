"""Memory planning as Ollama does it: KV cache and compute-graph sizes, and fitting layers onto GPUs."""

from .graph import GraphEstimate, LayerSizes, graph_size, kv_cache_sizes, layer_sizes
from .layout import (
    GPU,
    FullFitRequired,
    GPUAllocation,
    GPULayers,
    LayoutEnv,
    LayoutInputError,
    LayoutPlan,
    SystemMemory,
    SystemMemoryExceeded,
    fit_layers,
    layout_env,
    plan_layout,
)

__all__ = [
    "GPU",
    "FullFitRequired",
    "GPUAllocation",
    "GPULayers",
    "GraphEstimate",
    "LayerSizes",
    "LayoutEnv",
    "LayoutInputError",
    "LayoutPlan",
    "SystemMemory",
    "SystemMemoryExceeded",
    "fit_layers",
    "graph_size",
    "kv_cache_sizes",
    "layer_sizes",
    "layout_env",
    "plan_layout",
]
