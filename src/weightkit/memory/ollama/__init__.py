"""Ollama's retired memory estimate (GraphSize and its layer layout, at Ollama f63eea3d), reproduced to the byte."""

from .engine import OllamaEstimate, OllamaLoad, OllamaSettings, default_context, estimate, resolve
from .graph import GraphEstimate, LayerSizes, graph_size, kv_cache_sizes, layer_sizes
from .layout import GPUAllocation, GPULayers, LayoutPlan, fit_layers, plan_layout

__all__ = [
    "GPUAllocation",
    "GPULayers",
    "GraphEstimate",
    "LayerSizes",
    "LayoutPlan",
    "OllamaEstimate",
    "OllamaLoad",
    "OllamaSettings",
    "default_context",
    "estimate",
    "fit_layers",
    "graph_size",
    "kv_cache_sizes",
    "layer_sizes",
    "plan_layout",
    "resolve",
]
