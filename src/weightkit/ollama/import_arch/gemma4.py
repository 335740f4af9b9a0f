"""Gemma 4 and its unified and assistant variants (x/create/gemma4.go): the token embedding in 8 bits, and
v/k/down projections in 8 bits on the layers that take more bits (v and k everywhere with 8 experts)."""

from __future__ import annotations

from ...dtypes import MLXQuantType
from ..tensor_blobs import (
    aligned,
    eight_bit,
    is_audio_tower,
    is_embed_tokens_weight,
    is_vision,
    layer_index,
    promote_embedding,
    sensitive_type,
    tensor_quantization,
    use_more_bits,
)
from .config_fields import int_field


def policy(config: dict):
    n_layers = int_field(config, ("num_hidden_layers",), ("text_config", "num_hidden_layers"))
    n_experts = int_field(config, ("num_experts",), ("text_config", "num_experts"))

    def promote(name: str) -> bool:
        if not n_layers:
            return False
        if n_experts == 8 and (".v_proj" in name or ".k_proj" in name):
            return True
        return ".k_proj" not in name and use_more_bits(layer_index(name), n_layers)

    def quantization(name: str, shape: tuple[int, ...], quantize: MLXQuantType) -> MLXQuantType | None:
        if is_embed_tokens_weight(name):
            return promote_embedding(shape, quantize) or (quantize if aligned(shape, quantize) else None)
        sensitive = not (is_vision(name) or is_audio_tower(name)) and (
            ".v_proj" in name or ".k_proj" in name or "down_proj" in name
        )
        if sensitive and eight_bit(quantize) is not quantize:
            return sensitive_type(promote(name), shape, quantize)
        return tensor_quantization(name, shape, quantize)

    return quantization
