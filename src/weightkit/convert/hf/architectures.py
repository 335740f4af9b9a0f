"""What llama.cpp's converter does per Hugging Face architecture, as data: one `Conversion` per HF class.

An entry names the GGUF architecture, maps the checkpoint's tensor names to GGUF's, lists the tensors a
complete checkpoint has (with the dimensions config.json fixes), and picks the steps that differ between
models: tensor renames, value transforms (Llama's rope permutation of Q and K), generated tensors (Llama 3's
rope factors), the keys written after `general.file_type`, the vocabulary, and the checkpoints refused.
Adding an architecture is adding an entry built from these pieces.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FormatError, UnsupportedError
from .config import CONFIG_NAME, HFConfig, positive_integer, read_json_object
from .experts import EXPERT_COUNT, gpt_oss_experts, gpt_oss_filter, gpt_oss_mxfp4, stack_experts
from .kv import KV
from .parameters import LAYERS, rope_parameters, write_text_parameters
from .tensors import SourceTensor
from .tokenizer import (
    SPM_MODEL,
    is_llama_hf_bpe,
    write_bpe_vocab,
    write_llama_hf_vocab,
    write_phi3_vocab,
    write_sentencepiece_vocab,
    write_wordpiece_vocab,
)
from .tokenizer.fast import TOKENIZER_CONFIG, TOKENIZER_JSON
from .tokenizer.special import load_special_vocab, write_special_vocab

TensorFilter = Callable[[str], "str | None"]
TextParameters = Callable[[KV, str, HFConfig, dict[str, Any], int], None]
#: A step between the name filters and the name map (the converter's `modify_tensors` and
#: `generate_extra_tensors`): the checkpoint's tensors in, the tensors to convert out, in order, read lazily.
Rewrite = Callable[[list[tuple[str, SourceTensor]], HFConfig], list[tuple[str, SourceTensor]]]


@dataclass(frozen=True)
class Transform:
    """A change of a tensor's values, for the tensors whose (filtered) HF name ends with one of `suffixes`.
    `apply(values, hparams)` keeps the shape; `check(shape, hparams)` says why a shape will not do;
    `invert(values, hparams)` undoes `apply` (GGUF -> HF)."""

    suffixes: tuple[str, ...]
    apply: Callable[[np.ndarray, HFConfig], np.ndarray]
    check: Callable[[tuple[int, ...], HFConfig], str | None]
    invert: Callable[[np.ndarray, HFConfig], np.ndarray] | None = None


#: A tensor's shape by config.json keys: a key, the first present of several (the converter's find_hparam), or None
#: for any size.
Dims = tuple[str | tuple[str, ...] | None, ...]


@dataclass(frozen=True)
class Conversion:
    """How the converter turns one HF architecture class into GGUF: an entry of `ARCHITECTURES`."""

    gguf: str
    tensor_names: Mapping[str, str]  # HF name ({bid} for the block number) -> GGUF name, without .weight/.bias
    required: Mapping[str, Dims]  # GGUF tensor -> its shape, by config.json keys
    vocab: Callable[[KV, Path, HFConfig], None]
    filters: tuple[TensorFilter, ...] = ()
    transforms: tuple[Transform, ...] = ()
    extra_tensors: tuple[Callable[[HFConfig, dict[str, Any]], list[tuple[str, np.ndarray]]], ...] = ()
    parameters: tuple[Callable[[KV, str, Path, HFConfig], None], ...] = ()
    checks: tuple[Callable[[Path, HFConfig], None], ...] = field(default=())
    text_parameters: TextParameters = write_text_parameters  # the keys up to general.file_type
    leading_parameters: tuple[Callable[[KV, str, HFConfig, dict[str, Any]], None], ...] = ()  # before general.*
    rewrites: tuple[Rewrite, ...] = ()
    quantized: tuple[str, ...] = ()  # the quantization_config.quant_method values converted as stored


# --- tensor names -------------------------------------------------------------------------------------------

_DECODER_NAMES = {
    "model.embed_tokens": "token_embd",
    "model.norm": "output_norm",
    "lm_head": "output",
    "model.layers.{bid}.input_layernorm": "blk.{bid}.attn_norm",
    "model.layers.{bid}.self_attn.q_proj": "blk.{bid}.attn_q",
    "model.layers.{bid}.self_attn.k_proj": "blk.{bid}.attn_k",
    "model.layers.{bid}.self_attn.v_proj": "blk.{bid}.attn_v",
    "model.layers.{bid}.self_attn.o_proj": "blk.{bid}.attn_output",
    "model.layers.{bid}.post_attention_layernorm": "blk.{bid}.ffn_norm",
    "model.layers.{bid}.mlp.gate_proj": "blk.{bid}.ffn_gate",
    "model.layers.{bid}.mlp.up_proj": "blk.{bid}.ffn_up",
    "model.layers.{bid}.mlp.down_proj": "blk.{bid}.ffn_down",
}
_DECODER_ATTENTION_NAMES = {k: v for k, v in _DECODER_NAMES.items() if ".mlp." not in k}
_QK_NORM_NAMES = {
    "model.layers.{bid}.self_attn.q_norm": "blk.{bid}.attn_q_norm",
    "model.layers.{bid}.self_attn.k_norm": "blk.{bid}.attn_k_norm",
}
_GEMMA_NAMES = _DECODER_NAMES | {
    "model.layers.{bid}.post_attention_layernorm": "blk.{bid}.post_attention_norm",
    "model.layers.{bid}.pre_feedforward_layernorm": "blk.{bid}.ffn_norm",
    "model.layers.{bid}.post_feedforward_layernorm": "blk.{bid}.post_ffw_norm",
}
_PHI3_NAMES = {
    **{k: v for k, v in _DECODER_NAMES.items() if ".self_attn." not in k and ".mlp." not in k},
    "model.layers.{bid}.self_attn.qkv_proj": "blk.{bid}.attn_qkv",
    "model.layers.{bid}.self_attn.o_proj": "blk.{bid}.attn_output",
    "model.layers.{bid}.mlp.gate_up_proj": "blk.{bid}.ffn_up",
    "model.layers.{bid}.mlp.down_proj": "blk.{bid}.ffn_down",
}
_BERT_NAMES = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.LayerNorm": "token_embd_norm",
    "encoder.layer.{bid}.attention.self.query": "blk.{bid}.attn_q",
    "encoder.layer.{bid}.attention.self.key": "blk.{bid}.attn_k",
    "encoder.layer.{bid}.attention.self.value": "blk.{bid}.attn_v",
    "encoder.layer.{bid}.attention.output.dense": "blk.{bid}.attn_output",
    "encoder.layer.{bid}.attention.output.LayerNorm": "blk.{bid}.attn_output_norm",
    "encoder.layer.{bid}.intermediate.dense": "blk.{bid}.ffn_up",
    "encoder.layer.{bid}.output.dense": "blk.{bid}.ffn_down",
    "encoder.layer.{bid}.output.LayerNorm": "blk.{bid}.layer_output_norm",
}

_MOE_NAMES = {
    "model.layers.{bid}.mlp.gate": "blk.{bid}.ffn_gate_inp",
    "model.layers.{bid}.mlp.experts.gate_proj": "blk.{bid}.ffn_gate_exps",
    "model.layers.{bid}.mlp.experts.up_proj": "blk.{bid}.ffn_up_exps",
    "model.layers.{bid}.mlp.experts.down_proj": "blk.{bid}.ffn_down_exps",
}
_SHARED_EXPERT_NAMES = {
    "model.layers.{bid}.mlp.shared_expert_gate": "blk.{bid}.ffn_gate_inp_shexp",
    "model.layers.{bid}.mlp.shared_expert.gate_proj": "blk.{bid}.ffn_gate_shexp",
    "model.layers.{bid}.mlp.shared_expert.up_proj": "blk.{bid}.ffn_up_shexp",
    "model.layers.{bid}.mlp.shared_expert.down_proj": "blk.{bid}.ffn_down_shexp",
}
_GPT_OSS_NAMES = {
    **_DECODER_NAMES,
    **_MOE_NAMES,
    "model.layers.{bid}.post_attention_layernorm": "blk.{bid}.post_attention_norm",
    "model.layers.{bid}.self_attn.sinks": "blk.{bid}.attn_sinks",
    "model.layers.{bid}.mlp.router": "blk.{bid}.ffn_gate_inp",
}

_H, _FF = "hidden_size", "intermediate_size"
_DECODER_REQUIRED: dict[str, Dims] = {
    "token_embd.weight": (None, _H),
    "output_norm.weight": (_H,),
    "blk.{bid}.attn_norm.weight": (_H,),
    "blk.{bid}.attn_q.weight": (None, _H),
    "blk.{bid}.attn_k.weight": (None, _H),
    "blk.{bid}.attn_v.weight": (None, _H),
    "blk.{bid}.attn_output.weight": (_H, None),
    "blk.{bid}.ffn_norm.weight": (_H,),
    "blk.{bid}.ffn_gate.weight": (_FF, _H),
    "blk.{bid}.ffn_up.weight": (_FF, _H),
    "blk.{bid}.ffn_down.weight": (_H, _FF),
}
_GEMMA_REQUIRED: dict[str, Dims] = {
    **{k: v for k, v in _DECODER_REQUIRED.items() if k != "token_embd.weight"},
    "token_embd.weight": ("vocab_size", _H),  # Gemma 3's converter cuts a longer one to the vocabulary: refused here
    "blk.{bid}.post_attention_norm.weight": (_H,),
    "blk.{bid}.post_ffw_norm.weight": (_H,),
}
_PHI3_REQUIRED: dict[str, Dims] = {
    "token_embd.weight": (None, _H),
    "output_norm.weight": (_H,),
    "blk.{bid}.attn_norm.weight": (_H,),
    "blk.{bid}.attn_qkv.weight": (None, _H),
    "blk.{bid}.attn_output.weight": (_H, None),
    "blk.{bid}.ffn_norm.weight": (_H,),
    "blk.{bid}.ffn_up.weight": (None, _H),  # gate and up, one above the other
    "blk.{bid}.ffn_down.weight": (_H, _FF),
}
_DENSE_FFN = ("blk.{bid}.ffn_gate.weight", "blk.{bid}.ffn_up.weight", "blk.{bid}.ffn_down.weight")


def _moe_required(experts: str | tuple[str, ...], ff: str) -> dict[str, Dims]:
    """The router and the stacked experts, `experts` and `ff` naming config.json's expert count (the first present
    of several keys, where a tuple) and size."""
    return {
        "blk.{bid}.ffn_gate_inp.weight": (experts, _H),
        "blk.{bid}.ffn_gate_exps.weight": (experts, ff, _H),
        "blk.{bid}.ffn_up_exps.weight": (experts, ff, _H),
        "blk.{bid}.ffn_down_exps.weight": (experts, _H, ff),
    }


_QWEN3_MOE_REQUIRED = {k: v for k, v in _DECODER_REQUIRED.items() if k not in _DENSE_FFN} | _moe_required(
    EXPERT_COUNT, "moe_intermediate_size"
)
_QWEN2_MOE_REQUIRED = (
    {k: v for k, v in _DECODER_REQUIRED.items() if k not in _DENSE_FFN}
    | _moe_required(EXPERT_COUNT, "moe_intermediate_size")
    | {
        "blk.{bid}.ffn_gate_inp_shexp.weight": (None, _H),  # one row
        "blk.{bid}.ffn_gate_shexp.weight": ("shared_expert_intermediate_size", _H),
        "blk.{bid}.ffn_up_shexp.weight": ("shared_expert_intermediate_size", _H),
        "blk.{bid}.ffn_down_shexp.weight": (_H, "shared_expert_intermediate_size"),
    }
)
_GPT_OSS_REQUIRED = {
    **{k: v for k, v in _DECODER_REQUIRED.items() if k not in _DENSE_FFN and k != "blk.{bid}.ffn_norm.weight"},
    **_moe_required("num_local_experts", _FF),
    "blk.{bid}.post_attention_norm.weight": (_H,),
    "blk.{bid}.attn_sinks.weight": ("num_attention_heads",),
    "blk.{bid}.ffn_gate_inp.bias": ("num_local_experts",),
    "blk.{bid}.ffn_gate_exps.bias": ("num_local_experts", _FF),
    "blk.{bid}.ffn_up_exps.bias": ("num_local_experts", _FF),
    "blk.{bid}.ffn_down_exps.bias": ("num_local_experts", _H),
}
_BERT_REQUIRED: dict[str, Dims] = {
    "token_embd.weight": (None, _H),
    "position_embd.weight": ("max_position_embeddings", _H),
    "token_types.weight": ("type_vocab_size", _H),
    "token_embd_norm.weight": (_H,),
    "blk.{bid}.attn_q.weight": (_H, _H),
    "blk.{bid}.attn_k.weight": (_H, _H),
    "blk.{bid}.attn_v.weight": (_H, _H),
    "blk.{bid}.attn_output.weight": (_H, _H),
    "blk.{bid}.attn_output_norm.weight": (_H,),
    "blk.{bid}.ffn_up.weight": (_FF, _H),
    "blk.{bid}.ffn_down.weight": (_H, _FF),
    "blk.{bid}.layer_output_norm.weight": (_H,),
}


# --- filters on HF names ------------------------------------------------------------------------------------

_MULTIMODAL_PREFIXES = ("mlp", "vit.", "vpm.", "siglip2.", "conformer.", "merger.", "resampler.", "sound_encoder.",
                        "sound_projection.", "speech_embeddings.")  # fmt: skip
_MULTIMODAL_PARTS = ("visual.", "vision.", "audio.", "talker.", "vision_", "audio_", "token2wav.", "code2wav.",
                     "projector.", "pre_mm_projector_norm", "image_newline", "view_seperator", "patch_embed",
                     "patch_embedding", "patch_merger.", "patch_merge_mlp.", "model.connector.")  # fmt: skip


def common_filter(name: str) -> str | None:
    """`TextModel.filter_tensors` and `ModelBase.filter_tensors`, which every architecture ends with: drop
    multimodal towers, drop `language_model.` from names."""
    if name.startswith(_MULTIMODAL_PREFIXES) or any(p in name for p in _MULTIMODAL_PARTS):
        return None
    if name.endswith("e_score_correction_bias"):
        name = name.replace("e_score_correction_bias", "e_score_correction.bias")
    return name.replace("language_model.", "")


def _drop_text_model_prefix(name: str) -> str:
    return name.replace("text_model.", "")


def _drop_lm_head(name: str) -> str | None:
    """`Gemma2Model.filter_tensors`: llama.cpp ties Gemma 2's output to the embedding, whatever the file has."""
    return None if name == "lm_head.weight" else name


_BERT_DROPPED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


def _bert_filter(name: str) -> str | None:
    """`BertModel.filter_tensors`: no `bert.` prefix, gamma/beta as weight/bias, no pooler or pre-training heads."""
    name = name.removeprefix("bert.")
    if name.endswith(".gamma"):
        name = name[:-6] + ".weight"
    if name.endswith(".beta"):
        name = name[:-5] + ".bias"
    if name in _BERT_DROPPED or name.startswith(("cls.predictions", "cls.seq_relationship")):
        return None
    return name


# --- transforms ---------------------------------------------------------------------------------------------


def _rope_heads(h: HFConfig, kv: bool) -> int:
    heads = h.find(("n_heads", "num_attention_heads"))
    kv_heads = h.find(("n_kv_heads", "num_key_value_heads"))
    return kv_heads if kv and kv_heads is not None and kv_heads != heads else heads


def _unpermute(suffixes: tuple[str, ...], heads_of: Callable[[HFConfig], int]) -> Transform:
    """`LlamaModel.permute`: HF stores Q and K with the two rope halves of each head apart; GGUF interleaves."""

    def apply(w: np.ndarray, h: HFConfig) -> np.ndarray:
        n = heads_of(h)
        return w.reshape(n, 2, w.shape[0] // n // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    def invert(w: np.ndarray, h: HFConfig) -> np.ndarray:
        n = heads_of(h)
        return w.reshape(n, w.shape[0] // n // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    def check(shape: tuple[int, ...], h: HFConfig) -> str | None:
        n = heads_of(h)
        if not shape or shape[0] % (2 * n):
            return f"{shape[0] if shape else 0} rows are not whole pairs of rope halves for {n} heads"
        return None

    return Transform(suffixes, apply, check, invert)


def _plus_one(w: np.ndarray, h: HFConfig) -> np.ndarray:
    return w + 1  # in the tensor's own float16 or float32, as torch does it


def _minus_one(w: np.ndarray, h: HFConfig) -> np.ndarray:
    return w - np.float32(1)


# Gemma's RMS norms scale by (1 + weight); GGUF stores the factor itself
_GEMMA_NORMS = Transform(("norm.weight",), _plus_one, lambda shape, h: None, _minus_one)

_LLAMA_TRANSFORMS = (
    _unpermute(("q_proj.weight", "q_proj.bias"), lambda h: _rope_heads(h, kv=False)),
    _unpermute(("k_proj.weight", "k_proj.bias"), lambda h: _rope_heads(h, kv=True)),
)


# --- generated tensors --------------------------------------------------------------------------------------

_F32 = np.float32


def _rdiv(numerator: float, x: np.float32) -> np.float32:
    """torch's `python_number / tensor`: the reciprocal rounded to float32, then times the number."""
    return _F32(_F32(1) / x) * _F32(numerator)


def llama3_rope_factors(h: HFConfig, rope: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """`LlamaModel.generate_extra_tensors`: Llama 3's per-frequency rope factors (`rope_freqs.weight`), with
    the converter's float32 arithmetic. Its `base ** exponents` is float32 pow; here the exact power rounded
    to float32 (torch's vectorized pow can differ by one unit in the last place; on every Llama 3 shape
    checked no factor changed)."""
    params = rope.get("full_attention", rope)
    if not params or str(params.get("rope_type", "")).lower() != "llama3":
        return []
    base = params.get("rope_theta", 10000.0)
    dim = h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]
    exponents = (np.arange(0, dim, 2, dtype=_F32) / _F32(dim)).astype(_F32)
    freqs = [_rdiv(1.0, _F32(np.float64(base) ** np.float64(e))) for e in exponents]
    factor = params.get("factor", 8.0)
    low, high = params.get("low_freq_factor", 1.0), params.get("high_freq_factor", 4.0)
    old = params.get("original_max_position_embeddings", 8192)
    low_wavelen, high_wavelen = old / low, old / high
    factors = []
    for freq in freqs:
        wavelen = _rdiv(2 * math.pi, freq)
        if wavelen < high_wavelen:
            factors.append(1.0)
        elif wavelen > low_wavelen:
            factors.append(factor)
        else:
            smooth = (_rdiv(old, wavelen) - _F32(low)) / _F32(high - low)
            factors.append(_rdiv(1.0, (_F32(1) - smooth) / _F32(factor) + smooth))
    return [("rope_freqs.weight", np.array(factors, dtype=_F32))]


# --- keys after general.file_type ---------------------------------------------------------------------------


def _llama_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    kv.u32(f"{arch}.vocab_size", h["vocab_size"])
    head_dim = h.get("head_dim")
    kv.u32(
        f"{arch}.rope.dimension_count",
        head_dim if head_dim is not None else h["hidden_size"] // h["num_attention_heads"],
    )


def _number(h: HFConfig, key: str, default: Any = None) -> Any:
    """A config value the converter writes as a number: present (or defaulted) and numeric."""
    value = h.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise FormatError(CONFIG_NAME, None, f"{key} is {value!r}, not a number")
    return value


def _gemma2_text_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """`Gemma2Model.set_gguf_parameters` (none of the common keys; no rope base)."""
    kv.u32(f"{arch}.context_length", _number(h, "max_position_embeddings"))
    kv.u32(f"{arch}.embedding_length", _number(h, "hidden_size"))
    kv.u32(f"{arch}.block_count", h.find(LAYERS))
    kv.u32(f"{arch}.feed_forward_length", _number(h, "intermediate_size"))
    kv.u32(f"{arch}.attention.head_count", _number(h, "num_attention_heads"))
    kv_heads = "num_key_value_heads" if "num_key_value_heads" in h else "num_attention_heads"
    kv.u32(f"{arch}.attention.head_count_kv", _number(h, kv_heads))
    kv.f32(f"{arch}.attention.layer_norm_rms_epsilon", _number(h, "rms_norm_eps"))
    kv.u32(f"{arch}.attention.key_length", _number(h, "head_dim"))
    kv.u32(f"{arch}.attention.value_length", _number(h, "head_dim"))
    kv.u32("general.file_type", file_type)


def _gemma2_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    kv.f32(f"{arch}.attn_logit_softcapping", _number(h, "attn_logit_softcapping"))
    kv.f32(f"{arch}.final_logit_softcapping", _number(h, "final_logit_softcapping"))
    kv.u32(f"{arch}.attention.sliding_window", _number(h, "sliding_window"))


def _gemma3_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Gemma3Model.set_gguf_parameters` after the common keys: some set again (they keep their places) with
    Gemma 3's defaults, the final soft-capping and the sliding window."""
    rope = rope_parameters(h)
    kv.u32(f"{arch}.context_length", _number(h, "max_position_embeddings", 131072))
    kv.u32(f"{arch}.attention.head_count", _number(h, "num_attention_heads", 8))
    kv.f32(f"{arch}.attention.layer_norm_rms_epsilon", _number(h, "rms_norm_eps", 1e-6))
    kv.u32(f"{arch}.attention.key_length", _number(h, "head_dim", 256))
    kv.u32(f"{arch}.attention.value_length", _number(h, "head_dim", 256))
    kv.f32(f"{arch}.rope.freq_base", _number(rope.get("full_attention", rope), "rope_theta", 1_000_000.0))
    if h.get("attn_logit_softcapping") is not None:
        raise UnsupportedError(f"{folder / CONFIG_NAME}: Gemma 3 has no attention soft-capping "
                               "(attn_logit_softcapping is set)")  # fmt: skip
    if h.get("final_logit_softcapping"):
        kv.f32(f"{arch}.final_logit_softcapping", _number(h, "final_logit_softcapping"))
    if h.get("sliding_window_pattern") != 1:
        kv.u32(f"{arch}.attention.sliding_window", _number(h, "sliding_window"))
    kv.u32(f"{arch}.attention.head_count_kv", _number(h, "num_key_value_heads", 4))


def _phi3_rope_dims(h: HFConfig, rope: dict[str, Any]) -> int:
    heads = h.find(("num_attention_heads", "n_head"))
    return int(rope.get("partial_rotary_factor", 1.0) * h.find(("hidden_size", "n_embd"))) // heads


def _phi3_text_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """`Phi3MiniModel.set_gguf_parameters` (none of the common keys)."""
    kv.u32(f"{arch}.context_length", h.find(("n_positions", "max_position_embeddings")))
    kv.u32(f"{arch}.rope.scaling.original_context_length", _number(rope, "original_max_position_embeddings"))
    kv.u32(f"{arch}.embedding_length", h.find(("hidden_size", "n_embd")))
    kv.u32(f"{arch}.feed_forward_length", _number(h, "intermediate_size"))
    kv.u32(f"{arch}.block_count", h.find(LAYERS))
    kv.u32(f"{arch}.attention.head_count", h.find(("num_attention_heads", "n_head")))
    kv.u32(f"{arch}.attention.head_count_kv", h.find(("num_key_value_heads", "n_head_kv")))
    kv.f32(f"{arch}.attention.layer_norm_rms_epsilon", _number(h, "rms_norm_eps"))
    kv.u32(f"{arch}.rope.dimension_count", _phi3_rope_dims(h, rope))
    kv.f32(f"{arch}.rope.freq_base", _number(rope.get("full_attention", rope), "rope_theta"))
    kv.u32("general.file_type", file_type)
    kv.u32(f"{arch}.attention.sliding_window", h.get("sliding_window") or 0)


def _phi3_long_rope(h: HFConfig, rope: dict[str, Any]) -> tuple[float, list[float], list[float]] | None:
    """Phi-3's long-context rope (`generate_extra_tensors`): the attention factor and the two factor lists."""
    long, short = rope.get("long_factor"), rope.get("short_factor")
    if not long:
        return None
    original = _number(rope, "original_max_position_embeddings")
    scale = h.find(("n_positions", "max_position_embeddings")) / original
    kind = str(rope.get("rope_type", "")).lower()
    if kind in ("su", "longrope"):
        factor = math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1.0 else 1.0
    elif kind == "yarn":
        factor = 0.1 * math.log(scale) + 1.0 if scale > 1.0 else 1.0
    else:
        raise UnsupportedError(f"{CONFIG_NAME}: Phi-3 rope scaling {kind or '(no type)'!r} is not supported")
    half = _phi3_rope_dims(h, rope) / 2
    if not isinstance(short, list) or not isinstance(long, list) or len(long) != len(short) or len(long) != half:
        raise FormatError(CONFIG_NAME, None, f"rope_scaling's long_factor and short_factor must have {half:g} "
                                             "numbers each")  # fmt: skip
    return factor, long, short


def _phi3_attn_factor(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any]) -> None:
    if (long_rope := _phi3_long_rope(h, rope)) is not None:
        kv.f32(f"{arch}.rope.scaling.attn_factor", long_rope[0])


def _phi3_rope_factors(h: HFConfig, rope: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    if (long_rope := _phi3_long_rope(h, rope)) is None:
        return []
    return [("rope_factors_long.weight", np.array(long_rope[1], dtype=_F32)),
            ("rope_factors_short.weight", np.array(long_rope[2], dtype=_F32))]  # fmt: skip


def _moe_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Qwen2MoeModel.set_gguf_parameters`'s additions: the experts' feed-forward sizes."""
    if (size := h.get("moe_intermediate_size")) is not None:
        kv.u32(f"{arch}.expert_feed_forward_length", size)
    if (size := h.get("shared_expert_intermediate_size")) is not None:
        kv.u32(f"{arch}.expert_shared_feed_forward_length", size)


def _gpt_oss_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`GptOssModel.set_gguf_parameters`'s additions: the sliding window and the experts' size."""
    kv.u32(f"{arch}.attention.sliding_window", positive_integer(h, "sliding_window", folder))
    kv.u32(f"{arch}.expert_feed_forward_length", h[_FF])


_POOLING = {"mean": 1, "cls": 2, "lasttoken": 3}


def _pooling_type(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`_try_set_pooling_type`: sentence-transformers' pooling module (modules.json), and a classifier's."""
    modules_path = folder / "modules.json"
    pooling_dir = None
    if modules_path.is_file():
        modules = json.loads(modules_path.read_text(encoding="utf-8"))
        if not isinstance(modules, list) or not all(
            isinstance(m, dict) and isinstance(m.get("type"), str) for m in modules
        ):
            raise FormatError(modules_path, None, "not a list of modules with a type each")
        pooling_dir = next((m.get("path") for m in modules if m["type"].endswith("Pooling")), None)
    if pooling_dir is not None:
        config_path = folder / str(pooling_dir) / CONFIG_NAME
        pooling = read_json_object(config_path, "the pooling module's config.json")
        flags = (("pooling_mode_mean_tokens", 1), ("pooling_mode_cls_token", 2), ("pooling_mode_lasttoken", 3))
        kind = next((k for flag, k in flags if pooling.get(flag)), None)
        if kind is None:
            kind = _POOLING.get(pooling.get("pooling_mode"))  # type: ignore[arg-type]
        if kind is None:
            raise UnsupportedError(f"{config_path}: only mean, CLS and last-token pooling are supported")
        kv.u32(f"{arch}.pooling_type", kind)
    if (classifier := h.get("classifier_pooling")) is not None:
        if classifier not in ("cls", "mean"):
            raise UnsupportedError(f"{folder / CONFIG_NAME}: classifier_pooling {classifier!r} is not supported")
        kv.u32(f"{arch}.classifier.pooling_type", _POOLING[classifier])


def _bert_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`BertModel.set_gguf_parameters`'s additions: not causal, pooling, and real classifier labels."""
    kv.bool(f"{arch}.attention.causal", False)
    _pooling_type(kv, arch, folder, h)
    labels = h.get("id2label") or {}
    if labels and not (len(labels) == 2 and labels.get(0) == "LABEL_0"):  # AutoConfig's dummy labels
        kv.array(f"{arch}.classifier.output_labels", [v for _, v in sorted(labels.items())], str(folder / CONFIG_NAME))


# --- vocabularies -------------------------------------------------------------------------------------------


def _qwen_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`Qwen2Model.set_vocab`: SentencePiece if there is a tokenizer.model, else GPT-2 BPE."""
    if (folder / SPM_MODEL).is_file():
        write_sentencepiece_vocab(kv, folder, h)
    else:
        write_bpe_vocab(kv, folder, h)


def _gemma2_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`Gemma2Model.set_vocab`: SentencePiece, and no space prefix."""
    write_sentencepiece_vocab(kv, folder, h)
    kv.bool("tokenizer.ggml.add_space_prefix", False)


def _gemma3_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`Gemma3Model.set_vocab`: SentencePiece without space prefix if there is a tokenizer.model, else BPE."""
    if (folder / SPM_MODEL).is_file():
        _gemma2_vocab(kv, folder, h)
    else:
        write_bpe_vocab(kv, folder, h)


def _phi3_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`Phi3MiniModel.set_vocab`: GPT-2 BPE when tokenizer_config.json says GPT2Tokenizer (Phi-4), else its
    own SentencePiece variant."""
    config_path = folder / TOKENIZER_CONFIG
    if config_path.is_file():
        config = read_json_object(config_path, "tokenizer_config.json")
        if "tokenizer_class" not in config:
            raise FormatError(config_path, None, "no tokenizer_class (Phi-3's converter needs it)")
        if config["tokenizer_class"] == "GPT2Tokenizer":
            write_bpe_vocab(kv, folder, h)
            return
    write_phi3_vocab(kv, folder, h)


def _gpt2_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`TextModel._set_vocab_gpt2`: a byte-level BPE tokenizer (tokenizer.json), whatever else is there."""
    write_bpe_vocab(kv, folder, h)


def _llama_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`LlamaModel.set_vocab`: the add_prefix_space flag first, then SentencePiece, Llama-style byte-fallback
    BPE, or GPT-2 BPE (Llama 3), whichever the files are; small Granite/SmolLM vocabularies add no BOS."""
    if (folder / "tekken.json").is_file() and not (folder / TOKENIZER_JSON).is_file():
        raise UnsupportedError(f"{folder / 'tekken.json'}: Mistral's tekken tokenizer is not supported yet")
    config_path = folder / TOKENIZER_CONFIG
    if config_path.is_file():
        config = read_json_object(config_path, "tokenizer_config.json")
        if (prefix := config.get("add_prefix_space")) is not None:
            kv.bool("tokenizer.ggml.add_space_prefix", prefix)
        if config.get("tokenizer_class") == "HybridDNATokenizer":
            raise UnsupportedError(f"{config_path}: HybridDNATokenizer is not supported")
    if (folder / SPM_MODEL).is_file():
        write_sentencepiece_vocab(kv, folder, h)
    elif is_llama_hf_bpe(folder):
        write_llama_hf_vocab(kv, folder, h)
    else:
        write_bpe_vocab(kv, folder, h)
    if h.get("vocab_size", 32000) == 32016:
        _codellama_infill(kv, folder)
    if h.get("vocab_size", 32000) == 49152:
        kv.bool("tokenizer.ggml.add_bos_token", False)


#: CodeLlama's infill tokens, by the ids its 32016-token vocabulary has them at
_INFILL_IDS = {"prefix": 32007, "suffix": 32008, "middle": 32009, "eot": 32010}


def _codellama_infill(kv: KV, folder: Path) -> None:
    """`LlamaModel.set_vocab` for CodeLlama (vocab_size 32016): a second `SpecialVocab` over the infill token
    types, with CodeLlama's ids where the files give none. Of these only EOT has a GGUF key; the special
    vocabulary's add_* flags, chat template and normalizer flags are written again (same keys, same places)."""
    special = load_special_vocab(folder, load_merges=False, types=tuple(_INFILL_IDS), fallback_ids=_INFILL_IDS)
    write_special_vocab(kv, special, folder / TOKENIZER_CONFIG)


# --- refusals -----------------------------------------------------------------------------------------------


def _refuse_qwen3_reranker(folder: Path, h: HFConfig) -> None:
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


# --- the table ----------------------------------------------------------------------------------------------

_LLAMA = Conversion(
    gguf="llama",
    tensor_names=_DECODER_NAMES,
    required=_DECODER_REQUIRED,
    vocab=_llama_vocab,
    filters=(_drop_text_model_prefix,),
    transforms=_LLAMA_TRANSFORMS,
    extra_tensors=(llama3_rope_factors,),
    parameters=(_llama_parameters,),
)

_GEMMA3 = Conversion(
    gguf="gemma3",
    tensor_names=_GEMMA_NAMES | _QK_NORM_NAMES,
    required=_GEMMA_REQUIRED,
    vocab=_gemma3_vocab,
    transforms=(_GEMMA_NORMS,),
    parameters=(_gemma3_parameters,),
)


def _qwen_moe(gguf: str, tensor_names: Mapping[str, str], required: Mapping[str, Dims]) -> Conversion:
    """Qwen2-MoE and Qwen3-MoE (`Qwen2MoeModel` and its subclass): byte-level BPE, experts stacked."""
    return Conversion(gguf=gguf, tensor_names=tensor_names, required=required, vocab=_gpt2_vocab,
                        parameters=(_moe_parameters,), rewrites=(stack_experts,))  # fmt: skip


ARCHITECTURES: dict[str, Conversion] = {
    "LlamaForCausalLM": _LLAMA,
    "MistralForCausalLM": _LLAMA,
    "Qwen2ForCausalLM": Conversion(
        gguf="qwen2",
        tensor_names=_DECODER_NAMES,
        required=_DECODER_REQUIRED,
        vocab=_qwen_vocab,
        parameters=(_pooling_type,),
    ),
    "Qwen3ForCausalLM": Conversion(
        gguf="qwen3",
        tensor_names=_DECODER_NAMES | _QK_NORM_NAMES,
        required=_DECODER_REQUIRED,
        vocab=_qwen_vocab,
        parameters=(_pooling_type,),
        checks=(_refuse_qwen3_reranker,),
    ),
    "Gemma2ForCausalLM": Conversion(
        gguf="gemma2",
        tensor_names=_GEMMA_NAMES,
        required=_GEMMA_REQUIRED,
        vocab=_gemma2_vocab,
        filters=(_drop_lm_head,),
        transforms=(_GEMMA_NORMS,),
        text_parameters=_gemma2_text_parameters,
        parameters=(_gemma2_parameters,),
    ),
    "Gemma3ForCausalLM": _GEMMA3,
    "Gemma3ForConditionalGeneration": _GEMMA3,  # its text model; the vision tower is dropped (mmproj is apart)
    "Phi3ForCausalLM": Conversion(
        gguf="phi3",
        tensor_names=_PHI3_NAMES,
        required=_PHI3_REQUIRED,
        vocab=_phi3_vocab,
        extra_tensors=(_phi3_rope_factors,),
        text_parameters=_phi3_text_parameters,
        leading_parameters=(_phi3_attn_factor,),
    ),
    "Qwen2MoeForCausalLM": _qwen_moe(
        "qwen2moe", _DECODER_ATTENTION_NAMES | _MOE_NAMES | _SHARED_EXPERT_NAMES, _QWEN2_MOE_REQUIRED
    ),
    # no dense MLP names: as in gguf-py's qwen3moe tensors, a layer without experts (mlp_only_layers,
    # decoder_sparse_step; config.json's flags themselves are not read) has tensors without a GGUF name
    "Qwen3MoeForCausalLM": _qwen_moe(
        "qwen3moe", _DECODER_ATTENTION_NAMES | _QK_NORM_NAMES | _MOE_NAMES, _QWEN3_MOE_REQUIRED
    ),
    "GptOssForCausalLM": Conversion(
        gguf="gpt-oss",
        tensor_names=_GPT_OSS_NAMES,
        required=_GPT_OSS_REQUIRED,
        vocab=_gpt2_vocab,
        filters=(gpt_oss_filter,),
        parameters=(_gpt_oss_parameters,),
        rewrites=(gpt_oss_mxfp4, gpt_oss_experts),
        quantized=("mxfp4",),
    ),
    "BertModel": Conversion(
        gguf="bert",
        tensor_names=_BERT_NAMES,
        required=_BERT_REQUIRED,
        vocab=write_wordpiece_vocab,
        filters=(_bert_filter,),
        parameters=(_bert_parameters,),
    ),
}

__all__ = ["ARCHITECTURES", "Conversion", "Transform", "common_filter"]
