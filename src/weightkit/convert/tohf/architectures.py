"""What GGUF -> Hugging Face does per GGUF architecture, as data: one `Export` each.

The tensor names and value transforms are the forward table's (`convert.hf.architectures.ARCHITECTURES`),
inverted: one source of truth for both directions. An entry adds what only this direction needs: the HF
class and model_type transformers loads, the GGUF keys that become config.json keys (transformers' own GGUF
loader's names, `integrations/ggml.py`), config keys read off the tensors, and the tokenizer family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..hf.architectures import ARCHITECTURES, Transform

TensorShapes = Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class Export:
    """One GGUF architecture as the HF folder writes it."""

    hf_class: str  # config.json's architectures[0]; its forward entry gives the tensor names and transforms
    model_type: str
    tokenizer: str  # the tokenizer family: "llama" (SentencePiece-style BPE or GPT-2 BPE), "qwen2", "gemma"
    config: Mapping[str, str]  # GGUF key after "{arch}." -> config.json key
    derived: tuple[Callable[[TensorShapes, dict[str, Any]], dict[str, Any]], ...] = ()
    # tokenizer_config.json's class for a byte-level BPE (`gpt2`) vocabulary, where the forward converter
    # reads that class to choose its vocabulary path; else the family's
    byte_level_class: str | None = None

    def names(self) -> Mapping[str, str]:
        """HF -> GGUF tensor names ({bid}: block), as the forward direction maps them."""
        return ARCHITECTURES[self.hf_class].tensor_names

    def inverse_transforms(self) -> tuple[Transform, ...]:
        return ARCHITECTURES[self.hf_class].transforms


# --- config.json keys ---------------------------------------------------------------------------------------

_DECODER_CONFIG = {
    "context_length": "max_position_embeddings",
    "block_count": "num_hidden_layers",
    "feed_forward_length": "intermediate_size",
    "embedding_length": "hidden_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "rope.freq_base": "rope_theta",
    "vocab_size": "vocab_size",
}
_MOE_CONFIG = {
    "expert_count": "num_experts",
    "expert_used_count": "num_experts_per_tok",
    "expert_feed_forward_length": "moe_intermediate_size",
}
_GEMMA3_CONFIG = {
    "attention.sliding_window": "sliding_window",
    "rope.freq_base_swa": "rope_local_base_freq",
    "final_logit_softcapping": "final_logit_softcapping",
    "attn_logit_softcapping": "attn_logit_softcapping",
}


def _attention_bias(shapes: TensorShapes, config: dict[str, Any]) -> dict[str, Any]:
    """Llama's `attention_bias`: whether the checkpoint has Q/K/V biases."""
    return {"attention_bias": "blk.0.attn_q.bias" in shapes}


# --- the table ----------------------------------------------------------------------------------------------

_LLAMA = Export("LlamaForCausalLM", "llama", "llama", _DECODER_CONFIG | {"rope.dimension_count": "head_dim"},
                derived=(_attention_bias,))  # fmt: skip

EXPORTS: dict[str, Export] = {
    "llama": _LLAMA,
    "qwen2": Export("Qwen2ForCausalLM", "qwen2", "qwen2", _DECODER_CONFIG),
    "qwen3": Export("Qwen3ForCausalLM", "qwen3", "qwen2", _DECODER_CONFIG | {"attention.key_length": "head_dim"}),
    "qwen3moe": Export(
        "Qwen3MoeForCausalLM",
        "qwen3_moe",
        "qwen2",
        _DECODER_CONFIG | _MOE_CONFIG | {"attention.key_length": "head_dim"},
    ),
    "gemma3": Export(
        "Gemma3ForCausalLM",
        "gemma3_text",
        "gemma",
        _DECODER_CONFIG | _GEMMA3_CONFIG | {"attention.key_length": "head_dim"},
    ),
    "phi3": Export(  # Llama's SentencePiece tokenizer (transformers' GGUF Phi-3 one lacks its normalizer)
        "Phi3ForCausalLM",
        "phi3",
        "llama",
        _DECODER_CONFIG | {"attention.sliding_window": "sliding_window"},
        byte_level_class="GPT2Tokenizer",  # Phi-4's: Phi-3's converter takes GPT-2 BPE only under that class
    ),
}
#: llama.cpp writes Mistral's models as `llama`; a `general.name` naming Mistral picks transformers' Mistral class.
MISTRAL = Export("MistralForCausalLM", "mistral", "llama", _LLAMA.config)

__all__ = ["EXPORTS", "MISTRAL", "Export"]
