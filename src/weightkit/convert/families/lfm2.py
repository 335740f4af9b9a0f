"""LFM2 and LFM2-MoE (Liquid AI): `LFM2Model` and `LFM2MoeModel` of llama.cpp's converter (transformers 5.25's
config classes).

Their layers are gated short convolutions (`conv.*`) or attention with Q/K norms, each followed by a SwiGLU
feed-forward (`feed_forward.w1`/`w3`/`w2`), or in LFM2-MoE's layers past the first dense ones, sigmoid-routed
experts with a bias on the routing scores. What the converter does to them: the key-value head count is written
per layer (0 for the convolutions); the convolution's kernel loses its middle axis; LFM2's feed-forward length is
the one its MLP adjusts to (two thirds, times a multiplier, rounded up to a multiple); LFM2-MoE's experts are
stacked per layer and kind.

`--to hf` writes an `lfm2` GGUF as transformers' GGUF loader reads it: the key-value head counts per layer as
their largest and the attention layers' indices (`full_attn_idxs`), the feed-forward length as written
(`block_auto_adjust_ff_dim` false), the convolution kernel given its middle axis back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import FormatError
from ..hf.config import CONFIG_NAME, ConfigClass, HFConfig
from ..hf.experts import ExpertLayout, expert_stacker
from ..hf.kv import KV
from ..hf.parameters import write_text_parameters
from .decoder import DECODER_CONFIG, H, gpt2_vocab, number, rope_parameters_of_5x, squeeze_conv, unsqueeze_conv
from .family import Conversion, Export, Family, TensorShapes, TextParameters

_P = "model.layers.{bid}."
_NAMES = {
    "model.embed_tokens": "token_embd",
    "model.embedding_norm": "token_embd_norm",
    "lm_head": "output",
    _P + "operator_norm": "blk.{bid}.attn_norm",
    _P + "ffn_norm": "blk.{bid}.ffn_norm",
    _P + "conv.conv": "blk.{bid}.shortconv.conv",
    _P + "conv.in_proj": "blk.{bid}.shortconv.in_proj",
    _P + "conv.out_proj": "blk.{bid}.shortconv.out_proj",
    _P + "self_attn.q_proj": "blk.{bid}.attn_q",
    _P + "self_attn.k_proj": "blk.{bid}.attn_k",
    _P + "self_attn.v_proj": "blk.{bid}.attn_v",
    _P + "self_attn.out_proj": "blk.{bid}.attn_output",
    _P + "self_attn.q_layernorm": "blk.{bid}.attn_q_norm",
    _P + "self_attn.k_layernorm": "blk.{bid}.attn_k_norm",
    _P + "feed_forward.w1": "blk.{bid}.ffn_gate",
    _P + "feed_forward.w3": "blk.{bid}.ffn_up",
    _P + "feed_forward.w2": "blk.{bid}.ffn_down",
}
_MOE_NAMES = _NAMES | {
    _P + "feed_forward.gate": "blk.{bid}.ffn_gate_inp",
    _P + "feed_forward.expert_bias": "blk.{bid}.exp_probs_b",
    "layers.{bid}.feed_forward.experts.w1": "blk.{bid}.ffn_gate_exps",
    "layers.{bid}.feed_forward.experts.w3": "blk.{bid}.ffn_up_exps",
    "layers.{bid}.feed_forward.experts.w2": "blk.{bid}.ffn_down_exps",
}
#: What every layer has, whatever its kind (a convolution's or attention's tensors, dense or experts).
_REQUIRED = {
    "token_embd.weight": (None, H),
    "token_embd_norm.weight": (H,),
    "blk.{bid}.attn_norm.weight": (H,),
    "blk.{bid}.ffn_norm.weight": (H,),
}

#: `LFM2MoeModel.modify_tensors`: any name with "experts" in it, stacked as Mixtral's merged experts
_LFM2_EXPERTS = ExpertLayout("experts", ("num_local_experts", "num_experts"), ("w1", "w2", "w3"),
                             _P + "feed_forward.experts.{x}.{kind}.weight",
                             "layers.{bid}.feed_forward.experts.{kind}.weight")  # fmt: skip


def _expert_bias_as_bias(name: str) -> str | None:
    """`LFM2MoeModel.filter_tensors`: the routing scores' bias is named as a bias."""
    return name.replace(".expert_bias", ".expert_bias.bias") if name.endswith(".expert_bias") else name


def _kv_heads_per_layer(attention: str) -> TextParameters:
    """The common keys, with the key-value head count written per layer (in its place): 0 for every layer whose
    type is not `attention` (the converter replaces the count by that list before writing them)."""

    def write(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
        kinds = h.get("layer_types")
        if not isinstance(kinds, list):
            raise FormatError(CONFIG_NAME, None, f"layer_types is {kinds!r}, not a list of layer kinds")
        heads = number(h, "num_key_value_heads")
        per_layer = [heads if kind == attention else 0 for kind in kinds]
        write_text_parameters(kv, arch, h, rope, file_type)
        kv.array(f"{arch}.attention.head_count_kv", per_layer, CONFIG_NAME)

    return write


def _lfm2_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`LFM2Model.set_gguf_parameters`'s additions: vocabulary size, convolution cache, and the feed-forward
    length as the MLP adjusts it."""
    kv.u32(f"{arch}.vocab_size", h["vocab_size"])
    kv.u32(f"{arch}.shortconv.l_cache", number(h, "conv_L_cache"))
    ff = h.find(("block_ff_dim", "intermediate_size"))
    if h["block_auto_adjust_ff_dim"]:
        ff = int(2 * ff / 3)
        if (multiplier := h["block_ffn_dim_multiplier"]) is not None:
            ff = int(multiplier * ff)
        multiple = number(h, "block_multiple_of")
        ff = multiple * ((ff + multiple - 1) // multiple)
    kv.u32(f"{arch}.feed_forward_length", ff)


def _lfm2_moe_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`LFM2MoeModel.set_gguf_parameters`'s additions: the experts' size, the leading dense layers, sigmoid
    routing, vocabulary size, convolution cache."""
    kv.u32(f"{arch}.expert_feed_forward_length", number(h, "moe_intermediate_size"))
    kv.u32(f"{arch}.leading_dense_block_count", number(h, "num_dense_layers"))
    kv.u32(f"{arch}.expert_gating_func", 2)  # sigmoid
    kv.u32(f"{arch}.vocab_size", h["vocab_size"])
    kv.u32(f"{arch}.shortconv.l_cache", number(h, "conv_L_cache"))


_LFM2 = Conversion(
    gguf="lfm2",
    tensor_names=_NAMES,
    required=_REQUIRED,
    vocab=gpt2_vocab,
    text_parameters=_kv_heads_per_layer("full_attention"),  # the converter: any type but "conv"
    parameters=(_lfm2_parameters,),
    rewrites=(squeeze_conv("conv.conv"),),
)
_LFM2_MOE = Conversion(
    gguf="lfm2moe",
    tensor_names=_MOE_NAMES,
    required=_REQUIRED,
    vocab=gpt2_vocab,
    filters=(_expert_bias_as_bias,),
    text_parameters=_kv_heads_per_layer("full_attention"),
    parameters=(_lfm2_moe_parameters,),
    rewrites=(squeeze_conv("conv.conv"), expert_stacker(_LFM2_EXPERTS)),
)


def _attention_layers(shapes: TensorShapes, config: dict[str, Any]) -> dict[str, Any]:
    """What transformers' GGUF loader makes of an `lfm2` file's per-layer key-value head counts: their largest,
    and the layers with some are the attention layers; the feed-forward length is the one to use as it is."""
    heads = config["num_key_value_heads"]
    per_layer = [int(n) for n in heads] if hasattr(heads, "__len__") else [int(heads)] * config["num_hidden_layers"]
    return {"num_key_value_heads": max(per_layer), "full_attn_idxs": [i for i, n in enumerate(per_layer) if n > 0],
            "block_auto_adjust_ff_dim": False}  # fmt: skip


#: config.json keys of an `lfm2` GGUF (transformers' GGUF_CONFIG_MAPPING, but LFM2's own name of the norms' epsilon)
_EXPORT_CONFIG = {k: v for k, v in DECODER_CONFIG.items() if k != "attention.layer_norm_rms_epsilon"} | {
    "attention.layer_norm_rms_epsilon": "norm_eps",
    "shortconv.l_cache": "conv_L_cache",
}


def _tie_embedding(h: dict[str, Any]) -> None:
    if "tie_embedding" in h:
        h["tie_word_embeddings"] = h.pop("tie_embedding")


def _layer_types_from_attention_indices(h: dict[str, Any]) -> None:
    """`Lfm2Config.__post_init__`: the layer types from `full_attn_idxs` (all attention when absent), where not
    given; the old names of the tied embeddings and the feed-forward size."""
    if h.get("layer_types") is None:
        idxs = h.get("full_attn_idxs")
        idxs = list(range(h["num_hidden_layers"])) if idxs is None else idxs
        h["layer_types"] = ["full_attention" if i in idxs else "conv" for i in range(h["num_hidden_layers"])]
    _tie_embedding(h)
    if "block_ff_dim" in h:
        h["intermediate_size"] = h.pop("block_ff_dim")


#: What Lfm2Config and Lfm2MoeConfig (transformers 5.25) default alike.
_DEFAULTS = {"vocab_size": 65536, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "max_position_embeddings": 128000, "norm_eps": 1e-5, "pad_token_id": 0, "bos_token_id": 1,
             "eos_token_id": 2, "tie_word_embeddings": True, "conv_bias": False, "conv_L_cache": 3,
             "layer_types": None}  # fmt: skip

FAMILY = Family(
    name="lfm2",
    configs={
        "lfm2": ConfigClass(
            "Lfm2Config",
            _DEFAULTS | {"hidden_size": 2560, "intermediate_size": 12288, "block_multiple_of": 256,
                         "block_ffn_dim_multiplier": 1.0, "block_auto_adjust_ff_dim": True, "full_attn_idxs": None},
            (_layer_types_from_attention_indices, rope_parameters_of_5x(1000000.0)),
            transformers=5,
        ),
        "lfm2_moe": ConfigClass(
            "Lfm2MoeConfig",
            _DEFAULTS | {"hidden_size": 2048, "intermediate_size": 7168, "moe_intermediate_size": 1792,
                         "num_dense_layers": 2, "num_experts_per_tok": 4, "num_experts": 32, "use_expert_bias": True,
                         "routed_scaling_factor": 1.0, "norm_topk_prob": True},
            (_tie_embedding, rope_parameters_of_5x(1000000.0)),
            transformers=5,
        ),
    },
    conversions={"Lfm2ForCausalLM": _LFM2, "Lfm2MoeForCausalLM": _LFM2_MOE},
    exports={"lfm2": Export("Lfm2ForCausalLM", "lfm2", _LFM2, "llama", _EXPORT_CONFIG, derived=(_attention_layers,),
                             rewrites_undone=(unsqueeze_conv("conv.conv.weight"),))},
)  # fmt: skip
