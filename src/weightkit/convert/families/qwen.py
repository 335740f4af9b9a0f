"""Qwen2, Qwen3 and their mixtures of experts (Qwen2-MoE, Qwen3-MoE): `Qwen2Model`, `Qwen3Model`,
`Qwen2MoeModel` and `Qwen3MoeModel` of llama.cpp's converter, and transformers' classes for `--to hf`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ...errors import UnsupportedError
from ..hf.config import ConfigClass, HFConfig
from ..hf.experts import QWEN_EXPERTS, stack_experts
from ..hf.kv import KV
from ..hf.tokenizer import SPM_MODEL, write_bpe_vocab, write_sentencepiece_vocab
from .decoder import (
    DECODER_ATTENTION_NAMES,
    DECODER_CONFIG,
    DECODER_DEFAULTS,
    DECODER_NAMES,
    DECODER_REQUIRED,
    DENSE_FFN,
    MOE_NAMES,
    QK_NORM_NAMES,
    H,
    gpt2_vocab,
    kv_heads_default_to_heads,
    moe_required,
    pooling_type,
    rope_type_from_type,
    sliding_window_only_if_used,
)
from .family import Conversion, Dims, Export, Family

SHARED_EXPERT_NAMES = {
    "model.layers.{bid}.mlp.shared_expert_gate": "blk.{bid}.ffn_gate_inp_shexp",
    "model.layers.{bid}.mlp.shared_expert.gate_proj": "blk.{bid}.ffn_gate_shexp",
    "model.layers.{bid}.mlp.shared_expert.up_proj": "blk.{bid}.ffn_up_shexp",
    "model.layers.{bid}.mlp.shared_expert.down_proj": "blk.{bid}.ffn_down_shexp",
}
_ATTENTION_REQUIRED = {k: v for k, v in DECODER_REQUIRED.items() if k not in DENSE_FFN}
_QWEN3_MOE_REQUIRED = _ATTENTION_REQUIRED | moe_required(QWEN_EXPERTS.count, "moe_intermediate_size")
_QWEN2_MOE_REQUIRED = (
    _ATTENTION_REQUIRED
    | moe_required(QWEN_EXPERTS.count, "moe_intermediate_size")
    | {
        "blk.{bid}.ffn_gate_inp_shexp.weight": (None, H),  # one row
        "blk.{bid}.ffn_gate_shexp.weight": ("shared_expert_intermediate_size", H),
        "blk.{bid}.ffn_up_shexp.weight": ("shared_expert_intermediate_size", H),
        "blk.{bid}.ffn_down_shexp.weight": (H, "shared_expert_intermediate_size"),
    }
)


def qwen_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`Qwen2Model.set_vocab`: SentencePiece if there is a tokenizer.model, else GPT-2 BPE."""
    if (folder / SPM_MODEL).is_file():
        write_sentencepiece_vocab(kv, folder, h)
    else:
        write_bpe_vocab(kv, folder, h)


def refuse_qwen3_reranker(folder: Path, h: HFConfig) -> None:
    """`Qwen3Model._is_qwen3_reranker`: rerankers get a classifier head made from two output rows."""
    readme = folder / "README.md"
    text = readme.read_text(encoding="utf-8", errors="replace").lower() if readme.is_file() else ""
    origin = str((h.get("architectures") or [None])[0] or "")
    hints = [x.lower() for x in (folder.name, str(h.get("_name_or_path", "")), str(h.get("model_type", "")), origin)]
    if (
        "# qwen3-reranker" in text
        or "# qwen3-vl-reranker" in text
        or any("qwen3-reranker" in x or "qwen3-vl-reranker" in x for x in hints)
        or "sequenceclassification" in origin.lower()
    ):
        raise UnsupportedError(f"{folder}: Qwen3 rerankers are not supported yet")


def moe_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Qwen2MoeModel.set_gguf_parameters`'s additions: the experts' feed-forward sizes."""
    if (size := h.get("moe_intermediate_size")) is not None:
        kv.u32(f"{arch}.expert_feed_forward_length", size)
    if (size := h.get("shared_expert_intermediate_size")) is not None:
        kv.u32(f"{arch}.expert_shared_feed_forward_length", size)


def _qwen_moe(gguf: str, tensor_names: Mapping[str, str], required: Mapping[str, Dims]) -> Conversion:
    """Qwen2-MoE and Qwen3-MoE (`Qwen2MoeModel` and its subclass): byte-level BPE, experts stacked."""
    return Conversion(gguf=gguf, tensor_names=tensor_names, required=required, vocab=gpt2_vocab,
                      parameters=(moe_parameters,), rewrites=(stack_experts,))  # fmt: skip


_QWEN2 = Conversion(
    gguf="qwen2",
    tensor_names=DECODER_NAMES,
    required=DECODER_REQUIRED,
    vocab=qwen_vocab,
    parameters=(pooling_type,),
)
_QWEN3 = Conversion(
    gguf="qwen3",
    tensor_names=DECODER_NAMES | QK_NORM_NAMES,
    required=DECODER_REQUIRED,
    vocab=qwen_vocab,
    parameters=(pooling_type,),
    checks=(refuse_qwen3_reranker,),
)
_QWEN2_MOE = _qwen_moe("qwen2moe", DECODER_ATTENTION_NAMES | MOE_NAMES | SHARED_EXPERT_NAMES, _QWEN2_MOE_REQUIRED)
# no dense MLP names: as in gguf-py's qwen3moe tensors, a layer without experts (mlp_only_layers,
# decoder_sparse_step; config.json's flags themselves are not read) has tensors without a GGUF name
_QWEN3_MOE = _qwen_moe("qwen3moe", DECODER_ATTENTION_NAMES | QK_NORM_NAMES | MOE_NAMES, _QWEN3_MOE_REQUIRED)

_DECODER_DERIVE = (sliding_window_only_if_used, kv_heads_default_to_heads, rope_type_from_type)
#: What Qwen2MoeConfig and Qwen3MoeConfig default alike.
_MOE_DEFAULTS = DECODER_DEFAULTS | {"vocab_size": 151936, "hidden_size": 2048, "num_hidden_layers": 24,
                                   "max_position_embeddings": 32768, "rope_scaling": None, "use_sliding_window": False,
                                   "sliding_window": 4096, "decoder_sparse_step": 1, "norm_topk_prob": False,
                                   "mlp_only_layers": []}  # fmt: skip
_MOE_CONFIG = {
    "expert_count": "num_experts",
    "expert_used_count": "num_experts_per_tok",
    "expert_feed_forward_length": "moe_intermediate_size",
}
_KEY_LENGTH = {"attention.key_length": "head_dim"}

FAMILY = Family(
    name="qwen",
    configs={
        "qwen2": ConfigClass(
            "Qwen2Config",
            DECODER_DEFAULTS | {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
                                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
                                "max_position_embeddings": 32768, "rope_scaling": None, "use_sliding_window": False,
                                "sliding_window": 4096, "max_window_layers": 28},
            _DECODER_DERIVE,
        ),
        "qwen3": ConfigClass(
            "Qwen3Config",
            DECODER_DEFAULTS | {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
                                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
                                "head_dim": 128, "max_position_embeddings": 32768, "rope_scaling": None,
                                "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28},
            _DECODER_DERIVE,
        ),
        "qwen2_moe": ConfigClass(
            "Qwen2MoeConfig",
            _MOE_DEFAULTS | {"intermediate_size": 5632, "num_attention_heads": 16, "num_key_value_heads": 16,
                             "max_window_layers": 28, "moe_intermediate_size": 1408,
                             "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4, "num_experts": 60,
                             "qkv_bias": True},
            (sliding_window_only_if_used, rope_type_from_type),
        ),
        "qwen3_moe": ConfigClass(
            "Qwen3MoeConfig",
            _MOE_DEFAULTS | {"intermediate_size": 6144, "num_attention_heads": 32, "num_key_value_heads": 4,
                             "moe_intermediate_size": 768, "num_experts_per_tok": 8, "num_experts": 128},
            (sliding_window_only_if_used, rope_type_from_type),
        ),
    },
    conversions={
        "Qwen2ForCausalLM": _QWEN2,
        "Qwen3ForCausalLM": _QWEN3,
        "Qwen2MoeForCausalLM": _QWEN2_MOE,
        "Qwen3MoeForCausalLM": _QWEN3_MOE,
    },
    exports={
        "qwen2": Export("Qwen2ForCausalLM", "qwen2", _QWEN2, "qwen2", DECODER_CONFIG),
        "qwen3": Export("Qwen3ForCausalLM", "qwen3", _QWEN3, "qwen2", DECODER_CONFIG | _KEY_LENGTH),
        "qwen3moe": Export("Qwen3MoeForCausalLM", "qwen3_moe", _QWEN3_MOE, "qwen2",
                           DECODER_CONFIG | _MOE_CONFIG | _KEY_LENGTH),
    },
)  # fmt: skip
