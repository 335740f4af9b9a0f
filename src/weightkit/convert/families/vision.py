"""The pieces projector conversions (`--mmproj`) share: the SigLIP vision encoder's tensor names and shapes."""

from __future__ import annotations

from .family import Dims

#: SigLIP's vision encoder (`SiglipVisionModel`) -> llama.cpp's clip names, under the checkpoint's prefix
_SIGLIP_NAMES = {
    "embeddings.patch_embedding": "v.patch_embd",
    "embeddings.position_embedding": "v.position_embd",
    "encoder.layers.{bid}.layer_norm1": "v.blk.{bid}.ln1",
    "encoder.layers.{bid}.layer_norm2": "v.blk.{bid}.ln2",
    "encoder.layers.{bid}.self_attn.q_proj": "v.blk.{bid}.attn_q",
    "encoder.layers.{bid}.self_attn.k_proj": "v.blk.{bid}.attn_k",
    "encoder.layers.{bid}.self_attn.v_proj": "v.blk.{bid}.attn_v",
    "encoder.layers.{bid}.self_attn.out_proj": "v.blk.{bid}.attn_out",
    "encoder.layers.{bid}.mlp.fc1": "v.blk.{bid}.ffn_up",
    "encoder.layers.{bid}.mlp.fc2": "v.blk.{bid}.ffn_down",
    "post_layernorm": "v.post_ln",
}
_V = "hidden_size"
#: clip tensor -> its shape by the vision config's keys (None: any)
SIGLIP_REQUIRED: dict[str, Dims] = {
    "v.patch_embd.weight": (_V, "num_channels", "patch_size", "patch_size"),
    "v.position_embd.weight": (None, _V),
    **{f"v.blk.{{bid}}.{norm}.weight": (_V,) for norm in ("ln1", "ln2")},
    **{f"v.blk.{{bid}}.attn_{x}.weight": (_V, _V) for x in ("q", "k", "v", "out")},
    "v.blk.{bid}.ffn_up.weight": ("intermediate_size", _V),
    "v.blk.{bid}.ffn_down.weight": (_V, "intermediate_size"),
    "v.post_ln.weight": (_V,),
}


def siglip_names(prefix: str) -> dict[str, str]:
    """The SigLIP encoder's HF -> clip names for a checkpoint that holds it under `prefix`."""
    return {prefix + hf: gguf for hf, gguf in _SIGLIP_NAMES.items()}
