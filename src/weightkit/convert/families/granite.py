"""Granite 3 (dense): `GraniteModel` of llama.cpp's converter, Llama's conversion under the `granite`
architecture, with config.json's `head_dim` ignored and Granite's four multipliers written as scales."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..hf.config import ConfigClass, HFConfig
from ..hf.kv import KV
from ..hf.parameters import write_text_parameters
from . import llama
from .decoder import kv_heads_default_to_heads, number, rope_parameters_of_5x
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

FAMILY = Family(
    name="granite",
    configs={
        # transformers 5.25's
        "granite": ConfigClass(
            "GraniteConfig",
            {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu",
             "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "pad_token_id": None, "bos_token_id": 1,
             "eos_token_id": 2, "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
             "embedding_multiplier": 1.0, "logits_scaling": 1.0, "residual_multiplier": 1.0,
             "attention_multiplier": 1.0},
            (kv_heads_default_to_heads, rope_parameters_of_5x(10000.0)),
            transformers=5,
        ),
    },
    conversions={"GraniteForCausalLM": _GRANITE},
)  # fmt: skip
