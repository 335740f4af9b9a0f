"""Poolside's Laguna (x/create/laguna.go): with the fp types, an explicit recipe (embedding and lm_head in
8 bits; attention, the dense layers' MLP and the experts at the requested type, kept entirely at mxfp8;
expert down projections kept or promoted on the layers that take more bits); the generic rule otherwise."""

from __future__ import annotations

from ...dtypes import MLXQuantType
from ..tensor_blobs import (
    eight_bit,
    is_embed_tokens_weight,
    layer_index,
    promote_embedding,
    tensor_quantization,
    use_more_bits,
)
from .config_fields import int_field, list_field

_ATTENTION = tuple(f".self_attn.{p}_proj.weight" for p in ("q", "k", "v", "o", "g"))
_DENSE_MLP = (".mlp.gate_proj.weight", ".mlp.up_proj.weight", ".mlp.down_proj.weight")
_MLP_WEIGHTS = (".gate_proj.weight", ".up_proj.weight", ".down_proj.weight")
_FP = (MLXQuantType.NVFP4, MLXQuantType.MXFP4, MLXQuantType.MXFP8)


def _unpromoted(name: str, shape: tuple[int, ...], quantize: MLXQuantType) -> MLXQuantType | None:
    """The generic rule without its 8-bit promotion."""
    q = tensor_quantization(name, shape, quantize)
    return quantize if q is not quantize and q is eight_bit(quantize) else q


def policy(config: dict):
    types = list_field(config, "mlp_layer_types", str)
    dense = {i for i, t in enumerate(types) if t == "dense"} | set(list_field(config, "mlp_only_layers", int)) or {0}
    n_layers = int_field(config, ("num_hidden_layers",)) or len(types) or 40

    def promote_down(name: str) -> bool:
        return use_more_bits(layer_index(name), n_layers, n_layers // 2 - 4)

    def quantization(name: str, shape: tuple[int, ...], quantize: MLXQuantType) -> MLXQuantType | None:
        if quantize not in _FP:
            return tensor_quantization(name, shape, quantize)
        mxfp8 = quantize is MLXQuantType.MXFP8
        attention = any(p in name for p in _ATTENTION)
        routed = ".mlp.experts." in name
        if is_embed_tokens_weight(name) or name.endswith("lm_head.weight"):
            return promote_embedding(shape, quantize)
        if name.endswith(".mlp.gate.weight") or (mxfp8 and attention):
            return None
        if attention or (any(p in name for p in _DENSE_MLP) and layer_index(name) in dense):
            return _unpromoted(name, shape, quantize)
        if mxfp8 and routed and name.endswith(".down_proj.weight"):
            return None if promote_down(name) else _unpromoted(name, shape, quantize)
        if ".mlp.shared_expert.down_proj.weight" in name:
            if mxfp8:
                return None
            return tensor_quantization(name, shape, quantize) if promote_down(name) else _unpromoted(
                name, shape, quantize)  # fmt: skip
        if name.endswith(_MLP_WEIGHTS) and (".mlp.shared_expert." in name or routed):
            return _unpromoted(name, shape, quantize)
        return None

    return quantization
