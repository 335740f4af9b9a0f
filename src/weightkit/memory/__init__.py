"""Memory planning as Ollama does it: KV cache and compute-graph sizes, and fitting layers onto GPUs."""

from .graph import GraphEstimate, LayerSizes, graph_size, kv_cache_sizes, layer_sizes

__all__ = ["GraphEstimate", "LayerSizes", "graph_size", "kv_cache_sizes", "layer_sizes"]
