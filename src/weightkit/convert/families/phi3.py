"""Phi-3 (and Phi-4, its GPT-2 BPE variant): `Phi3MiniModel` of llama.cpp's converter, and transformers'
Phi-3 class for `--to hf`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FormatError, UnsupportedError
from ..hf.config import CONFIG_NAME, ConfigClass, HFConfig, read_json_object
from ..hf.kv import KV
from ..hf.parameters import LAYERS
from ..hf.tokenizer import write_bpe_vocab, write_phi3_vocab
from ..hf.tokenizer.fast import TOKENIZER_CONFIG
from .decoder import DECODER_CONFIG, DECODER_NAMES, FF, H, kv_heads_default_to_heads, number
from .family import Conversion, Dims, Export, Family

_NAMES = {
    **{k: v for k, v in DECODER_NAMES.items() if ".self_attn." not in k and ".mlp." not in k},
    "model.layers.{bid}.self_attn.qkv_proj": "blk.{bid}.attn_qkv",
    "model.layers.{bid}.self_attn.o_proj": "blk.{bid}.attn_output",
    "model.layers.{bid}.mlp.gate_up_proj": "blk.{bid}.ffn_up",
    "model.layers.{bid}.mlp.down_proj": "blk.{bid}.ffn_down",
}
_REQUIRED: dict[str, Dims] = {
    "token_embd.weight": (None, H),
    "output_norm.weight": (H,),
    "blk.{bid}.attn_norm.weight": (H,),
    "blk.{bid}.attn_qkv.weight": (None, H),
    "blk.{bid}.attn_output.weight": (H, None),
    "blk.{bid}.ffn_norm.weight": (H,),
    "blk.{bid}.ffn_up.weight": (None, H),  # gate and up, one above the other
    "blk.{bid}.ffn_down.weight": (H, FF),
}


def _rope_scaling(h: dict[str, Any]) -> None:
    """`Phi3Config`: "su" and "yarn" are old names of "longrope"; then its validation, which AutoConfig raises."""
    rope = h.get("rope_scaling")
    if rope is None:
        return
    if isinstance(rope, dict) and rope.get("type") in ("su", "yarn"):
        rope["type"] = "longrope"
    if not isinstance(rope, dict) or len(rope) != 3 or rope.get("type") != "longrope":
        raise FormatError(CONFIG_NAME, None, f"rope_scaling {rope!r}: Phi-3 takes exactly type 'longrope', "
                                             "short_factor and long_factor")  # fmt: skip
    dims = int(h["hidden_size"] // h["num_attention_heads"] * h["partial_rotary_factor"])
    for key in ("short_factor", "long_factor"):
        factors = rope.get(key)
        if not isinstance(factors, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in factors
        ):
            raise FormatError(CONFIG_NAME, None, f"rope_scaling.{key} is not a list of numbers")
        if len(factors) != dims // 2:
            raise FormatError(CONFIG_NAME, None, f"rope_scaling.{key} has {len(factors)} numbers, not {dims // 2}")


def _rope_dims(h: HFConfig, rope: dict[str, Any]) -> int:
    heads = h.find(("num_attention_heads", "n_head"))
    return int(rope.get("partial_rotary_factor", 1.0) * h.find(("hidden_size", "n_embd"))) // heads


def _text_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """`Phi3MiniModel.set_gguf_parameters` (none of the common keys)."""
    kv.u32(f"{arch}.context_length", h.find(("n_positions", "max_position_embeddings")))
    kv.u32(f"{arch}.rope.scaling.original_context_length", number(rope, "original_max_position_embeddings"))
    kv.u32(f"{arch}.embedding_length", h.find(("hidden_size", "n_embd")))
    kv.u32(f"{arch}.feed_forward_length", number(h, "intermediate_size"))
    kv.u32(f"{arch}.block_count", h.find(LAYERS))
    kv.u32(f"{arch}.attention.head_count", h.find(("num_attention_heads", "n_head")))
    kv.u32(f"{arch}.attention.head_count_kv", h.find(("num_key_value_heads", "n_head_kv")))
    kv.f32(f"{arch}.attention.layer_norm_rms_epsilon", number(h, "rms_norm_eps"))
    kv.u32(f"{arch}.rope.dimension_count", _rope_dims(h, rope))
    kv.f32(f"{arch}.rope.freq_base", number(rope.get("full_attention", rope), "rope_theta"))
    kv.u32("general.file_type", file_type)
    kv.u32(f"{arch}.attention.sliding_window", h.get("sliding_window") or 0)


def _long_rope(h: HFConfig, rope: dict[str, Any]) -> tuple[float, list[float], list[float]] | None:
    """Phi-3's long-context rope (`generate_extra_tensors`): the attention factor and the two factor lists."""
    long, short = rope.get("long_factor"), rope.get("short_factor")
    if not long:
        return None
    original = number(rope, "original_max_position_embeddings")
    scale = h.find(("n_positions", "max_position_embeddings")) / original
    kind = str(rope.get("rope_type", "")).lower()
    if kind in ("su", "longrope"):
        factor = math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1.0 else 1.0
    elif kind == "yarn":
        factor = 0.1 * math.log(scale) + 1.0 if scale > 1.0 else 1.0
    else:
        raise UnsupportedError(f"{CONFIG_NAME}: Phi-3 rope scaling {kind or '(no type)'!r} is not supported")
    half = _rope_dims(h, rope) / 2
    if not isinstance(short, list) or not isinstance(long, list) or len(long) != len(short) or len(long) != half:
        raise FormatError(CONFIG_NAME, None, f"rope_scaling's long_factor and short_factor must have {half:g} "
                                             "numbers each")  # fmt: skip
    return factor, long, short


def _attn_factor(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any]) -> None:
    if (long_rope := _long_rope(h, rope)) is not None:
        kv.f32(f"{arch}.rope.scaling.attn_factor", long_rope[0])


def _rope_factors(h: HFConfig, rope: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    if (long_rope := _long_rope(h, rope)) is None:
        return []
    return [("rope_factors_long.weight", np.array(long_rope[1], dtype=np.float32)),
            ("rope_factors_short.weight", np.array(long_rope[2], dtype=np.float32))]  # fmt: skip


def _vocab(kv: KV, folder: Path, h: HFConfig) -> None:
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


_PHI3 = Conversion(
    gguf="phi3",
    tensor_names=_NAMES,
    required=_REQUIRED,
    vocab=_vocab,
    extra_tensors=(_rope_factors,),
    text_parameters=_text_parameters,
    leading_parameters=(_attn_factor,),
)

FAMILY = Family(
    name="phi3",
    configs={
        "phi3": ConfigClass(
            "Phi3Config",
            {"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu",
             "max_position_embeddings": 4096, "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
             "rope_theta": 10000.0, "rope_scaling": None, "partial_rotary_factor": 1.0, "sliding_window": None,
             "bos_token_id": 1, "eos_token_id": 32000, "pad_token_id": 32000, "tie_word_embeddings": False},
            (kv_heads_default_to_heads, _rope_scaling),
        ),
    },
    conversions={"Phi3ForCausalLM": _PHI3},
    exports={
        # Llama's SentencePiece tokenizer (transformers' GGUF Phi-3 one lacks its normalizer); Phi-4's GPT-2 BPE
        # under GPT2Tokenizer, the class Phi-3's converter takes GPT-2 BPE from
        "phi3": Export("Phi3ForCausalLM", "phi3", _PHI3, "llama",
                       DECODER_CONFIG | {"attention.sliding_window": "sliding_window"},
                       byte_level_class="GPT2Tokenizer"),
    },
)  # fmt: skip
