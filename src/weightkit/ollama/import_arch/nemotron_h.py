"""Nemotron-H, text and its VL and omni variants (x/create/nemotron_h.go): vision and sound kept, the Mamba
gate and conv1d kept, embeddings and lm_head in 8 bits, and for the fp4 types the sensitive projections in
mxfp8 (attention always, the rest on the layers that take more bits)."""

from __future__ import annotations

from ...dtypes import MLXQuantType
from ..tensor_blobs import aligned, layer_index, promote_embedding, tensor_quantization, use_more_bits
from .config_fields import int_field

_OTHER_MODALITIES = ("vision_model.", "mlp1.", "sound_encoder.", "sound_projection.")
_ATTENTION = (".mixer.q_proj.weight", ".mixer.k_proj.weight", ".mixer.v_proj.weight", ".mixer.o_proj.weight")


def _sensitive(name: str) -> bool:
    return (
        name.endswith((*_ATTENTION, ".mixer.out_proj.weight", ".mixer.down_proj.weight",
                       ".mixer.shared_experts.down_proj.weight"))
        or (".mixer.experts." in name and name.endswith(".down_proj.weight"))
    )  # fmt: skip


def policy(config: dict):
    n_layers = int_field(config, ("num_hidden_layers",), ("llm_config", "num_hidden_layers"))

    def promote(name: str) -> bool:
        layer = layer_index(name)
        return name.endswith(_ATTENTION) or layer < 0 or use_more_bits(layer, n_layers)

    def quantization(name: str, shape: tuple[int, ...], quantize: MLXQuantType) -> MLXQuantType | None:
        if name.startswith(_OTHER_MODALITIES) or name.endswith((".mixer.gate.weight", ".mixer.conv1d.weight")):
            return None
        if name.endswith(("embeddings.weight", "lm_head.weight")):
            return promote_embedding(shape, quantize)
        if quantize in (MLXQuantType.NVFP4, MLXQuantType.MXFP4) and _sensitive(name):
            if aligned(shape, MLXQuantType.MXFP8) and promote(name):
                return MLXQuantType.MXFP8
            return quantize if aligned(shape, quantize) else None
        return tensor_quantization(name, shape, quantize)

    return quantization
