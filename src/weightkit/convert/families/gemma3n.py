"""Gemma 3n (text, and the language model of the multimodal models: alternating updates over four streams, a
low-rank residual, per-layer inputs, a shared KV cache, activation sparsity): `Gemma3NModel` of llama.cpp's
converter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import FormatError, UnsupportedError
from ..hf.config import CONFIG_NAME, ConfigClass, HFConfig
from ..hf.experts import Tensors, joined_tensor, stacked_tensor
from ..hf.kv import KV
from ..hf.torch_math import normal_icdf
from .decoder import QK_NORM_NAMES, H, number
from .family import Conversion, Dims, Family
from .gemma import GEMMA_NAMES, GEMMA_SHARED_KV_REQUIRED, gemma3_parameters, gemma3_vocab
from .gemma4 import PER_LAYER_INPUT_NAMES

#: the alternating updates' projections into and out of the extra streams, one per stream, stacked by the converter
_STREAM_PROJECTIONS = {"altup_projections": "altup_proj", "altup_unembed_projections": "altup_unembd_proj"}
_STREAMS = 4  # `altup_num_inputs`: the only count the converter takes

_NAMES = GEMMA_NAMES | QK_NORM_NAMES | PER_LAYER_INPUT_NAMES | {
    **{f"model.{hf}": gguf for hf, gguf in _STREAM_PROJECTIONS.items()},
    "model.layers.{bid}.altup.correct_output_scale": "blk.{bid}.altup_correct_scale",
    "model.layers.{bid}.altup.correction_coefs": "blk.{bid}.altup_correct_coef",
    "model.layers.{bid}.altup.prediction_coefs": "blk.{bid}.altup_predict_coef",
    "model.layers.{bid}.altup.modality_router": "blk.{bid}.altup_router",
    "model.layers.{bid}.altup.router_norm": "blk.{bid}.altup_router_norm",
    "model.layers.{bid}.laurel.linear_left": "blk.{bid}.laurel_l",
    "model.layers.{bid}.laurel.linear_right": "blk.{bid}.laurel_r",
    "model.layers.{bid}.laurel.post_laurel_norm": "blk.{bid}.laurel_post_norm",
}  # fmt: skip
_PLE = "hidden_size_per_layer_input"
_REQUIRED: dict[str, Dims] = GEMMA_SHARED_KV_REQUIRED | {
    "per_layer_token_embd.weight": ("vocab_size", None),  # padded to the text vocabulary by the converter
    "per_layer_model_proj.weight": (None, H),
    "per_layer_proj_norm.weight": (_PLE,),
    "altup_proj.weight": (None, H, H),
    "altup_unembd_proj.weight": (None, H, H),
    "blk.{bid}.altup_router.weight": ("altup_num_inputs", H),
    "blk.{bid}.laurel_l.weight": ("laurel_rank", H),
    "blk.{bid}.laurel_r.weight": (H, "laurel_rank"),
    "blk.{bid}.inp_gate.weight": (_PLE, H),
    "blk.{bid}.proj.weight": (H, _PLE),
}


def _scale_weight(name: str) -> str | None:
    """`Gemma3NModel.filter_tensors`: a `_scale` parameter gets a `.weight` suffix."""
    return name + ".weight" if name.endswith("_scale") else name


def _padded_embeddings(tensors: Tensors, h: HFConfig) -> Tensors:
    """`Gemma3NModel.modify_tensors`: the token and per-layer embeddings with zero rows up to the vocabulary
    (`vocab_size`: the image and audio tokens past the per-layer inputs' `vocab_size_per_layer_input`)."""
    vocab = number(h, "vocab_size", 262_400)
    out: Tensors = []
    for name, t in tensors:
        embedding = "embed_tokens.weight" in name or "embed_tokens_per_layer" in name
        if embedding and t.shape and t.shape[0] < vocab:
            t = joined_tensor(t, name, (vocab, *t.shape[1:]), [(t, 0, t.shape[0]), (None, 0, vocab - t.shape[0])])
        out.append((name, t))
    return out


def _stacked_stream_projections(tensors: Tensors, h: HFConfig) -> Tensors:
    """`Gemma3NModel.modify_tensors`: the three projections into the extra streams (`altup_projections.{0,1,2}`)
    stacked into one tensor where the last of them is, and so the three out of them."""
    out: Tensors = []
    parts: dict[str, dict[int, Any]] = {kind: {} for kind in _STREAM_PROJECTIONS}
    for name, t in tensors:
        kind = next((k for k in _STREAM_PROJECTIONS if f".{k}." in name), None)
        if kind is None:
            out.append((name, t))
            continue
        index = name.split(f".{kind}.", 1)[1].split(".", 1)[0]
        if index not in ("0", "1", "2"):
            raise FormatError(t.file, None, f"tensor {name!r}: {kind} has three projections, numbered 0 to 2")
        parts[kind][int(index)] = t
        if len(parts[kind]) < _STREAMS - 1:
            continue
        stack = [parts[kind][i] for i in range(_STREAMS - 1)]
        if len({p.shape for p in stack}) != 1:
            raise FormatError(t.file, None, f"{kind}: the three projections differ in shape "
                                            f"({', '.join(str(list(p.shape)) for p in stack)})")  # fmt: skip
        stacked = f"model.{kind}.weight"
        out.append((stacked, stacked_tensor(stack, stacked)))
    return out


def _check_streams(folder: Path, h: HFConfig) -> None:
    if h.get("altup_num_inputs") != _STREAMS:
        raise UnsupportedError(f"{folder / CONFIG_NAME}: altup_num_inputs is {h.get('altup_num_inputs')!r}; the "
                               f"converter takes only {_STREAMS} streams")  # fmt: skip


def _vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`Gemma3NModel.set_vocab`: Gemma 3's, as long as the whole vocabulary (`vocab_size`, with the image and
    audio tokens) rather than the per-layer inputs' `vocab_size_per_layer_input`."""
    gemma3_vocab(kv, folder, HFConfig({k: v for k, v in h.items() if k != "vocab_size_per_layer_input"}))


def _parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Gemma3NModel.set_gguf_parameters` after Gemma 3's: the streams, the per-layer inputs' width, the shared
    KV layers, each layer's activation sparsity as the standard normal's quantile of its target, and which layers
    attend in a sliding window."""
    kv.u32(f"{arch}.altup.active_idx", number(h, "altup_active_idx"))
    kv.u32(f"{arch}.altup.num_inputs", number(h, "altup_num_inputs"))
    kv.u32(f"{arch}.embedding_length_per_layer_input", number(h, _PLE))
    kv.u32(f"{arch}.attention.shared_kv_layers", number(h, "num_kv_shared_layers"))
    pattern = h.get("activation_sparsity_pattern")
    if not isinstance(pattern, list) or not all(isinstance(p, (int, float)) for p in pattern):
        raise FormatError(folder / CONFIG_NAME, None, f"activation_sparsity_pattern is {pattern!r}, not a list of "
                                                      "fractions")  # fmt: skip
    kv.array(f"{arch}.activation_sparsity_scale", [normal_icdf(p) for p in pattern], CONFIG_NAME)
    kv.array(f"{arch}.attention.sliding_window_pattern", [t == "sliding_attention" for t in h["layer_types"]],
             CONFIG_NAME)  # fmt: skip


_GEMMA3N = Conversion(
    gguf="gemma3n",
    tensor_names=_NAMES,
    required=_REQUIRED,
    vocab=_vocab,
    filters=(_scale_weight,),
    rewrites=(_padded_embeddings, _stacked_stream_projections),
    checks=(_check_streams,),
    parameters=(gemma3_parameters, _parameters),
)

# --- transformers 5.25's Gemma3nTextConfig -------------------------------------------------------------------------


def _per_layer_lists(h: dict[str, Any]) -> None:
    """One feed-forward width per layer; every fifth layer full attention; sparse activations in the first ten
    layers (of more than ten), unless given."""
    n = h["num_hidden_layers"]
    if not isinstance(h.get("intermediate_size"), list):
        h["intermediate_size"] = [h["intermediate_size"]] * n
    if h.get("layer_types") is None:
        h["layer_types"] = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n)]
    if h.get("activation_sparsity_pattern") is None:
        sparse = 10 if n > 10 else 0
        h["activation_sparsity_pattern"] = [0.95] * sparse + [0.0] * (n - sparse)


def _rope(h: dict[str, Any]) -> None:
    if h.get("rope_parameters") is None:
        h["rope_parameters"] = {
            "sliding_attention": {"rope_type": "default", "rope_theta": h.get("rope_local_base_freq", 10_000.0)},
            "full_attention": {"rope_type": "default", "rope_theta": h.get("rope_theta", 1_000_000.0)},
        }


FAMILY = Family(
    name="gemma3n",
    configs={
        "gemma3n_text": ConfigClass(
            "Gemma3nTextConfig",
            {"vocab_size": 262_400, "hidden_size": 2048, "intermediate_size": 16_384, "num_hidden_layers": 35,
             "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256, "max_position_embeddings": 32_768,
             "rms_norm_eps": 1e-6, "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2,
             "tie_word_embeddings": True, "rope_parameters": None, "attention_bias": False, "sliding_window": 512,
             "layer_types": None, "final_logit_softcapping": 30.0, "vocab_size_per_layer_input": 262_144,
             "hidden_size_per_layer_input": 256, "altup_active_idx": 0, "altup_coef_clip": 120.0,
             "altup_correct_scale": True, "altup_num_inputs": 4, "num_kv_shared_layers": 15, "laurel_rank": 64,
             "activation_sparsity_pattern": None},
            (_per_layer_lists, _rope),
            transformers=5,
        ),
        "gemma3n": ConfigClass(
            "Gemma3nConfig",
            {"audio_soft_tokens_per_image": 188, "vision_soft_tokens_per_image": 256, "boi_token_id": 255_999,
             "eoi_token_id": 262_144, "image_token_id": 262_145, "boa_token_id": 256_000, "eoa_token_id": 262_272,
             "audio_token_id": 262_273, "tie_word_embeddings": True},
            text_config="gemma3n_text",
            transformers=5,
        ),
    },
    conversions={
        "Gemma3nForCausalLM": _GEMMA3N,
        "Gemma3nForConditionalGeneration": _GEMMA3N,  # its text model; the vision and audio towers are dropped
    },
)  # fmt: skip
