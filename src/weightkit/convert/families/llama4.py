"""Llama 4 (Scout, Maverick): `Llama4Model` of llama.cpp's converter (its text model: dense and mixture-of-experts
layers interleaved, no rope un-permutation, the GPT-2-style vocabulary) and its projector (`Llama4VisionModel`: the
vision model, its pixel-shuffle adapter and the projection, `--mmproj`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import FormatError, UnsupportedError
from ..hf.config import CONFIG_NAME, ConfigClass, HFConfig
from ..hf.experts import Tensors, transposed_tensor
from ..hf.kv import KV
from ..hf.parameters import write_text_parameters
from ..hf.projector import projector_config, write_vision_parameters
from ..hf.tensors import SourceTensor
from .decoder import (
    DECODER_ATTENTION_NAMES,
    DECODER_REQUIRED,
    DENSE_FFN,
    gpt2_vocab,
    head_dim_from_hidden_size,
    kv_heads_default_to_heads,
    number,
    rope_parameters_of_5x,
)
from .family import Conversion, Dims, Family
from .llama import drop_text_model_prefix, llama3_rope_factors, llama_parameters
from .vision import projector

_FFN = "model.layers.{bid}.feed_forward."
_NAMES = DECODER_ATTENTION_NAMES | {
    _FFN + "gate_proj": "blk.{bid}.ffn_gate",
    _FFN + "up_proj": "blk.{bid}.ffn_up",
    _FFN + "down_proj": "blk.{bid}.ffn_down",
    _FFN + "router": "blk.{bid}.ffn_gate_inp",
    _FFN + "experts.gate_proj": "blk.{bid}.ffn_gate_exps",
    _FFN + "experts.up_proj": "blk.{bid}.ffn_up_exps",
    _FFN + "experts.down_proj": "blk.{bid}.ffn_down_exps",
    _FFN + "shared_expert.gate_proj": "blk.{bid}.ffn_gate_shexp",
    _FFN + "shared_expert.up_proj": "blk.{bid}.ffn_up_shexp",
    _FFN + "shared_expert.down_proj": "blk.{bid}.ffn_down_shexp",
}
#: every layer's attention and norms; the dense layers' and the MoE layers' feed-forward tensors vary by layer
_REQUIRED: dict[str, Dims] = {k: v for k, v in DECODER_REQUIRED.items() if k not in DENSE_FFN}


def _transposed(t: SourceTensor, name: str, columns: slice = slice(None)) -> tuple[str, SourceTensor]:
    return name, transposed_tensor(t, name, columns)


def _split_experts(tensors: Tensors, h: HFConfig) -> Tensors:
    """`Llama4Model.modify_tensors`: the fused experts as transformers saves them, `gate_up_proj` [experts, hidden,
    2 ff] transposed and split into its gate and up halves, `down_proj` [experts, ff, hidden] transposed."""
    out: Tensors = []
    for name, t in tensors:
        if "gate_up_proj" in name:
            if len(t.shape) != 3 or t.shape[-1] % 2:
                raise FormatError(t.file, None, f"tensor {name!r} {list(t.shape)} is not [experts, hidden, 2 * ff]")
            half = t.shape[-1] // 2
            out.append(_transposed(t, name.replace("gate_up_proj", "gate_proj.weight"), slice(0, half)))
            out.append(_transposed(t, name.replace("gate_up_proj", "up_proj.weight"), slice(half, None)))
        elif name.endswith("down_proj"):
            if len(t.shape) != 3:
                raise FormatError(t.file, None, f"tensor {name!r} {list(t.shape)} is not [experts, ff, hidden]")
            out.append(_transposed(t, name + ".weight"))
        else:
            out.append((name, t))
    return out


def _text_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """The common keys, with the dense layers' width as the feed-forward length (`Llama4Model.__init__` takes
    `intermediate_size_mlp` for `intermediate_size`, the experts' width)."""
    write_text_parameters(kv, arch, HFConfig(h | {"intermediate_size": number(h, "intermediate_size_mlp")}), rope,
                          file_type)  # fmt: skip


def _parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Llama4Model.set_gguf_parameters` after Llama's: the MoE interleave, the experts' width, and no sliding
    window where every layer attends fully."""
    kv.u32(f"{arch}.interleave_moe_layer_step", number(h, "interleave_moe_layer_step"))
    kv.u32(f"{arch}.expert_feed_forward_length", number(h, "intermediate_size"))
    if "layer_types" in h and all(kind == "full_attention" for kind in h["layer_types"]):
        kv.u32(f"{arch}.attention.sliding_window", 0)


def _layer_types(h: dict[str, Any]) -> None:
    """`Llama4TextConfig.__post_init__`: a layer without rope every `no_rope_layer_interval`, attending fully; the
    others chunked (where there is a chunk size)."""
    if not h.get("no_rope_layers"):
        interval = h["no_rope_layer_interval"]
        h["no_rope_layers"] = [int((i + 1) % interval != 0) for i in range(h["num_hidden_layers"])]
    if h.get("layer_types") is None:
        chunked = h.get("attention_chunk_size") is not None
        h["layer_types"] = ["chunked_attention" if r and chunked else "full_attention" for r in h["no_rope_layers"]]


_LLAMA4 = Conversion(
    gguf="llama4",
    tensor_names=_NAMES,
    required=_REQUIRED,
    vocab=gpt2_vocab,
    filters=(drop_text_model_prefix,),
    extra_tensors=(llama3_rope_factors,),
    text_parameters=_text_parameters,
    parameters=(llama_parameters, _parameters),
    rewrites=(_split_experts,),
)

# --- the projector ------------------------------------------------------------------------------------------------

_V = "vision_model."
_VISION_NAMES = {
    _V + "class_embedding": "v.class_embd",
    _V + "positional_embedding_vlm": "v.position_embd",
    _V + "patch_embedding.linear": "v.patch_embd",
    _V + "layernorm_pre": "v.pre_ln",
    _V + "layernorm_post": "v.post_ln",
    _V + "model.layers.{bid}.self_attn.q_proj": "v.blk.{bid}.attn_q",
    _V + "model.layers.{bid}.self_attn.k_proj": "v.blk.{bid}.attn_k",
    _V + "model.layers.{bid}.self_attn.v_proj": "v.blk.{bid}.attn_v",
    _V + "model.layers.{bid}.self_attn.o_proj": "v.blk.{bid}.attn_out",
    _V + "model.layers.{bid}.input_layernorm": "v.blk.{bid}.ln1",
    _V + "model.layers.{bid}.post_attention_layernorm": "v.blk.{bid}.attn_post_norm",
    _V + "model.layers.{bid}.mlp.fc1": "v.blk.{bid}.ffn_up",
    _V + "model.layers.{bid}.mlp.fc2": "v.blk.{bid}.ffn_down",
    # the pixel-shuffle adapter's two layers (gguf-py maps them by their number as if blocks, so the reference
    # refuses an encoder of fewer than 3 layers, which no released model has)
    _V + "vision_adapter.mlp.fc1": "mm.model.mlp.1",
    _V + "vision_adapter.mlp.fc2": "mm.model.mlp.2",
    "multi_modal_projector.linear_1": "mm.model.fc",
}
_VH, _VFF = "hidden_size", "intermediate_size"
_VISION_REQUIRED: dict[str, Dims] = {
    "v.class_embd": (_VH,),
    "v.position_embd.weight": (None, _VH),
    "v.patch_embd.weight": (_VH, None),
    **{f"v.blk.{{bid}}.attn_{x}.weight": (_VH, _VH) for x in ("q", "k", "v", "out")},
    "v.blk.{bid}.ffn_up.weight": (_VFF, _VH),
    "v.blk.{bid}.ffn_down.weight": (_VH, _VFF),
    "mm.model.mlp.1.weight": ("projector_input_dim", _VFF),
    "mm.model.mlp.2.weight": ("projector_output_dim", "projector_input_dim"),
    "mm.model.fc.weight": (None, "vision_output_dim"),
}


def _vision_tensors(name: str) -> str | None:
    """`Llama4VisionModel.filter_tensors`: the vision model and projector only; the position embedding named as a
    weight."""
    if "multi_modal_projector" not in name and "vision_model" not in name:
        return None
    return name + ".weight" if "positional_embedding_vlm" in name and ".weight" not in name else name


def _vision_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Llama4VisionModel.set_gguf_parameters` after the common clip keys: the projector type, the norm epsilon,
    the pixel shuffle's scale and GELU (the only activation it converts)."""
    h = projector_config(h)
    kv.string("clip.projector_type", "llama4")
    kv.f32("clip.vision.attention.layer_norm_epsilon", number(h, "norm_eps"))
    kv.u32("clip.vision.projector.scale_factor", int(1.0 / number(h, "pixel_shuffle_ratio")))
    if h.get("hidden_act") != "gelu":
        raise UnsupportedError(f"{folder / CONFIG_NAME}: vision_config.hidden_act is {h.get('hidden_act')!r}; "
                               "Llama 4's projector converts only 'gelu'")  # fmt: skip
    kv.bool("clip.use_gelu", True)


_LLAMA4_VISION = projector(
    tensor_names=_VISION_NAMES,
    required=_VISION_REQUIRED,
    filters=(_vision_tensors,),
    text_parameters=write_vision_parameters,
    parameters=(_vision_parameters,),
)

FAMILY = Family(
    name="llama4",
    configs={
        # transformers 5.25's (Llama 4 is read through them by the reference, as 5.x saves it)
        "llama4": ConfigClass(
            "Llama4Config",
            {"boi_token_index": 200080, "eoi_token_index": 200081, "image_token_index": 200092,
             "tie_word_embeddings": False},
            text_config="llama4_text",
            vision_config="llama4_vision_model",
            transformers=5,
        ),
        "llama4_text": ConfigClass(
            "Llama4TextConfig",
            {"vocab_size": 202048, "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
             "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
             "hidden_act": "silu", "max_position_embeddings": 4096 * 32, "rms_norm_eps": 1e-5, "pad_token_id": None,
             "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False, "num_experts_per_tok": 1,
             "num_local_experts": 16, "interleave_moe_layer_step": 1, "use_qk_norm": True, "no_rope_layers": None,
             "no_rope_layer_interval": 4, "attention_chunk_size": 8192, "layer_types": None,
             "attention_bias": False},
            (kv_heads_default_to_heads, head_dim_from_hidden_size, _layer_types, rope_parameters_of_5x(500000.0)),
            transformers=5,
        ),
        "llama4_vision_model": ConfigClass(
            "Llama4VisionConfig",
            {"hidden_size": 768, "hidden_act": "gelu", "num_hidden_layers": 34, "num_attention_heads": 16,
             "num_channels": 3, "intermediate_size": 5632, "vision_output_dim": 7680, "image_size": 448,
             "patch_size": 14, "norm_eps": 1e-5, "pixel_shuffle_ratio": 0.5, "projector_input_dim": 4096,
             "projector_output_dim": 4096, "multi_modal_projector_bias": False},
            transformers=5,
        ),
    },
    conversions={"Llama4ForConditionalGeneration": _LLAMA4},
    projectors={"Llama4ForConditionalGeneration": _LLAMA4_VISION},
)  # fmt: skip
