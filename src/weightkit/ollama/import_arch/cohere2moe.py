"""Cohere2-MoE (x/create/cohere2moe.go): the token embedding in 8 bits (or kept), the router kept, and v/k/down
projections in 8 bits on the layers that take more bits."""

from __future__ import annotations

from ...dtypes import MLXQuantType
from ..tensor_blobs import (
    eight_bit,
    is_embed_tokens_weight,
    layer_index,
    promote_embedding,
    sensitive_type,
    tensor_quantization,
    use_more_bits,
)
from .config_fields import int_field


def policy(config: dict):
    n_layers = int_field(config, ("num_hidden_layers",))

    def quantization(name: str, shape: tuple[int, ...], quantize: MLXQuantType) -> MLXQuantType | None:
        if is_embed_tokens_weight(name) and len(shape) == 2:
            return promote_embedding(shape, quantize)
        if name.endswith(".mlp.gate.weight"):
            return None
        sensitive = ".v_proj" in name or ".k_proj" in name or "down_proj" in name
        if sensitive and eight_bit(quantize) is not quantize and n_layers > 0 and layer_index(name) >= 0:
            return sensitive_type(use_more_bits(layer_index(name), n_layers), shape, quantize)
        return tensor_quantization(name, shape, quantize)

    return quantization
