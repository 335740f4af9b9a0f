"""Muse Glimmer (x/create/glimmer.go): vision kept, the token embedding in 8 bits, attention projections
always and the gates and MLP down projection on the layers that take more bits in 8 bits."""

from __future__ import annotations

from ...dtypes import MLXQuantType
from ..tensor_blobs import (
    aligned,
    eight_bit,
    is_embed_tokens_weight,
    is_vision,
    layer_index,
    promote_embedding,
    sensitive_type,
    tensor_quantization,
    use_more_bits,
)
from .config_fields import int_field

_ATTENTION = (".self_attn.q_proj", ".self_attn.o_proj", ".self_attn.k_proj", ".self_attn.v_proj")
_SENSITIVE = (*_ATTENTION, ".self_attn.gate_proj", ".self_attn.output_gate_proj", ".mlp.down_proj")


def policy(config: dict):
    n_layers = int_field(config, ("num_hidden_layers",), ("text_config", "num_hidden_layers"))

    def promote(name: str) -> bool:
        if any(p in name for p in _ATTENTION):
            return True
        return n_layers > 0 and use_more_bits(layer_index(name), n_layers)

    def quantization(name: str, shape: tuple[int, ...], quantize: MLXQuantType) -> MLXQuantType | None:
        if is_vision(name):
            return None
        if is_embed_tokens_weight(name):
            return promote_embedding(shape, quantize) or (quantize if aligned(shape, quantize) else None)
        if any(p in name for p in _SENSITIVE) and eight_bit(quantize) is not quantize:
            return sensitive_type(promote(name), shape, quantize)
        return tensor_quantization(name, shape, quantize)

    return quantization
