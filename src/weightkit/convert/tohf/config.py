"""config.json and generation_config.json of an HF folder, from a GGUF's metadata and tensor shapes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..families.family import Export, TensorShapes

_DTYPE_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
_TOKEN_IDS = {"bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id", "pad_token_id": "padding_token_id"}


def _shortest(value: Any) -> Any:
    """A float32 key as the shortest decimal that reads back as the same float32 (1e-05, not 9.99...e-06)."""
    return float(str(np.float32(value))) if isinstance(value, float) else value


def _rope_scaling(meta: Mapping[str, Any], arch: str) -> dict[str, Any] | None:
    """`{arch}.rope.scaling.*` back to transformers' rope_scaling (linear and YaRN; the converter writes no
    other kind: Llama 3's factors are a tensor, which HF recomputes from parameters the GGUF does not keep)."""
    kind = meta.get(f"{arch}.rope.scaling.type")
    factor = meta.get(f"{arch}.rope.scaling.factor")
    if kind not in ("linear", "yarn") or factor is None:
        return None
    rope: dict[str, Any] = {"rope_type": kind, "factor": _shortest(factor)}
    if (original := meta.get(f"{arch}.rope.scaling.original_context_length")) is not None:
        rope["original_max_position_embeddings"] = original
    for key, name in (("yarn_beta_fast", "beta_fast"), ("yarn_beta_slow", "beta_slow"),
                      ("yarn_attn_factor", "attention_factor")):  # fmt: skip
        if (value := meta.get(f"{arch}.rope.scaling.{key}")) is not None:
            rope[name] = _shortest(value)
    return rope


def hf_config(meta: Mapping[str, Any], export: Export, arch: str, shapes: TensorShapes, dtype: str) -> dict[str, Any]:
    """config.json: the class, the GGUF keys under transformers' names, tied embeddings (no `output.weight`),
    head_dim (given, or hidden_size / heads), the special token ids and the dtype written."""
    config: dict[str, Any] = {"architectures": [export.hf_class], "model_type": export.model_type}
    for key, name in export.config.items():
        if (value := meta.get(f"{arch}.{key}")) is not None:
            config[name] = _shortest(value)
    if "vocab_size" not in config and (tokens := meta.get("tokenizer.ggml.tokens")) is not None:
        config["vocab_size"] = len(tokens)
    if "vocab_size" not in config and "token_embd.weight" in shapes:
        config["vocab_size"] = shapes["token_embd.weight"][0]
    if "head_dim" not in config and "hidden_size" in config and config.get("num_attention_heads"):
        config["head_dim"] = config["hidden_size"] // config["num_attention_heads"]
    if (rope := _rope_scaling(meta, arch)) is not None:
        config["rope_scaling"] = rope
    for derive in export.derived:
        config |= derive(shapes, config)
    config["tie_word_embeddings"] = "output.weight" not in shapes
    config |= generation_ids(meta)
    config["torch_dtype"] = _DTYPE_NAMES[dtype]
    return config


def generation_ids(meta: Mapping[str, Any]) -> dict[str, int]:
    """The BOS, EOS and padding token ids the GGUF names (generation_config.json holds these)."""
    return {
        name: int(meta[f"tokenizer.ggml.{key}"])
        for name, key in _TOKEN_IDS.items()
        if meta.get(f"tokenizer.ggml.{key}") is not None
    }


__all__ = ["generation_ids", "hf_config"]
