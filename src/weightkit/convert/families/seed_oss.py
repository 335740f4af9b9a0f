"""Seed-OSS: `SeedOssModel` of llama.cpp's converter, a plain `TextModel` (no rope un-permutation, byte-level
BPE) whose post-attention norm is named as the feed-forward's norm in gguf-py's `seed_oss` tensors."""

from __future__ import annotations

from ..hf.config import ConfigClass
from .decoder import DECODER_NAMES, DECODER_REQUIRED, H, gpt2_vocab, kv_heads_default_to_heads, rope_parameters_of_5x
from .family import Conversion, Family

_SEED_OSS = Conversion(
    gguf="seed_oss",
    tensor_names=DECODER_NAMES | {"model.layers.{bid}.post_attention_layernorm": "blk.{bid}.post_attention_norm"},
    required={k.replace("ffn_norm", "post_attention_norm"): v for k, v in DECODER_REQUIRED.items()}
    | {"blk.{bid}.post_attention_norm.weight": (H,)},
    vocab=gpt2_vocab,
)

FAMILY = Family(
    name="seed_oss",
    configs={
        # transformers 5.25's (the class is new in 5.x)
        "seed_oss": ConfigClass(
            "SeedOssConfig",
            {"vocab_size": 155136, "hidden_size": 4096, "intermediate_size": 27648, "num_hidden_layers": 64,
             "num_attention_heads": 80, "num_key_value_heads": 8, "hidden_act": "silu",
             "max_position_embeddings": 524288, "rms_norm_eps": 1e-6, "pad_token_id": 1, "bos_token_id": 0,
             "eos_token_id": 2, "pretraining_tp": 1, "tie_word_embeddings": False, "attention_bias": True,
             "attention_out_bias": False, "mlp_bias": False, "head_dim": 128},
            (kv_heads_default_to_heads, rope_parameters_of_5x(10000.0)),
            transformers=5,
        ),
    },
    conversions={"SeedOssForCausalLM": _SEED_OSS},
)  # fmt: skip
