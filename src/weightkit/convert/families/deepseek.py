"""DeepSeek-V3-shaped models (DeepSeek-V3, R1 and their fine-tunes): `DeepseekV2Model` of llama.cpp's converter,
which writes them as `deepseek2`.

Multi-head latent attention: Q through a low-rank pair (`q_a`, its norm, `q_b`), K and V through a shared
compressed vector (`kv_a_mqa`, its norm) that `kv_b` expands; the converter splits `kv_b` into `k_b`
(transposed) and `v_b` for llama.cpp's absorbed attention, and writes the model as multi-query attention (one
KV head). The first `first_k_dense_replace` layers are dense, the rest mixtures of experts with shared experts
and a routing score-correction bias. The multi-token-prediction layers past `num_hidden_layers` are dropped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FormatError
from ..hf.config import ConfigClass, HFConfig
from ..hf.experts import ExpertLayout, Tensors, derived_tensor, expert_stacker
from ..hf.kv import KV
from ..hf.parameters import LAYERS, rope_parameters, write_text_parameters
from ..hf.tensors import SourceTensor
from .decoder import DECODER_NAMES, MOE_NAMES, H, gpt2_vocab, kv_heads_default_to_heads, rope_parameters_of_5x
from .family import Conversion, Family

#: DeepSeek's experts: Qwen's names, found by "mlp.experts" (not the shared experts), counted by n_routed_experts
DEEPSEEK_EXPERTS = ExpertLayout("mlp.experts", ("n_routed_experts",), ("down_proj", "gate_proj", "up_proj"),
                                "model.layers.{bid}.mlp.experts.{x}.{kind}.weight",
                                "model.layers.{bid}.mlp.experts.{kind}.weight")  # fmt: skip
#: The shared experts and the routing bias of DeepSeek-style mixtures (GLM-4.5's too)
SHARED_EXPERTS_NAMES = {
    "model.layers.{bid}.mlp.shared_experts.gate_proj": "blk.{bid}.ffn_gate_shexp",
    "model.layers.{bid}.mlp.shared_experts.up_proj": "blk.{bid}.ffn_up_shexp",
    "model.layers.{bid}.mlp.shared_experts.down_proj": "blk.{bid}.ffn_down_shexp",
    "model.layers.{bid}.mlp.gate.e_score_correction": "blk.{bid}.exp_probs_b",
}
_MLA_NAMES = {
    "model.layers.{bid}.self_attn.q_proj": "blk.{bid}.attn_q",  # without q_lora_rank (DeepSeek-V2-Lite)
    "model.layers.{bid}.self_attn.q_a_proj": "blk.{bid}.attn_q_a",
    "model.layers.{bid}.self_attn.q_a_layernorm": "blk.{bid}.attn_q_a_norm",
    "model.layers.{bid}.self_attn.q_b_proj": "blk.{bid}.attn_q_b",
    "model.layers.{bid}.self_attn.kv_a_proj_with_mqa": "blk.{bid}.attn_kv_a_mqa",
    "model.layers.{bid}.self_attn.kv_a_layernorm": "blk.{bid}.attn_kv_a_norm",
    "model.layers.{bid}.self_attn.k_b_proj": "blk.{bid}.attn_k_b",
    "model.layers.{bid}.self_attn.v_b_proj": "blk.{bid}.attn_v_b",
}
_NAMES = {
    **{k: v for k, v in DECODER_NAMES.items() if not k.endswith(("q_proj", "k_proj", "v_proj"))},
    **_MLA_NAMES,
    **MOE_NAMES,
    **SHARED_EXPERTS_NAMES,
}
#: what every block has, whether dense or a mixture of experts
_REQUIRED: dict[str, tuple[str | None, ...]] = {
    "token_embd.weight": (None, H),
    "output_norm.weight": (H,),
    "blk.{bid}.attn_norm.weight": (H,),
    "blk.{bid}.attn_kv_a_mqa.weight": (None, H),  # kv_lora_rank + qk_rope_head_dim rows
    "blk.{bid}.attn_kv_a_norm.weight": ("kv_lora_rank",),
    "blk.{bid}.attn_k_b.weight": ("num_key_value_heads", "kv_lora_rank", "qk_nope_head_dim"),
    "blk.{bid}.attn_v_b.weight": ("num_key_value_heads", "v_head_dim", "kv_lora_rank"),
    "blk.{bid}.attn_output.weight": (H, None),
    "blk.{bid}.ffn_norm.weight": (H,),
}
_LAYER = re.compile(r"model.layers.(\d+)")


def drop_mtp_and_tied_head(tensors: Tensors, h: HFConfig) -> Tensors:
    """`DeepseekV2Model.modify_tensors`' skips: `lm_head` when tied to the embedding, and the multi-token
    prediction layers (numbered from `num_hidden_layers` on)."""
    layers = h.find(LAYERS)
    tied = h.get("tie_word_embeddings", False)
    out: Tensors = []
    for name, t in tensors:
        if tied and name in ("lm_head.weight", "model.lm_head.weight"):
            continue
        if (m := _LAYER.match(name)) is not None and int(m.group(1)) >= layers:
            continue
        out.append((name, t))
    return out


def split_kv_b(tensors: Tensors, h: HFConfig) -> Tensors:
    """`kv_b_proj` `[kv_heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank]` as the converter splits it for
    absorbed attention: `k_b_proj` `[kv_heads, kv_lora_rank, qk_nope_head_dim]` (each head's K rows,
    transposed) and `v_b_proj` `[kv_heads, v_head_dim, kv_lora_rank]`."""
    out: Tensors = []
    for name, t in tensors:
        if not name.endswith("kv_b_proj.weight"):
            out.append((name, t))
            continue
        heads, nope, v = h["num_key_value_heads"], h["qk_nope_head_dim"], h["v_head_dim"]
        if len(t.shape) != 2 or t.shape[0] != heads * (nope + v):
            raise FormatError(t.file, None, f"{name!r} {list(t.shape)} is not [num_key_value_heads * "
                                            f"(qk_nope_head_dim + v_head_dim), kv_lora_rank] = "
                                            f"[{heads} * ({nope} + {v}), *] (config.json)")  # fmt: skip
        out.extend(_kv_b_parts(name, t, heads, nope, v))
    return out


def _kv_b_parts(name: str, t: SourceTensor, heads: int, nope: int, v: int) -> Tensors:
    """`k_b_proj` and `v_b_proj` from `kv_b_proj`, each read from it when written."""
    rank = t.shape[1]

    def heads_rows() -> np.ndarray:
        return t.read().reshape(heads, nope + v, rank)

    k_name, v_name = name.replace("kv_b_proj", "k_b_proj"), name.replace("kv_b_proj", "v_b_proj")
    return [
        (k_name, derived_tensor(t, k_name, (heads, rank, nope), lambda: heads_rows()[:, :nope].swapaxes(1, 2))),
        (v_name, derived_tensor(t, v_name, (heads, v, rank), lambda: heads_rows()[:, nope:])),
    ]


def _text_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """The common keys, with one KV head: llama.cpp runs latent attention as multi-query attention."""
    write_text_parameters(kv, arch, HFConfig({**h, "num_key_value_heads": 1}), rope, file_type)


def _parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`DeepseekV2Model.set_gguf_parameters`' additions, in its order."""
    experts = h.get("n_routed_experts")
    dense = h.get("first_k_dense_replace")
    kv.u32(f"{arch}.leading_dense_block_count", dense if dense is not None else 0 if experts else h.find(LAYERS))
    kv.u32(f"{arch}.vocab_size", h["vocab_size"])
    if h.get("q_lora_rank") is not None:
        kv.u32(f"{arch}.attention.q_lora_rank", h["q_lora_rank"])
    rank, rope_dim = h.get("kv_lora_rank", 512), h["qk_rope_head_dim"]
    kv.u32(f"{arch}.attention.kv_lora_rank", rank)
    kv.u32(f"{arch}.attention.key_length", rank + rope_dim)
    kv.u32(f"{arch}.attention.value_length", rank)
    kv.u32(f"{arch}.attention.key_length_mla", h["qk_nope_head_dim"] + rope_dim)
    kv.u32(f"{arch}.attention.value_length_mla", h["v_head_dim"])
    kv.u32(f"{arch}.expert_feed_forward_length", h.find(("moe_intermediate_size", "intermediate_size")))
    if experts is not None:
        kv.u32(f"{arch}.expert_count", experts)
    kv.u32(f"{arch}.expert_shared_count", h.get("n_shared_experts", 0))
    if (scale := h.get("routed_scaling_factor")) is not None:
        kv.f32(f"{arch}.expert_weights_scale", scale)
    if h.get("norm_topk_prob"):
        kv.bool(f"{arch}.expert_weights_norm", True)
    kv.u32(f"{arch}.rope.dimension_count", rope_dim)
    if (mscale := rope_parameters(h).get("mscale_all_dim")) is not None:
        kv.f32(f"{arch}.rope.scaling.yarn_log_multiplier", 0.1 * mscale)


def _mla_head_dims(h: dict[str, Any]) -> None:
    """DeepseekV3Config's derivations: Q/K heads of nope + rope dimensions, `head_dim` the rope part."""
    h["qk_head_dim"] = h["qk_nope_head_dim"] + h["qk_rope_head_dim"]
    h["head_dim"] = h["qk_rope_head_dim"]


FAMILY = Family(
    name="deepseek",
    configs={
        # transformers 5.25's DeepseekV3Config
        "deepseek_v3": ConfigClass(
            "DeepseekV3Config",
            {"vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
             "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1,
             "n_routed_experts": 256, "routed_scaling_factor": 2.5, "kv_lora_rank": 512, "q_lora_rank": 1536,
             "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128, "n_group": 8, "topk_group": 4,
             "num_experts_per_tok": 8, "first_k_dense_replace": 3, "norm_topk_prob": True, "hidden_act": "silu",
             "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "bos_token_id": 0, "eos_token_id": 1,
             "pad_token_id": None, "tie_word_embeddings": False, "rope_interleave": True, "attention_bias": False,
             "num_nextn_predict_layers": 1},
            (kv_heads_default_to_heads, _mla_head_dims, rope_parameters_of_5x(10000.0)),
            transformers=5,
        ),
    },
    conversions={
        "DeepseekV3ForCausalLM": Conversion(
            gguf="deepseek2",
            tensor_names=_NAMES,
            required=_REQUIRED,
            vocab=gpt2_vocab,
            text_parameters=_text_parameters,
            parameters=(_parameters,),
            rewrites=(drop_mtp_and_tied_head, expert_stacker(DEEPSEEK_EXPERTS), split_kv_b),
        ),
    },
)  # fmt: skip
