"""Llama (1-3, CodeLlama), Mistral, Mistral Small 3.x, Mixtral and SmolLM3: `LlamaModel` of llama.cpp's converter
(SmolLM3's `SmolLM3Model` and Mistral Small 3's `Mistral3Model` are it under other GGUF architectures; Mistral Small
3's Pixtral projector, `LlavaVisionModel`), and transformers' Llama and Mistral classes for `--to hf`."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FormatError, UnsupportedError
from ..hf.config import CONFIG_NAME, PARAMS_JSON, ConfigClass, HFConfig, read_json_object
from ..hf.experts import ExpertLayout, expert_stacker
from ..hf.kv import KV
from ..hf.projector import projector_config, write_vision_parameters
from ..hf.tokenizer import (
    SPM_MODEL,
    has_tekken_only,
    is_llama_hf_bpe,
    write_bpe_vocab,
    write_llama_hf_vocab,
    write_sentencepiece_vocab,
    write_tekken_vocab,
)
from ..hf.tokenizer.fast import TOKENIZER_CONFIG, TOKENIZER_JSON
from ..hf.tokenizer.special import load_special_vocab, write_special_vocab
from .decoder import (
    DECODER_CONFIG,
    DECODER_DEFAULTS,
    DECODER_NAMES,
    DECODER_REQUIRED,
    DENSE_FFN,
    FF,
    ROPE_UNPERMUTE,
    head_dim_from_hidden_size,
    kv_heads_default_to_heads,
    moe_required,
    number,
    rope_parameters_of_5x,
    rope_type_from_type,
    unpermute,
)
from .family import Conversion, Dims, Export, Family, TensorShapes
from .vision import projector

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


def drop_text_model_prefix(name: str) -> str:
    """`LlamaModel.filter_tensors`: SmolVLM's text model named as Llama's."""
    return name.replace("text_model.", "")


def llama_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`LlamaModel.set_gguf_parameters` after the common keys: the vocabulary size and rope's dimensions."""
    kv.u32(f"{arch}.vocab_size", h["vocab_size"])
    head_dim = h.get("head_dim")
    kv.u32(
        f"{arch}.rope.dimension_count",
        head_dim if head_dim is not None else h["hidden_size"] // h["num_attention_heads"],
    )


def _llama_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`LlamaModel.set_vocab`: Mistral's tekken.json where the folder has no tokenizer.json; else the
    add_prefix_space flag first, then SentencePiece, Llama-style byte-fallback BPE, or GPT-2 BPE (Llama 3),
    whichever the files are; small Granite/SmolLM vocabularies add no BOS."""
    if has_tekken_only(folder):
        write_tekken_vocab(kv, folder)
        return
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


def _attention_bias(shapes: TensorShapes, config: dict[str, Any]) -> dict[str, Any]:
    """Llama's `attention_bias`: whether the checkpoint has Q/K/V biases."""
    return {"attention_bias": "blk.0.attn_q.bias" in shapes}


_LLAMA = Conversion(
    gguf="llama",
    tensor_names=DECODER_NAMES,
    required=DECODER_REQUIRED,
    vocab=_llama_vocab,
    filters=(drop_text_model_prefix,),
    transforms=ROPE_UNPERMUTE,
    extra_tensors=(llama3_rope_factors,),
    parameters=(llama_parameters,),
)
#: Mixtral's experts (`LlamaModel.modify_tensors`): w1, w2 and w3 are gate, down and up
_MIXTRAL_EXPERTS = ExpertLayout("block_sparse_moe.experts", ("num_local_experts",), ("w1", "w2", "w3"),
                                "model.layers.{bid}.block_sparse_moe.experts.{x}.{kind}.weight",
                                "model.layers.{bid}.block_sparse_moe.experts.{kind}.weight")  # fmt: skip
_MIXTRAL = replace(
    _LLAMA,
    tensor_names={k: v for k, v in DECODER_NAMES.items() if ".mlp." not in k} | {
        "model.layers.{bid}.block_sparse_moe.gate": "blk.{bid}.ffn_gate_inp",
        "model.layers.{bid}.block_sparse_moe.experts.w1": "blk.{bid}.ffn_gate_exps",
        "model.layers.{bid}.block_sparse_moe.experts.w2": "blk.{bid}.ffn_down_exps",
        "model.layers.{bid}.block_sparse_moe.experts.w3": "blk.{bid}.ffn_up_exps",
    },
    required={k: v for k, v in DECODER_REQUIRED.items() if k not in DENSE_FFN} | moe_required("num_local_experts", FF),
    rewrites=(expert_stacker(_MIXTRAL_EXPERTS),),
)  # fmt: skip
#: Mistral Small 3.x's text model (`Mistral3Model`: Llama's, as `mistral3`; Ministral 3's yarn keys and Mistral 4's
#: MoE are other text configs, not converted here)
_MISTRAL3 = replace(_LLAMA, gguf="mistral3")
#: SmolLM3: Llama's conversion as `smollm3` (llama.cpp itself leaves rope out of every 4th layer; nothing is written)
_SMOLLM3 = replace(_LLAMA, gguf="smollm3")
# --- Mistral's own format (`--mistral-format`: params.json, consolidated.safetensors, `MistralModel`) -------------

#: Mistral's tensor names -> GGUF names (gguf-py's table for the original Llama layout)
_MISTRAL_FORMAT_NAMES = {
    "tok_embeddings": "token_embd",
    "norm": "output_norm",
    "output": "output",
    "layers.{bid}.attention_norm": "blk.{bid}.attn_norm",
    "layers.{bid}.attention.wq": "blk.{bid}.attn_q",
    "layers.{bid}.attention.wk": "blk.{bid}.attn_k",
    "layers.{bid}.attention.wv": "blk.{bid}.attn_v",
    "layers.{bid}.attention.wo": "blk.{bid}.attn_output",
    "layers.{bid}.ffn_norm": "blk.{bid}.ffn_norm",
    "layers.{bid}.feed_forward.w1": "blk.{bid}.ffn_gate",
    "layers.{bid}.feed_forward.w2": "blk.{bid}.ffn_down",
    "layers.{bid}.feed_forward.w3": "blk.{bid}.ffn_up",
}
#: params.json's names of the sizes the decoder's tensors are checked by
_MISTRAL_FORMAT_SIZES = {"hidden_size": "dim", FF: "hidden_dim"}
#: params.json sections of models the reference converts otherwise (MoE as DeepSeek-V2, Mistral 3's llama 4
#: scaling as `mistral3`) or with more keys (yarn), or quantized: not converted here
_MISTRAL_FORMAT_REFUSED = ("moe", "llama_4_scaling", "yarn", "quantization")


def _mistral_format_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`TextModel._set_vocab_mistral`, for the tekken.json of a Mistral-format folder (its SentencePiece
    tokenizer.model.v* files are not read)."""
    if not has_tekken_only(folder):
        raise UnsupportedError(f"{folder}: a Mistral-format checkpoint without tekken.json (or with a tokenizer.json "
                               "beside it) is not supported")  # fmt: skip
    write_tekken_vocab(kv, folder)


def _mistral_format_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`MistralModel.set_gguf_parameters` after the common keys: rope's dimensions (no vocabulary size: the
    tokenizer writes it)."""
    for section in _MISTRAL_FORMAT_REFUSED:
        if section in h:
            raise UnsupportedError(f"{folder / PARAMS_JSON}: '{section}' is not supported in a Mistral-format "
                                   "checkpoint")  # fmt: skip
    head_dim = h.get("head_dim")
    if not isinstance(head_dim, int) or isinstance(head_dim, bool) or head_dim < 1:
        raise FormatError(folder / PARAMS_JSON, None, f"head_dim is {head_dim!r}, not a positive integer")
    kv.u32(f"{arch}.rope.dimension_count", head_dim)


#: `MistralModel`: Llama's decoder under Mistral's names, its Q and K stored in llama.cpp's rope layout already
MISTRAL_FORMAT = Conversion(
    gguf="llama",
    tensor_names=_MISTRAL_FORMAT_NAMES,
    required={k: tuple(_MISTRAL_FORMAT_SIZES.get(d, d) if isinstance(d, str) else d for d in dims)
              for k, dims in DECODER_REQUIRED.items()},
    vocab=_mistral_format_vocab,
    parameters=(_mistral_format_parameters,),
)  # fmt: skip
# --- Mistral Small 3's Pixtral projector (`LlavaVisionModel`) ----------------------------------------------------

_T = "vision_tower.transformer.layers.{bid}."
_VISION_NAMES = {
    "vision_tower.patch_conv": "v.patch_embd",
    "vision_tower.ln_pre": "v.pre_ln",
    _T + "attention.q_proj": "v.blk.{bid}.attn_q",
    _T + "attention.k_proj": "v.blk.{bid}.attn_k",
    _T + "attention.v_proj": "v.blk.{bid}.attn_v",
    _T + "attention.o_proj": "v.blk.{bid}.attn_out",
    _T + "attention_norm": "v.blk.{bid}.ln1",
    _T + "ffn_norm": "v.blk.{bid}.ln2",
    _T + "feed_forward.gate_proj": "v.blk.{bid}.ffn_gate",
    _T + "feed_forward.up_proj": "v.blk.{bid}.ffn_up",
    _T + "feed_forward.down_proj": "v.blk.{bid}.ffn_down",
    "multi_modal_projector.norm": "mm.input_norm",
    "multi_modal_projector.patch_merger.merging_layer": "mm.patch_merger",
    # gguf-py maps the projection's layers by their number as if blocks, so the reference refuses a tower of fewer
    # than 3 layers (no released model has one)
    "multi_modal_projector.linear_1": "mm.1",
    "multi_modal_projector.linear_2": "mm.2",
}
_VH, _VFF = "hidden_size", "intermediate_size"
_VISION_REQUIRED: dict[str, Dims] = {
    "v.patch_embd.weight": (_VH, "num_channels", "patch_size", "patch_size"),
    "v.pre_ln.weight": (_VH,),
    **{f"v.blk.{{bid}}.attn_{x}.weight": (_VH, _VH) for x in ("q", "k", "v", "out")},
    **{f"v.blk.{{bid}}.{norm}.weight": (_VH,) for norm in ("ln1", "ln2")},
    "v.blk.{bid}.ffn_gate.weight": (_VFF, _VH),
    "v.blk.{bid}.ffn_up.weight": (_VFF, _VH),
    "v.blk.{bid}.ffn_down.weight": (_VH, _VFF),
    "mm.input_norm.weight": (_VH,),
    "mm.patch_merger.weight": (_VH, None),
    "mm.1.weight": (None, _VH),
    "mm.2.weight": (None, None),
}
_VISION_PREFIXES = ("multi_modal_projector.", "vision_tower.", "vision_encoder.", "vision_language_adapter.",
                    "patch_merger.", "pre_mm_projector_norm")  # fmt: skip


def _vision_tensors(name: str) -> str | None:
    """`LlavaVisionModel.modify_tensors`: the vision tower's and projector's tensors; the rest skipped (the
    [IMG_BREAK] row of the token embedding is never reached: the language model's tensors are dropped first)."""
    return name if name.startswith(_VISION_PREFIXES) else None


def _vision_heads(h: HFConfig) -> int:
    return number(h, "num_attention_heads")


_PERMUTE = (unpermute(("q_proj.weight", "q_proj.bias"), _vision_heads),
            unpermute(("k_proj.weight", "k_proj.bias"), _vision_heads))  # fmt: skip


def _token_id(folder: Path, token: str) -> int:
    """`LlavaVisionModel.get_token_id`: the token's id in tokenizer_config.json's added tokens, else in
    tokenizer.json's; refused when neither has it."""
    decoder = read_json_object(folder / TOKENIZER_CONFIG, "tokenizer_config.json").get("added_tokens_decoder") or {}
    for token_id, entry in decoder.items():
        if isinstance(entry, dict) and entry.get("content") == token:
            return int(token_id)
    added = read_json_object(folder / TOKENIZER_JSON, "tokenizer.json", shared=True).get("added_tokens") or []
    for entry in added:
        if isinstance(entry, dict) and entry.get("content") == token:
            return int(entry["id"])
    raise FormatError(folder / TOKENIZER_JSON, None, f"no {token} token: Pixtral's projector needs it")


def _check_pixtral(folder: Path, h: HFConfig) -> None:
    """`LlavaVisionModel.__init__`: only a Pixtral vision tower, with its [IMG_BREAK] token in the tokenizer."""
    if h.get("model_type") != "pixtral":
        raise UnsupportedError(f"{folder / CONFIG_NAME}: vision_config.model_type {h.get('model_type')!r}: only "
                               "Pixtral's projector is converted")  # fmt: skip
    _token_id(folder, "[IMG_BREAK]")


_ACTIVATIONS = {"silu": "clip.use_silu", "gelu": "clip.use_gelu"}


def _vision_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`LlavaVisionModel.set_gguf_parameters` after the common clip keys (Pixtral's): the projector type, the
    norm epsilon (modeling_pixtral's 1e-5 where the config has none), the activation, the patch merger's size."""
    h = projector_config(h)
    kv.string("clip.projector_type", "pixtral")
    kv.f32("clip.vision.attention.layer_norm_epsilon", number(h, "layer_norm_eps", 1e-5))
    act = h.get("hidden_act")
    if act not in _ACTIVATIONS:
        raise UnsupportedError(f"{folder / CONFIG_NAME}: vision_config.hidden_act {act!r} is not supported")
    kv.bool(_ACTIVATIONS[act], True)
    if "spatial_merge_size" in h.model:
        kv.u32("clip.vision.spatial_merge_size", number(h.model, "spatial_merge_size"))


_PIXTRAL = projector(
    tensor_names=_VISION_NAMES,
    required=_VISION_REQUIRED,
    filters=(_vision_tensors,),
    transforms=_PERMUTE,
    checks=(_check_pixtral,),
    text_parameters=write_vision_parameters,
    parameters=(_vision_parameters,),
)

_EXPORT_CONFIG = DECODER_CONFIG | {"rope.dimension_count": "head_dim"}

FAMILY = Family(
    name="llama",
    configs={
        "llama": ConfigClass(
            "LlamaConfig",
            DECODER_DEFAULTS | {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
                                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": None,
                                "max_position_embeddings": 2048, "rope_scaling": None, "head_dim": None,
                                "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": None},
            (kv_heads_default_to_heads, head_dim_from_hidden_size, rope_type_from_type),
        ),
        "mistral": ConfigClass(
            "MistralConfig",
            DECODER_DEFAULTS | {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                                "head_dim": None, "max_position_embeddings": 4096 * 32, "sliding_window": 4096,
                                "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": None},
            (kv_heads_default_to_heads,),
        ),
        # transformers 5.25's MixtralConfig
        "mixtral": ConfigClass(
            "MixtralConfig",
            {"hidden_act": "silu", "tie_word_embeddings": False, "vocab_size": 32000, "hidden_size": 4096,
             "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 8, "head_dim": None, "max_position_embeddings": 4096 * 32, "rms_norm_eps": 1e-5,
             "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": None, "sliding_window": None,
             "num_experts_per_tok": 2, "num_local_experts": 8},
            (kv_heads_default_to_heads, rope_parameters_of_5x(1_000_000.0)),
            transformers=5,
        ),
        # transformers 5.25's Mistral3Config (its text config is Mistral's, its vision config Pixtral's)
        "mistral3": ConfigClass(
            "Mistral3Config",
            {"image_token_index": 10, "projector_hidden_act": "gelu", "vision_feature_layer": -1,
             "multimodal_projector_bias": False, "spatial_merge_size": 2, "tie_word_embeddings": True},
            text_config="mistral",
            vision_config="pixtral",
            transformers=5,
        ),
        "pixtral": ConfigClass(
            "PixtralVisionConfig",
            {"model_type": "pixtral", "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
             "num_attention_heads": 16, "num_channels": 3, "image_size": 1024, "patch_size": 16, "hidden_act": "gelu",
             "head_dim": 64},
            transformers=5,
        ),
        # transformers 5.25's (the class is new in 5.x)
        "smollm3": ConfigClass(
            "SmolLM3Config",
            {"vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
             "num_attention_heads": 16, "num_key_value_heads": 4, "hidden_act": "silu",
             "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "pad_token_id": 128004, "bos_token_id": 128000,
             "eos_token_id": 128001, "use_sliding_window": False, "sliding_window": None, "no_rope_layer_interval": 4,
             "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True},
            (kv_heads_default_to_heads, rope_parameters_of_5x(2000000.0)),
            transformers=5,
        ),
    },
    conversions={"LlamaForCausalLM": _LLAMA, "MistralForCausalLM": _LLAMA, "MixtralForCausalLM": _MIXTRAL,
                 "SmolLM3ForCausalLM": _SMOLLM3, "Mistral3ForConditionalGeneration": _MISTRAL3},
    projectors={"Mistral3ForConditionalGeneration": _PIXTRAL},
    exports={
        # llama.cpp writes Mistral's models as `llama`; a `general.name` naming Mistral picks Mistral's class
        "llama": Export("LlamaForCausalLM", "llama", _LLAMA, "llama", _EXPORT_CONFIG, derived=(_attention_bias,),
                        named=(("mistral", Export("MistralForCausalLM", "mistral", _LLAMA, "llama",
                                                  _EXPORT_CONFIG)),)),
    },
)  # fmt: skip
