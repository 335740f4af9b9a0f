"""A checkpoint's config.json as llama.cpp's converter sees it.

The converter reads its hyperparameters through transformers' `AutoConfig` (pinned at 4.57.6), not from the
raw file: keys the file leaves out get the config class's defaults, and some values are derived (Llama's
`head_dim`, the key-value head count, the labels' integer keys). Those defaults change what is written
(`llama.attention.key_length` appears for a Llama-2 config that has no `head_dim`; `rope.freq_base` is written
when the file has no `rope_theta`), so they are reproduced here, one table entry per `model_type`.

A config saved by transformers 5.x (its `transformers_version`) is read as 5.x reads it instead: 5.x's
`save_pretrained` writes every value of its config class (`rope_parameters`, `dtype`, Qwen3-MoE's
`num_local_experts`, `layer_types`, ...) and its `AutoConfig` gives them back unchanged, so no class defaults
or derivations are applied, only the bookkeeping every 5.x config carries.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import FormatError, UnsupportedError

CONFIG_NAME = "config.json"
_MISSING = object()


class HFConfig(dict):
    """A checkpoint's config.json as the converter reads it (its hparams: merged with `text_config`, with
    transformers' defaults): a dict with the converter's "first of these keys present" lookup."""

    def find(self, keys: Iterable[str], default: Any = _MISSING) -> Any:
        """The value of the first key present (even if None); `default` if none is, else a KeyError."""
        for key in keys:
            if key in self:
                return self[key]
        if default is _MISSING:
            raise KeyError(f"none of {tuple(keys)} in config.json")
        return default


def _kv_heads_default_to_heads(h: dict[str, Any]) -> None:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]


def _head_dim_from_hidden_size(h: dict[str, Any]) -> None:
    if h.get("head_dim") is None:
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]


def _rope_type_from_type(h: dict[str, Any]) -> None:
    rope = h.get("rope_scaling")
    if isinstance(rope, dict) and "type" in rope:
        rope["rope_type"] = rope["type"]


def _sliding_window_only_if_used(h: dict[str, Any]) -> None:
    if not h.get("use_sliding_window"):
        h["sliding_window"] = None


def _phi3_rope_scaling(h: dict[str, Any]) -> None:
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


@dataclass(frozen=True)
class ConfigClass:
    """One transformers config class: its constructor's defaults (those the converter can read) and the
    values it derives, applied in order after the file's values; a composite config names the `model_type`
    whose class makes its `text_config`."""

    name: str
    defaults: Mapping[str, Any]
    derive: tuple[Callable[[dict[str, Any]], None], ...] = field(default=())
    text_config: str | None = None


_DECODER = {"hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False}
_GEMMA = {"rms_norm_eps": 1e-6, "tie_word_embeddings": True, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
          "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8,
          "head_dim": 256, "num_key_value_heads": 4, "sliding_window": 4096}  # fmt: skip
#: What Qwen2MoeConfig and Qwen3MoeConfig default alike.
_QWEN_MOE = _DECODER | {"vocab_size": 151936, "hidden_size": 2048, "num_hidden_layers": 24,
                        "max_position_embeddings": 32768, "rope_scaling": None, "use_sliding_window": False,
                        "sliding_window": 4096, "decoder_sparse_step": 1, "norm_topk_prob": False,
                        "mlp_only_layers": []}  # fmt: skip

#: transformers 4.57.6's config classes by `model_type`.
CONFIG_CLASSES: dict[str, ConfigClass] = {
    "llama": ConfigClass(
        "LlamaConfig",
        _DECODER | {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": None, "max_position_embeddings": 2048,
                    "rope_scaling": None, "head_dim": None, "bos_token_id": 1, "eos_token_id": 2,
                    "pad_token_id": None},
        (_kv_heads_default_to_heads, _head_dim_from_hidden_size, _rope_type_from_type),
    ),
    "mistral": ConfigClass(
        "MistralConfig",
        _DECODER | {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None,
                    "max_position_embeddings": 4096 * 32, "sliding_window": 4096, "bos_token_id": 1,
                    "eos_token_id": 2, "pad_token_id": None},
        (_kv_heads_default_to_heads,),
    ),
    "qwen2": ConfigClass(
        "Qwen2Config",
        _DECODER | {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 32768,
                    "rope_scaling": None, "use_sliding_window": False, "sliding_window": 4096,
                    "max_window_layers": 28},
        (_sliding_window_only_if_used, _kv_heads_default_to_heads, _rope_type_from_type),
    ),
    "qwen3": ConfigClass(
        "Qwen3Config",
        _DECODER | {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128,
                    "max_position_embeddings": 32768, "rope_scaling": None, "use_sliding_window": False,
                    "sliding_window": 4096, "max_window_layers": 28},
        (_sliding_window_only_if_used, _kv_heads_default_to_heads, _rope_type_from_type),
    ),
    "gemma2": ConfigClass(
        "Gemma2Config",
        _GEMMA | {"vocab_size": 256000, "max_position_embeddings": 8192, "rope_theta": 10000.0,
                  "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0},
    ),
    "gemma3_text": ConfigClass(
        "Gemma3TextConfig",
        _GEMMA | {"vocab_size": 262208, "max_position_embeddings": 131072, "rope_theta": 1_000_000.0,
                  "rope_local_base_freq": 10000.0, "rope_scaling": None, "final_logit_softcapping": None,
                  "attn_logit_softcapping": None},
        (_rope_type_from_type,),
    ),
    "gemma3": ConfigClass(
        "Gemma3Config",
        {"mm_tokens_per_image": 256, "boi_token_index": 255999, "eoi_token_index": 256000,
         "image_token_index": 262144, "tie_word_embeddings": True},
        text_config="gemma3_text",
    ),
    "phi3": ConfigClass(
        "Phi3Config",
        {"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu",
         "max_position_embeddings": 4096, "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
         "rope_theta": 10000.0, "rope_scaling": None, "partial_rotary_factor": 1.0, "sliding_window": None,
         "bos_token_id": 1, "eos_token_id": 32000, "pad_token_id": 32000, "tie_word_embeddings": False},
        (_kv_heads_default_to_heads, _phi3_rope_scaling),
    ),
    "qwen2_moe": ConfigClass(
        "Qwen2MoeConfig",
        _QWEN_MOE | {"intermediate_size": 5632, "num_attention_heads": 16, "num_key_value_heads": 16,
                     "max_window_layers": 28, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
                     "num_experts_per_tok": 4, "num_experts": 60, "qkv_bias": True},
        (_sliding_window_only_if_used, _rope_type_from_type),
    ),
    "qwen3_moe": ConfigClass(
        "Qwen3MoeConfig",
        _QWEN_MOE | {"intermediate_size": 6144, "num_attention_heads": 32, "num_key_value_heads": 4,
                     "moe_intermediate_size": 768, "num_experts_per_tok": 8, "num_experts": 128},
        (_sliding_window_only_if_used, _rope_type_from_type),
    ),
    "gpt_oss": ConfigClass(
        "GptOssConfig",
        _DECODER | {"num_hidden_layers": 36, "num_local_experts": 128, "vocab_size": 201088, "hidden_size": 2880,
                    "intermediate_size": 2880, "head_dim": 64, "num_attention_heads": 64, "num_key_value_heads": 8,
                    "sliding_window": 128, "rope_theta": 150000.0, "max_position_embeddings": 131072,
                    "rms_norm_eps": 1e-5, "num_experts_per_tok": 4,
                    "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                     "truncate": False, "original_max_position_embeddings": 4096}},
        (_kv_heads_default_to_heads, _head_dim_from_hidden_size, _rope_type_from_type),
    ),
    "bert": ConfigClass(
        "BertConfig",
        {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
         "intermediate_size": 3072, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2,
         "layer_norm_eps": 1e-12, "pad_token_id": 0, "tie_word_embeddings": True},
    ),
}  # fmt: skip

#: Sizes the converter computes with: when given, each must be a positive integer.
_SIZES = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
          "head_dim", "vocab_size", "max_position_embeddings", "type_vocab_size", "moe_intermediate_size",
          "num_experts", "num_local_experts", "num_experts_per_tok")  # fmt: skip

#: What every config gets from `PretrainedConfig` (only what the converter can read).
_BASE_DEFAULTS = {"max_length": 20}
#: What a sub-config (`text_config`) saved by transformers 5.x gets from its `PretrainedConfig` when read (only
#: what the converter can read: merged into the top level, these replace the checkpoint's own).
_TF5_SUB_CONFIG = {"_name_or_path": "", "architectures": None, "dtype": None}


def saved_by_transformers_5(raw: Mapping[str, Any]) -> bool:
    """Whether config.json was written by transformers 5.x or later (its `transformers_version`)."""
    version = raw.get("transformers_version")
    major = version.split(".", 1)[0] if isinstance(version, str) else ""
    return major.isdigit() and int(major) >= 5


def read_json(path: Path, what: str) -> Any:
    """A JSON file, or a FormatError naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FormatError(path, None, f"no {what} here") from None
    except UnicodeDecodeError as e:
        raise FormatError(path, e.start, "not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(path, e.pos, f"not valid JSON ({e.msg})") from None
    except RecursionError:
        raise FormatError(path, None, "JSON nested too deeply") from None


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """A JSON file that must hold an object."""
    data = read_json(path, what)
    if not isinstance(data, dict):
        raise FormatError(path, 0, f"{what} is not a JSON object")
    return data


def read_raw_config(folder: Path) -> dict[str, Any]:
    """config.json as written (the converter's metadata and special tokens read it this way)."""
    return read_json_object(folder / CONFIG_NAME, "config.json (not a Hugging Face checkpoint folder?)")


def load_hparams(folder: Path) -> HFConfig:
    """config.json as `AutoConfig.from_pretrained(folder).to_dict()` gives it, with `text_config` merged
    into the top level as the converter's text models do."""
    raw = read_raw_config(folder)
    hparams = _with_class_defaults(raw, folder)
    text = hparams.get("text_config")
    if isinstance(text, dict):
        hparams = {**hparams, **text}
    return HFConfig(hparams)


def _with_class_defaults(raw: dict[str, Any], folder: Path) -> dict[str, Any]:
    model_type = raw.get("model_type")
    if model_type is None:
        raise UnsupportedError(
            f"{folder / CONFIG_NAME}: no 'model_type'; transformers would guess the config class from the folder's "
            "path, which weightkit does not"
        )
    cls = _config_class(model_type, folder)
    if saved_by_transformers_5(raw):
        h = json.loads(json.dumps(raw))
        if isinstance(h.get("text_config"), dict):
            h["text_config"] = {**h["text_config"], **_TF5_SUB_CONFIG}
        _check_sizes(h, folder)
        h["id2label"] = _labels(raw, folder)
        h["_name_or_path"] = str(folder)
        return h
    h = _apply_class(cls, json.loads(json.dumps(raw)), folder)  # a deep copy: derivations must not touch raw
    if cls.text_config is not None:  # the sub-config is made by its own class (and saved with its defaults)
        text = h.get("text_config") or {}
        if not isinstance(text, dict):
            raise FormatError(folder / CONFIG_NAME, None, "text_config is not an object")
        h["text_config"] = _apply_class(_config_class(cls.text_config, folder), text, folder)
    h["id2label"] = _labels(raw, folder)
    h["_name_or_path"] = str(folder)
    return h


def _config_class(model_type: Any, folder: Path) -> ConfigClass:
    cls = CONFIG_CLASSES.get(model_type)
    if cls is None:
        known = ", ".join(sorted(CONFIG_CLASSES))
        raise UnsupportedError(f"{folder / CONFIG_NAME}: model_type {model_type!r} is not supported (known: {known})")
    return cls


def positive_integer(h: HFConfig, key: str, folder: Path) -> int:
    """config.json's `key` as a size: a positive integer, else a FormatError naming the key."""
    value = h.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise FormatError(folder / CONFIG_NAME, None, f"{key} is {value!r}, not a positive integer")
    return value


def _apply_class(cls: ConfigClass, h: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The class's defaults under the given values, the sizes checked, then its derivations."""
    for key, value in (_BASE_DEFAULTS | dict(cls.defaults)).items():
        h.setdefault(key, copy.deepcopy(value))  # a default dict (GPT-OSS's rope_scaling) is changed later
    _check_sizes(h, folder)
    try:
        for step in cls.derive:
            step(h)
    except FormatError as e:
        raise FormatError(folder / CONFIG_NAME, None, e.reason) from None
    return h


def _check_sizes(h: dict[str, Any], folder: Path) -> None:
    for key in _SIZES:
        if h.get(key) is not None:
            positive_integer(h, key, folder)


def _labels(raw: dict[str, Any], folder: Path) -> dict[int, Any]:
    """`PretrainedConfig`'s labels: the file's (keys made ints), or LABEL_i for `num_labels` (default 2)."""
    given = raw.get("id2label")
    if isinstance(given, dict):
        try:
            return {int(k): v for k, v in given.items()}
        except ValueError:
            raise FormatError(folder / CONFIG_NAME, None, "id2label has a key that is not an integer") from None
    n = raw.get("num_labels", 2)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise FormatError(folder / CONFIG_NAME, None, f"num_labels {n!r} is not a count")
    return {i: f"LABEL_{i}" for i in range(n)}
