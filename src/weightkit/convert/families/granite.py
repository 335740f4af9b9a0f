"""Granite 3 (dense) and Granite's mixture of experts: `GraniteModel` and `GraniteMoeModel` of llama.cpp's
converter, Llama's conversion under the `granite` and `granitemoe` architectures, with config.json's `head_dim`
ignored and Granite's four multipliers written as scales; the experts' fused gate and up projections
(`block_sparse_moe.input_linear`, JetMoE's layout) are split in two."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..hf.config import ConfigClass, HFConfig
from ..hf.experts import Tensors, gate_and_up
from ..hf.kv import KV
from ..hf.parameters import write_text_parameters
from . import llama
from .decoder import (
    DECODER_REQUIRED,
    DENSE_FFN,
    FF,
    kv_heads_default_to_heads,
    moe_required,
    number,
    rope_parameters_of_5x,
)
from .family import Conversion, Family

#: config.json's multiplier -> the GGUF key after "{arch}." it is written to (when given and not zero)
_SCALES = (("attention_multiplier", "attention.scale"), ("embedding_multiplier", "embedding_scale"),
           ("residual_multiplier", "residual_scale"), ("logits_scaling", "logit_scale"))  # fmt: skip


def _without_head_dim(h: HFConfig) -> HFConfig:
    return HFConfig({k: v for k, v in h.items() if k != "head_dim"})


def _text_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """`GraniteModel.set_gguf_parameters` pops `head_dim` first: no key/value length is written."""
    write_text_parameters(kv, arch, _without_head_dim(h), rope, file_type)


def _granite_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """Llama's vocabulary size and rope dimension (from the hidden size: `head_dim` is ignored), then the
    multipliers."""
    kv.u32(f"{arch}.vocab_size", h["vocab_size"])
    kv.u32(f"{arch}.rope.dimension_count", h["hidden_size"] // h["num_attention_heads"])
    for key, gguf in _SCALES:
        if h.get(key):
            kv.f32(f"{arch}.{gguf}", number(h, key))


_GRANITE: Conversion = replace(
    llama.FAMILY.conversions["LlamaForCausalLM"],
    gguf="granite",
    text_parameters=_text_parameters,
    parameters=(_granite_parameters,),
)

_MOE_NAMES = {
    "model.layers.{bid}.block_sparse_moe.router.layer": "blk.{bid}.ffn_gate_inp",
    "model.layers.{bid}.block_sparse_moe.output_linear": "blk.{bid}.ffn_down_exps",
    # the halves of `input_linear` (`_split_input_linear`)
    "model.layers.{bid}.block_sparse_moe.input_linear.gate": "blk.{bid}.ffn_gate_exps",
    "model.layers.{bid}.block_sparse_moe.input_linear.up": "blk.{bid}.ffn_up_exps",
}


def _split_input_linear(tensors: Tensors, h: HFConfig) -> Tensors:
    """`GraniteMoeModel.modify_tensors`: the experts' `input_linear` [experts, 2 * ff, hidden] is their gate and
    up projections, written as such where it was."""
    out: Tensors = []
    for name, t in tensors:
        if name.endswith("block_sparse_moe.input_linear.weight"):
            base = name.removesuffix(".weight")
            out.extend(gate_and_up(t, base + ".gate.weight", base + ".up.weight"))
        else:
            out.append((name, t))
    return out


def _shared_expert_length(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`GraniteMoeModel.set_gguf_parameters`'s addition: the shared expert's size, where it has one."""
    if size := h.get("shared_intermediate_size"):
        kv.u32(f"{arch}.expert_shared_feed_forward_length", size)


_GRANITE_MOE: Conversion = replace(
    _GRANITE,
    gguf="granitemoe",
    tensor_names={k: v for k, v in _GRANITE.tensor_names.items() if ".mlp." not in k} | _MOE_NAMES,
    required={k: v for k, v in DECODER_REQUIRED.items() if k not in DENSE_FFN} | moe_required("num_local_experts", FF),
    parameters=(_granite_parameters, _shared_expert_length),
    rewrites=(_split_input_linear,),
)

#: What GraniteConfig and GraniteMoeConfig (transformers 5.25) default alike.
_DEFAULTS = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu",
             "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "pad_token_id": None, "bos_token_id": 1,
             "eos_token_id": 2, "tie_word_embeddings": False, "attention_bias": False, "embedding_multiplier": 1.0,
             "logits_scaling": 1.0, "residual_multiplier": 1.0, "attention_multiplier": 1.0}  # fmt: skip

FAMILY = Family(
    name="granite",
    configs={
        # transformers 5.25's
        "granite": ConfigClass(
            "GraniteConfig",
            _DEFAULTS | {"mlp_bias": False},
            (kv_heads_default_to_heads, rope_parameters_of_5x(10000.0)),
            transformers=5,
        ),
        "granitemoe": ConfigClass(
            "GraniteMoeConfig",
            _DEFAULTS | {"num_local_experts": 8, "num_experts_per_tok": 2},
            (kv_heads_default_to_heads, rope_parameters_of_5x(10000.0)),
            transformers=5,
        ),
    },
    conversions={"GraniteForCausalLM": _GRANITE, "GraniteMoeForCausalLM": _GRANITE_MOE},
)  # fmt: skip
