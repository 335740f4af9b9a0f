"""OLMo 2 and OLMo 3: `Olmo2Model` of llama.cpp's converter (a `TextModel`: no rope un-permutation, byte-level
BPE). They norm after attention and feed-forward, not before, and norm Q and K over all heads; OLMo 3's
sliding-window layers are written as a per-layer pattern."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..hf.config import ConfigClass, HFConfig
from ..hf.kv import KV
from .decoder import (
    DECODER_NAMES,
    DECODER_REQUIRED,
    H,
    gpt2_vocab,
    kv_heads_default_to_heads,
    number,
    rope_parameters_of_5x,
)
from .family import Conversion, Family

_OLMO2_NAMES = {k: v for k, v in DECODER_NAMES.items() if "layernorm" not in k} | {
    "model.layers.{bid}.self_attn.q_norm": "blk.{bid}.attn_q_norm",
    "model.layers.{bid}.self_attn.k_norm": "blk.{bid}.attn_k_norm",
    "model.layers.{bid}.post_attention_layernorm": "blk.{bid}.post_attention_norm",
    "model.layers.{bid}.post_feedforward_layernorm": "blk.{bid}.post_ffw_norm",
}
_OLMO2_REQUIRED = {k: v for k, v in DECODER_REQUIRED.items() if "_norm." not in k or k.startswith("output")} | {
    "blk.{bid}.attn_q_norm.weight": (None,),  # all heads' width
    "blk.{bid}.attn_k_norm.weight": (None,),
    "blk.{bid}.post_attention_norm.weight": (H,),
    "blk.{bid}.post_ffw_norm.weight": (H,),
}


def _sliding_window_pattern(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Olmo2Model.set_gguf_parameters`: with a sliding window (OLMo 3), the window and which layers use it
    (`layer_types`, else all but every 4th)."""
    if "sliding_window" not in h:
        return
    kv.u32(f"{arch}.attention.sliding_window", number(h, "sliding_window"))
    types = h.get("layer_types")
    if types is not None:
        pattern = [t == "sliding_attention" for t in types]
    else:
        pattern = [(i + 1) % 4 != 0 for i in range(number(h, "num_hidden_layers"))]
    kv.array(f"{arch}.attention.sliding_window_pattern", pattern, "config.json")


def _olmo3_layers_and_rope(h: dict[str, Any]) -> None:
    """`Olmo3Config`: sliding-window layers but every 4th by default; rope per layer type, the old `rope_theta`
    (else 500000) for the full layers and 500000 for the sliding ones unless given (as 5.x's class does)."""
    if h.get("layer_types") is None:
        h["layer_types"] = ["sliding_attention" if (i + 1) % 4 else "full_attention"
                            for i in range(h["num_hidden_layers"])]  # fmt: skip
    rope = h.get("rope_parameters") or {"sliding_attention": {"rope_type": "default"},
                                        "full_attention": {"rope_type": "default"}}  # fmt: skip
    if (scaling := h.pop("rope_scaling", None)) is not None:
        rope.setdefault("full_attention", {"rope_type": "default"}).update(scaling)
    theta = h.pop("rope_theta", None)
    for kind in ("full_attention", "sliding_attention"):
        rope.setdefault(kind, {"rope_type": "default"}).setdefault("rope_theta", theta or 500000.0)
        theta = None  # popped once, by the full layers
    h["rope_parameters"] = rope


_OLMO2 = Conversion(
    gguf="olmo2",
    tensor_names=_OLMO2_NAMES,
    required=_OLMO2_REQUIRED,
    vocab=gpt2_vocab,
    parameters=(_sliding_window_pattern,),
)
#: What transformers 5.25's Olmo2Config and Olmo3Config default alike (both classes are new in 5.x's form).
_OLMO_DEFAULTS = {"vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                  "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu",
                  "max_position_embeddings": 2048, "pad_token_id": 1, "bos_token_id": None, "eos_token_id": 50279,
                  "tie_word_embeddings": False, "attention_bias": False, "rms_norm_eps": 1e-5}  # fmt: skip

FAMILY = Family(
    name="olmo",
    configs={
        "olmo2": ConfigClass("Olmo2Config", _OLMO_DEFAULTS,
                             (kv_heads_default_to_heads, rope_parameters_of_5x(10000.0)), transformers=5),
        "olmo3": ConfigClass("Olmo3Config", _OLMO_DEFAULTS | {"sliding_window": 4096},
                             (kv_heads_default_to_heads, _olmo3_layers_and_rope), transformers=5),
    },
    conversions={"Olmo2ForCausalLM": _OLMO2, "Olmo3ForCausalLM": _OLMO2},
)  # fmt: skip
