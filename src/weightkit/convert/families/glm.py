"""GLM-4.5 and GLM-4.6 (`Glm4MoeForCausalLM`): `Glm4MoeModel` of llama.cpp's converter, written as `glm4moe`.

A grouped-query decoder with Q/K/V biases (and Q/K norms in some), rope on half of each head, the first
`first_k_dense_replace` layers dense and the rest mixtures of experts with a shared expert and a routing
score-correction bias, sigmoid routing. The NextN (multi-token prediction) layers past `num_hidden_layers` are
kept as more blocks, their own tensors named `nextn.*`. Its vocabulary is byte-level BPE, with the special
tokens `_set_vocab_glm` sets from the added tokens.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import FormatError
from ..hf.config import CONFIG_NAME, ConfigClass, HFConfig
from ..hf.experts import expert_stacker
from ..hf.kv import KV
from ..hf.parameters import LAYERS, rope_parameters
from ..hf.tokenizer import write_bpe_vocab
from .decoder import (
    DECODER_NAMES,
    DECODER_REQUIRED,
    DENSE_FFN,
    MOE_NAMES,
    NEXTN_NAMES,
    QK_NORM_NAMES,
    rope_parameters_of_5x,
)
from .deepseek import DEEPSEEK_EXPERTS, SHARED_EXPERTS_NAMES
from .family import Conversion, Family

#: gguf-py's glm4moe tensors have no ffn_norm: the norm after attention is `post_attention_norm`
_POST_ATTENTION = {"model.layers.{bid}.post_attention_layernorm": "blk.{bid}.post_attention_norm"}
_NAMES = DECODER_NAMES | _POST_ATTENTION | QK_NORM_NAMES | MOE_NAMES | SHARED_EXPERTS_NAMES | NEXTN_NAMES
_REQUIRED = {k: v for k, v in DECODER_REQUIRED.items() if k not in (*DENSE_FFN, "blk.{bid}.ffn_norm.weight")}
_REQUIRED["blk.{bid}.post_attention_norm.weight"] = ("hidden_size",)
#: `_set_vocab_glm`'s special tokens, by the added token's text
_SPECIAL_TOKENS = {"bos": "[gMASK]", "eot": "<|user|>", "unk": "<|endoftext|>", "eom": "<|observation|>"}


def _glm_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`_set_vocab_glm`: byte-level BPE, BOS, EOT, UNK and EOM from the added tokens where the files name none."""
    write_bpe_vocab(kv, folder, h, _SPECIAL_TOKENS)


def _parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Glm4MoeModel.set_gguf_parameters`' additions, in its order."""
    head_dim = h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]
    kv.u32(f"{arch}.rope.dimension_count", int(head_dim * rope_parameters(h).get("partial_rotary_factor", 0.5)))
    for key, name in (("expert_count", "n_routed_experts"), ("expert_feed_forward_length", "moe_intermediate_size"),
                      ("expert_shared_count", "n_shared_experts"),
                      ("leading_dense_block_count", "first_k_dense_replace")):  # fmt: skip
        if (value := h.get(name)) is not None:
            kv.u32(f"{arch}.{key}", value)
    kv.u32(f"{arch}.expert_gating_func", 2)  # sigmoid
    if (scale := h.get("routed_scaling_factor")) is not None:
        kv.f32(f"{arch}.expert_weights_scale", scale)
    if (norm := h.get("norm_topk_prob")) is not None:
        kv.bool(f"{arch}.expert_weights_norm", norm)
    if (nextn := h.get("num_nextn_predict_layers")) is not None:
        kv.u32(f"{arch}.nextn_predict_layers", nextn)


def _blocks(h: HFConfig, names: list[str]) -> int:
    """`Glm4MoeModel.__init__`: the config's layers and its NextN (multi-token prediction) layers, kept as blocks."""
    layers, nextn = h.find(LAYERS), h.get("num_nextn_predict_layers", 0)
    if not isinstance(nextn, int) or isinstance(nextn, bool) or nextn < 0:
        raise FormatError(CONFIG_NAME, None, f"num_nextn_predict_layers {nextn!r} is not a count")
    return layers + nextn if isinstance(layers, int) else layers


FAMILY = Family(
    name="glm",
    configs={
        # transformers 5.25's Glm4MoeConfig
        "glm4_moe": ConfigClass(
            "Glm4MoeConfig",
            {"vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 10944, "num_hidden_layers": 46,
             "num_attention_heads": 96, "num_key_value_heads": 8, "hidden_act": "silu",
             "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
             "attention_bias": False, "moe_intermediate_size": 1408, "num_experts_per_tok": 8,
             "n_shared_experts": 1, "n_routed_experts": 128, "routed_scaling_factor": 1.0, "n_group": 1,
             "topk_group": 1, "first_k_dense_replace": 1, "norm_topk_prob": True, "use_qk_norm": False,
             "bos_token_id": None, "eos_token_id": None, "pad_token_id": None, "num_nextn_predict_layers": 1},
            (rope_parameters_of_5x(10000.0),),
            transformers=5,
        ),
    },
    conversions={
        "Glm4MoeForCausalLM": Conversion(
            gguf="glm4moe",
            tensor_names=_NAMES,
            required=_REQUIRED,
            vocab=_glm_vocab,
            parameters=(_parameters,),
            rewrites=(expert_stacker(DEEPSEEK_EXPERTS),),
            blocks=_blocks,
        ),
    },
)  # fmt: skip
