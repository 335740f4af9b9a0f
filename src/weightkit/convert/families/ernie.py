"""ERNIE 4.5 (Baidu), dense and mixture of experts: `Ernie4_5Model` and `Ernie4_5MoeModel` of llama.cpp's
converter (transformers 5.25's config classes).

The standard decoder, without the rope permutation, with a SentencePiece vocabulary (and tokenizer_config.json's
`add_prefix_space` after it). The MoE's layers from `moe_layer_start_index` on have routed experts (stacked per
layer and kind), shared experts and a routing-score bias (`moe_statics`); its multi-token prediction layers are
dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..hf.config import ConfigClass, HFConfig, read_json_object
from ..hf.experts import ExpertLayout, expert_stacker
from ..hf.kv import KV
from ..hf.tokenizer import write_sentencepiece_vocab
from ..hf.tokenizer.fast import TOKENIZER_CONFIG
from .decoder import (
    DECODER_NAMES,
    DECODER_REQUIRED,
    DENSE_FFN,
    MOE_NAMES,
    head_dim_from_hidden_size,
    kv_heads_default_to_heads,
    number,
    rope_parameters_of_5x,
)
from .deepseek import SHARED_EXPERTS_NAMES
from .family import Conversion, Family

_MOE_NAMES = (
    DECODER_NAMES
    | MOE_NAMES
    | SHARED_EXPERTS_NAMES
    | {"model.layers.{bid}.mlp.moe_statics.e_score_correction": "blk.{bid}.exp_probs_b"}
)
#: `Ernie4_5MoeModel.modify_tensors`: the names with "mlp.experts" in them (not the shared experts), gate, up, down
_ERNIE_EXPERTS = ExpertLayout("mlp.experts", ("moe_num_experts",), ("gate_proj", "up_proj", "down_proj"),
                              "model.layers.{bid}.mlp.experts.{x}.{kind}.weight",
                              "model.layers.{bid}.mlp.experts.{kind}.weight")  # fmt: skip
_MTP = re.compile(r"model.(mtp_block|mtp_emb_norm|mtp_hidden_norm|mtp_linear_proj).(\d+)")


def _ernie_prefix(name: str) -> str | None:
    """`Ernie4_5Model.filter_tensors`: `ernie.` names are `model.` ones."""
    return name.replace("ernie.", "model.")


def _drop_mtp(name: str) -> str | None:
    """`Ernie4_5MoeModel.filter_tensors`: the multi-token prediction layers are not converted."""
    return None if _MTP.match(name) else name


def _ernie_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`Ernie4_5Model.set_vocab`: SentencePiece, then tokenizer_config.json's `add_prefix_space` where it has one."""
    write_sentencepiece_vocab(kv, folder, h)
    if (folder / TOKENIZER_CONFIG).is_file():
        config = read_json_object(folder / TOKENIZER_CONFIG, "tokenizer_config.json")
        if "add_prefix_space" in config:
            kv.bool("tokenizer.ggml.add_space_prefix", config["add_prefix_space"])


def _moe_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Ernie4_5MoeModel.set_gguf_parameters`'s additions; the shared experts' length is the converter's
    `intermediate_size // num_key_value_heads`."""
    kv.u32(f"{arch}.expert_count", number(h, "moe_num_experts"))
    kv.u32(f"{arch}.expert_used_count", number(h, "moe_k"))
    kv.u32(f"{arch}.interleave_moe_layer_step", number(h, "moe_layer_interval"))
    kv.u32(f"{arch}.leading_dense_block_count", number(h, "moe_layer_start_index"))
    if h.get("moe_intermediate_size") is not None:
        kv.u32(f"{arch}.expert_feed_forward_length", number(h, "moe_intermediate_size"))
    if (shared := h.get("moe_num_shared_experts")) is not None:
        kv.u32(f"{arch}.expert_shared_count", number(h, "moe_num_shared_experts"))
        ff, kv_heads = h.get("intermediate_size"), h.get("num_key_value_heads")
        if shared > 0 and ff is not None and kv_heads is not None:
            kv.u32(f"{arch}.expert_shared_feed_forward_length", ff // kv_heads)


_ERNIE = Conversion(
    gguf="ernie4_5",
    tensor_names=DECODER_NAMES,
    required=DECODER_REQUIRED,
    vocab=_ernie_vocab,
    filters=(_ernie_prefix,),
)
_ERNIE_MOE = Conversion(
    gguf="ernie4_5-moe",
    tensor_names=_MOE_NAMES,
    required={k: v for k, v in DECODER_REQUIRED.items() if k not in DENSE_FFN},
    vocab=_ernie_vocab,
    filters=(_drop_mtp, _ernie_prefix),
    parameters=(_moe_parameters,),
    rewrites=(expert_stacker(_ERNIE_EXPERTS),),
)

#: Ernie4_5_MoeConfig's `attribute_map`: a config.json's other names for its keys
_MOE_ALIASES = {"num_experts": "moe_num_experts", "num_experts_per_tok": "moe_k",
                "num_mtp_layers": "num_nextn_predict_layers"}  # fmt: skip


def _moe_derive(h: dict) -> None:
    """`Ernie4_5_MoeConfig`: the aliased keys under their names; the last MoE layer from -1."""
    for alias, key in _MOE_ALIASES.items():
        if alias in h:
            h[key] = h.pop(alias)
    if h.get("moe_layer_end_index") == -1:
        h["moe_layer_end_index"] = h["num_hidden_layers"] - 1


#: What Ernie4_5Config and Ernie4_5_MoeConfig (transformers 5.25) default alike.
_DEFAULTS = {"vocab_size": 103424, "hidden_act": "silu", "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
             "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": True,
             "use_bias": False}  # fmt: skip

FAMILY = Family(
    name="ernie",
    configs={
        "ernie4_5": ConfigClass(
            "Ernie4_5Config",
            _DEFAULTS | {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 18,
                         "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 128},
            (kv_heads_default_to_heads, head_dim_from_hidden_size, rope_parameters_of_5x(500000.0)),
            transformers=5,
        ),
        "ernie4_5_moe": ConfigClass(
            "Ernie4_5_MoeConfig",
            _DEFAULTS | {"hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 28,
                         "num_attention_heads": 20, "num_key_value_heads": 4, "moe_intermediate_size": 1536,
                         "moe_k": 6, "moe_num_experts": 64, "moe_num_shared_experts": 2, "moe_layer_start_index": 1,
                         "moe_layer_end_index": -1, "moe_layer_interval": 1, "moe_norm_min": 1e-12,
                         "num_nextn_predict_layers": None},
            (_moe_derive, rope_parameters_of_5x(500000.0)),
            transformers=5,
        ),
    },
    conversions={"Ernie4_5ForCausalLM": _ERNIE, "Ernie4_5_MoeForCausalLM": _ERNIE_MOE},
)  # fmt: skip
