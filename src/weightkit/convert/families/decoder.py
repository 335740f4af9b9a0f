"""The pieces the families share: the standard decoder's tensor names and shapes, its config defaults and
derivations, the rope un-permutation, the config.json keys an export writes, and the common vocabulary and
pooling writers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FormatError, UnsupportedError
from ..hf.config import CONFIG_NAME, HFConfig, read_json_object
from ..hf.experts import Tensors, derived_tensor
from ..hf.kv import KV
from ..hf.tokenizer import write_bpe_vocab
from .family import Dims, Rewrite, Transform

# --- tensor names -------------------------------------------------------------------------------------------

DECODER_NAMES = {
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
DECODER_ATTENTION_NAMES = {k: v for k, v in DECODER_NAMES.items() if ".mlp." not in k}
QK_NORM_NAMES = {
    "model.layers.{bid}.self_attn.q_norm": "blk.{bid}.attn_q_norm",
    "model.layers.{bid}.self_attn.k_norm": "blk.{bid}.attn_k_norm",
}
MOE_NAMES = {
    "model.layers.{bid}.mlp.gate": "blk.{bid}.ffn_gate_inp",
    "model.layers.{bid}.mlp.experts.gate_proj": "blk.{bid}.ffn_gate_exps",
    "model.layers.{bid}.mlp.experts.up_proj": "blk.{bid}.ffn_up_exps",
    "model.layers.{bid}.mlp.experts.down_proj": "blk.{bid}.ffn_down_exps",
}

#: a multi-token-prediction (NextN) layer's own tensors, kept as a block past the model's layers (GLM, Qwen 3.5)
NEXTN_NAMES = {
    "model.layers.{bid}.eh_proj": "blk.{bid}.nextn.eh_proj",
    "model.layers.{bid}.embed_tokens": "blk.{bid}.nextn.embed_tokens",
    "model.layers.{bid}.enorm": "blk.{bid}.nextn.enorm",
    "model.layers.{bid}.hnorm": "blk.{bid}.nextn.hnorm",
    "model.layers.{bid}.shared_head.head": "blk.{bid}.nextn.shared_head_head",
    "model.layers.{bid}.shared_head.norm": "blk.{bid}.nextn.shared_head_norm",
}

# --- tensor shapes, by config.json keys ---------------------------------------------------------------------

H, FF = "hidden_size", "intermediate_size"
DECODER_REQUIRED: dict[str, Dims] = {
    "token_embd.weight": (None, H),
    "output_norm.weight": (H,),
    "blk.{bid}.attn_norm.weight": (H,),
    "blk.{bid}.attn_q.weight": (None, H),
    "blk.{bid}.attn_k.weight": (None, H),
    "blk.{bid}.attn_v.weight": (None, H),
    "blk.{bid}.attn_output.weight": (H, None),
    "blk.{bid}.ffn_norm.weight": (H,),
    "blk.{bid}.ffn_gate.weight": (FF, H),
    "blk.{bid}.ffn_up.weight": (FF, H),
    "blk.{bid}.ffn_down.weight": (H, FF),
}
DENSE_FFN = ("blk.{bid}.ffn_gate.weight", "blk.{bid}.ffn_up.weight", "blk.{bid}.ffn_down.weight")


def moe_required(experts: str | tuple[str, ...], ff: str) -> dict[str, Dims]:
    """The router and the stacked experts, `experts` and `ff` naming config.json's expert count (the first present
    of several keys, where a tuple) and size."""
    return {
        "blk.{bid}.ffn_gate_inp.weight": (experts, H),
        "blk.{bid}.ffn_gate_exps.weight": (experts, ff, H),
        "blk.{bid}.ffn_up_exps.weight": (experts, ff, H),
        "blk.{bid}.ffn_down_exps.weight": (experts, H, ff),
    }


# --- config classes -----------------------------------------------------------------------------------------

#: What transformers' decoder config classes default alike.
DECODER_DEFAULTS = {"hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False}


def kv_heads_default_to_heads(h: dict[str, Any]) -> None:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]


def head_dim_from_hidden_size(h: dict[str, Any]) -> None:
    if h.get("head_dim") is None:
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]


def rope_type_from_type(h: dict[str, Any]) -> None:
    rope = h.get("rope_scaling")
    if isinstance(rope, dict) and "type" in rope:
        rope["rope_type"] = rope["type"]


def rope_parameters_of_5x(default_theta: float) -> Callable[[dict[str, Any]], None]:
    """transformers 5.x's `rope_parameters` (its `convert_rope_params_to_dict`) for a config.json without one: the
    old `rope_scaling`, with the old `rope_theta` (else the class's `default_theta`) and the type put in."""

    def derive(h: dict[str, Any]) -> None:
        if h.get("rope_parameters") is None:
            rope = h.pop("rope_scaling", None) or {}
            rope.setdefault("rope_theta", h.pop("rope_theta", default_theta))
            rope.setdefault("rope_type", rope.get("type", "default"))
            h["rope_parameters"] = rope

    return derive


def sliding_window_only_if_used(h: dict[str, Any]) -> None:
    if not h.get("use_sliding_window"):
        h["sliding_window"] = None


# --- values ---------------------------------------------------------------------------------------------------


def number(h: HFConfig, key: str, default: Any = None) -> Any:
    """A config value the converter writes as a number: present (or defaulted) and numeric."""
    value = h.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise FormatError(CONFIG_NAME, None, f"{key} is {value!r}, not a number")
    return value


def _rope_heads(h: HFConfig, kv: bool) -> int:
    heads = h.find(("n_heads", "num_attention_heads"))
    kv_heads = h.find(("n_kv_heads", "num_key_value_heads"))
    return kv_heads if kv and kv_heads is not None and kv_heads != heads else heads


def unpermute(suffixes: tuple[str, ...], heads_of: Callable[[HFConfig], int]) -> Transform:
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

    return Transform(suffixes, apply, check, invert, rows=True)


#: Llama's Q and K, un-permuted (K by its own head count when it has fewer)
ROPE_UNPERMUTE = (
    unpermute(("q_proj.weight", "q_proj.bias"), lambda h: _rope_heads(h, kv=False)),
    unpermute(("k_proj.weight", "k_proj.bias"), lambda h: _rope_heads(h, kv=True)),
)


def squeeze_conv(marker: str) -> Rewrite:
    """The rewrite giving a short convolution's kernel [channels, 1, width] (the tensors whose name contains
    `marker`) as [channels, width]: the converter squeezes it."""

    def squeeze(tensors: Tensors, h: HFConfig) -> Tensors:
        out: Tensors = []
        for name, t in tensors:
            if marker in name:
                shape = _squeezed(t.shape)
                t = derived_tensor(t, name, shape, lambda t=t, shape=shape: t.read().reshape(shape))
            out.append((name, t))
        return out

    return squeeze


def unsqueeze_conv(suffix: str) -> Transform:
    """`squeeze_conv` undone (an `Export.rewrites_undone` step): the kernel of the tensors whose name ends with
    `suffix`, [channels, width] in the GGUF, given back its middle axis, [channels, 1, width]."""

    def squeezed(w: np.ndarray, h: HFConfig) -> np.ndarray:
        return w.reshape(_squeezed(w.shape))

    return Transform((suffix,), squeezed, _any_shape, invert=lambda w, h: w[:, None, :],
                     inverted_shape=lambda shape: (shape[0], 1, *shape[1:]))  # fmt: skip


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for n in shape if n != 1)


def _any_shape(shape: tuple[int, ...], h: HFConfig) -> str | None:
    return None


# --- state-space (Mamba2) and gated-delta-net pieces --------------------------------------------------------------


def dt_bias_as_bias(name: str) -> str:
    """`Mamba2Model.filter_tensors` (and Qwen3-Next's): the time-step bias is the bias of the time-step projection."""
    return name.removesuffix(".dt_bias") + ".dt_proj.bias" if name.endswith(".dt_bias") else name


def _minus_exp(w: np.ndarray, h: HFConfig) -> np.ndarray:
    """`A = -exp(A_log)`, in float32 (then the tensor's own float type, as torch computes a float16 exp), rounded
    from float64. torch's float32 exp (MKL's on x86) is within an ulp of that: where the exact value lies within
    about a twentieth of an ulp of a rounding midpoint it can round the other way, and the reference's file
    then differs in that value's last bit (about one value in a hundred)."""
    return (-np.exp(w.astype(np.float64))).astype(np.float32).astype(w.dtype)


def _log_minus(a: np.ndarray, h: HFConfig) -> np.ndarray:
    """`A_log = log(-A)` (`--to hf`), rounded to float32 from float64. transformers' GGUF loader takes torch's
    float32 log (MKL's on x86), which rounds the other way in a few values in a hundred: those differ in the
    last bit."""
    return np.log(-a.astype(np.float64)).astype(np.float32)


#: the state-space decay written as the converters write it: `A = -exp(A_log)`
A_FROM_A_LOG = Transform((".A_log",), _minus_exp, _any_shape, _log_minus)

# --- vocabularies and pooling -----------------------------------------------------------------------------------


def gpt2_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`TextModel._set_vocab_gpt2`: a byte-level BPE tokenizer (tokenizer.json), whatever else is there."""
    write_bpe_vocab(kv, folder, h)


_POOLING = {"mean": 1, "cls": 2, "lasttoken": 3}


def pooling_type(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
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


# --- config.json keys of an export ------------------------------------------------------------------------------

DECODER_CONFIG = {
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
