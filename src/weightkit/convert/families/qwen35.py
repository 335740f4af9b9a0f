"""Qwen3-Next and Qwen 3.5 (dense and MoE, text and the language model of the multimodal classes): the hybrid
Qwen decoders whose layers are gated linear attention (a gated delta net: `linear_attn.*`) or gated full
attention, with multi-token prediction layers (`mtp.*`) after them. `Qwen3NextModel`, `Qwen3_5TextModel` and
`Qwen3_5MoeTextModel` of llama.cpp's converter (transformers 5.25's config classes).

What the converter does to them: the MTP layers become blocks after the config's layers (with the NextN
names of their projection and norms); the norms are stored as offsets from 1 (written plus one, but for the
gated delta net's own norm); `A_log` is written as `A = -exp(A_log)`; `dt_bias` is the time-step projection's
bias; the convolution loses its middle axis; Qwen3-Next's fused `in_proj_qkvz` is split into Q, K, V (heads
grouped by kind) and the gate Z; and Qwen 3.5 with more value heads than key heads has its value heads
reordered from grouped by key head to tiled (ggml broadcasts the key heads that way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FormatError, UnsupportedError
from ..hf.config import CONFIG_NAME, ConfigClass, HFConfig
from ..hf.experts import Tensors, derived_tensor, stack_experts
from ..hf.kv import KV
from ..hf.parameters import LAYERS, block_count, rope_parameters
from ..hf.tensors import SourceTensor
from .decoder import (
    A_FROM_A_LOG,
    DECODER_ATTENTION_NAMES,
    DECODER_NAMES,
    MOE_NAMES,
    NEXTN_NAMES,
    QK_NORM_NAMES,
    H,
    dt_bias_as_bias,
    gpt2_vocab,
    kv_heads_default_to_heads,
    squeeze_conv,
    unsqueeze_conv,
)
from .family import Conversion, Export, Family, Transform
from .qwen import SHARED_EXPERT_NAMES, moe_parameters

# --- tensor names -------------------------------------------------------------------------------------------------

_L = "model.layers.{bid}.linear_attn."
_LINEAR_ATTENTION_NAMES = {
    _L + "in_proj_qkv": "blk.{bid}.attn_qkv",
    _L + "in_proj_z": "blk.{bid}.attn_gate",
    _L + "in_proj_b": "blk.{bid}.ssm_beta",
    _L + "in_proj_a": "blk.{bid}.ssm_alpha",
    _L + "in_proj_ba": "blk.{bid}.ssm_ba",  # Qwen3-Next's beta and alpha in one
    _L + "conv1d": "blk.{bid}.ssm_conv1d",
    _L + "dt_proj": "blk.{bid}.ssm_dt",
    _L + "A_log": "blk.{bid}.ssm_a",
    _L + "norm": "blk.{bid}.ssm_norm",
    _L + "out_proj": "blk.{bid}.ssm_out",
}
_POST_ATTENTION_NORM = {"model.layers.{bid}.post_attention_layernorm": "blk.{bid}.post_attention_norm"}
_HYBRID_NAMES = DECODER_ATTENTION_NAMES | QK_NORM_NAMES | _POST_ATTENTION_NORM | _LINEAR_ATTENTION_NAMES | NEXTN_NAMES
_DENSE_NAMES = _HYBRID_NAMES | {k: v for k, v in DECODER_NAMES.items() if ".mlp." in k}
_MOE_NAMES = _HYBRID_NAMES | MOE_NAMES | SHARED_EXPERT_NAMES

#: What every one of them has, whatever its layers are (a layer's tensors depend on its kind).
_REQUIRED: dict[str, tuple[str | None, ...]] = {"token_embd.weight": (None, H), "output_norm.weight": (H,)}

# --- the multi-token prediction layers ------------------------------------------------------------------------------

#: `_QwenMtpMixin`'s names for the MTP module's own tensors, under the first block after the config's layers
_MTP_RENAMES = {"fc": "eh_proj", "pre_fc_norm_embedding": "enorm", "pre_fc_norm_hidden": "hnorm",
                "norm": "shared_head.norm"}  # fmt: skip


def _mtp_name(name: str) -> str:
    """`mtp.*` whether the checkpoint puts it at the top or under `model.`."""
    return name.removeprefix("model.") if name.startswith("model.mtp.") else name


def _mtp_layer(name: str) -> int | None:
    parts = _mtp_name(name).split(".", 3)
    if len(parts) == 4 and parts[:2] == ["mtp", "layers"] and parts[2].isdecimal():
        return int(parts[2])
    return None


def _blocks(h: HFConfig, names: list[str]) -> int:
    """`_QwenMtpMixin.__init__`: the config's layers and its `mtp_num_hidden_layers`, or as many MTP layers as
    the checkpoint has; the converter insists on at least one."""
    n_mtp = h.get("mtp_num_hidden_layers") or 0
    if not n_mtp:
        n_mtp = max((i + 1 for n in names if (i := _mtp_layer(n)) is not None), default=0)
    if not n_mtp:
        raise UnsupportedError(f"{CONFIG_NAME}: no multi-token prediction layers (no mtp_num_hidden_layers and no "
                               "mtp.layers tensors); llama.cpp's converter takes such a checkpoint only with "
                               "--no-mtp, which weightkit does not offer")  # fmt: skip
    return h.find(LAYERS) + n_mtp


def _mtp_as_blocks(tensors: Tensors, h: HFConfig) -> Tensors:
    """`_QwenMtpMixin.filter_tensors`: `mtp.layers.i.*` become block `layers + i`, the MTP module's projection
    and norms the NextN tensors of block `layers`."""
    first = h.find(LAYERS)
    out: Tensors = []
    for name, t in tensors:
        parts = _mtp_name(name).split(".", 3)
        if parts[0] == "mtp":
            if (i := _mtp_layer(name)) is not None:
                name = f"model.layers.{first + i}.{parts[3]}"
            elif len(parts) == 3 and parts[1] in _MTP_RENAMES:
                name = f"model.layers.{first}.{_MTP_RENAMES[parts[1]]}.{parts[2]}"
        out.append((name, t))
    return out


# --- the gated delta net's tensors ----------------------------------------------------------------------------------


def _split_qkvz(tensors: Tensors, h: HFConfig) -> Tensors:
    """Qwen3-Next's `in_proj_qkvz` [(q, k, v, z) per key head, hidden] as `attn_qkv` (every head's q, then k,
    then v) and `attn_gate` (z), both in place of it."""
    out: Tensors = []
    for name, t in tensors:
        if "in_proj_qkvz.weight" not in name:
            out.append((name, t))
            continue
        k_heads, k_dim = h["linear_num_key_heads"], h["linear_key_head_dim"]
        v_per_k = h["linear_num_value_heads"] // k_heads * h["linear_value_head_dim"]
        group = 2 * k_dim + 2 * v_per_k
        if len(t.shape) != 2 or t.shape[0] != k_heads * group:
            raise FormatError(t.file, None, f"{name!r} {list(t.shape)} is not {k_heads} key heads of q, k, v and z "
                                            f"({group} rows each) by hidden")  # fmt: skip
        cuts = tuple(int(c) for c in np.cumsum([0, k_dim, k_dim, v_per_k, v_per_k]))
        prefix = name.split("in_proj_qkvz")[0]
        out.append(_qkvz_part(t, prefix + "in_proj_qkv.weight", (k_heads, group), cuts, range(3)))
        out.append(_qkvz_part(t, prefix + "in_proj_z.weight", (k_heads, group), cuts, range(3, 4)))
    return out


def _qkvz_part(t: SourceTensor, name: str, grouping: tuple[int, int], cuts: tuple[int, ...],
               kinds: range) -> tuple[str, SourceTensor]:  # fmt: skip
    """The rows of `kinds` (0-3: q, k, v, z) of every key head's group, kind after kind."""
    k_heads, group = grouping
    rows = k_heads * sum(cuts[i + 1] - cuts[i] for i in kinds)

    def read() -> np.ndarray:
        grouped = t.read().reshape(k_heads, group, t.shape[1])
        return np.concatenate([grouped[:, cuts[i] : cuts[i + 1]].reshape(-1, t.shape[1]) for i in kinds])

    return name, derived_tensor(t, name, (rows, t.shape[1]), read)


def _plus_one(w: np.ndarray, h: HFConfig) -> np.ndarray:
    return w + 1  # in the tensor's own float16 or float32, as torch does it


def _minus_one(w: np.ndarray, h: HFConfig) -> np.ndarray:
    return w.astype(np.float32) - 1


def _no_check(shape: tuple[int, ...], h: HFConfig) -> str | None:
    return None


#: the converter's zero-centred norms, but the gated delta net's own: its weights are the scale's offset from 1
_NORMS = Transform(("norm.weight",), _plus_one, _no_check, _minus_one, exclude=("linear_attn.norm.weight",))

# --- value heads, from grouped by key head to tiled ---------------------------------------------------------------


def _tile_value_heads(w: np.ndarray, axis: int, start: int, heads: tuple[int, int], head_dim: int) -> np.ndarray:
    """`_reorder_v_heads`: along `axis` from `start`, [k0: v0..v(r-1), k1: ...] becomes [v0: k0, k1, ..., v1: ...]
    for `heads` (key heads, value heads per key head); with the two counts swapped, back again."""
    w = np.moveaxis(w, axis, 0)
    v = w[start:].reshape(*heads, head_dim, *w.shape[1:]).swapaxes(0, 1).reshape(w[start:].shape)
    return np.moveaxis(np.concatenate([w[:start], v]), 0, axis)


def _heads(h: HFConfig) -> tuple[int, int]:
    """(key heads, value heads per key head)."""
    k_heads = h["linear_num_key_heads"]
    return k_heads, h["linear_num_value_heads"] // k_heads


def _reordered(h: HFConfig) -> bool:
    k, v = h.get("linear_num_key_heads", 0), h.get("linear_num_value_heads", 0)
    return k > 0 and v > 0 and k != v


def _value_heads(suffixes: tuple[str, ...], axis: int, qk_rows: bool, per_head: bool) -> Transform:
    """The reordering of the value heads in one kind of tensor: along `axis`, after the Q and K rows where
    there are some (`qk_rows`), in heads of the value head size (`per_head`) or of one."""

    def layout(h: HFConfig) -> tuple[int, int, int]:
        k_rows = 2 * h["linear_num_key_heads"] * h["linear_key_head_dim"] if qk_rows else 0
        head_dim = h["linear_value_head_dim"] if per_head else 1
        return k_rows, head_dim, k_rows + h["linear_num_value_heads"] * head_dim

    def apply(w: np.ndarray, h: HFConfig) -> np.ndarray:
        if not _reordered(h):
            return w
        start, head_dim, _ = layout(h)
        return _tile_value_heads(w, axis, start, _heads(h), head_dim)

    def invert(w: np.ndarray, h: HFConfig) -> np.ndarray:
        if not _reordered(h):
            return w
        start, head_dim, _ = layout(h)
        k_heads, v_per_k = _heads(h)
        return _tile_value_heads(w, axis, start, (v_per_k, k_heads), head_dim)

    def check(shape: tuple[int, ...], h: HFConfig) -> str | None:
        if not _reordered(h):
            return None
        if h["linear_num_value_heads"] % h["linear_num_key_heads"]:
            return "linear_num_value_heads is not a multiple of linear_num_key_heads"
        _, _, size = layout(h)
        if len(shape) <= (axis % max(len(shape), 1)) or shape[axis] != size:
            return f"axis {axis} is not {size} long (config.json's linear attention heads)"
        return None

    return Transform(suffixes, apply, check, invert)


_VALUE_HEADS = (
    _value_heads(("in_proj_qkv.weight",), 0, qk_rows=True, per_head=True),
    _value_heads(("conv1d.weight",), 0, qk_rows=True, per_head=True),
    _value_heads(("in_proj_z.weight",), 0, qk_rows=False, per_head=True),
    _value_heads(("in_proj_a.weight", "in_proj_b.weight", ".A_log", "dt_proj.bias"), 0, qk_rows=False, per_head=False),
    _value_heads(("linear_attn.out_proj.weight",), -1, qk_rows=False, per_head=True),
)

# --- parameters -------------------------------------------------------------------------------------------------------


_SSM_SIZES = (
    ("ssm.conv_kernel", "linear_conv_kernel_dim"),
    ("ssm.state_size", "linear_key_head_dim"),
    ("ssm.group_count", "linear_num_key_heads"),
    ("ssm.time_step_rank", "linear_num_value_heads"),
)


def _hybrid_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`_QwenMtpMixin` and `Qwen3NextModel.set_gguf_parameters`: the MTP layer count, the gated delta net's
    sizes, which blocks are recurrent, and the rotary part of each head."""
    layers = h.find(LAYERS)
    blocks = block_count(h)
    if blocks > layers:
        kv.u32(f"{arch}.nextn_predict_layers", blocks - layers)
    for key, name in _SSM_SIZES:
        kv.u32(f"{arch}.{key}", h[name])
    kv.u32(f"{arch}.ssm.inner_size", h["linear_value_head_dim"] * h["linear_num_value_heads"])
    if (kinds := h.get("layer_types")) is not None:
        if len(kinds) != layers:
            raise FormatError(folder / CONFIG_NAME, None, f"layer_types has {len(kinds)} entries for {layers} layers")
        recurrent = [kind == "linear_attention" for kind in kinds] + [False] * (blocks - layers)
        kv.array(f"{arch}.attention.recurrent_layers", recurrent, CONFIG_NAME)
    kv.u32(f"{arch}.full_attention_interval", h.get("full_attention_interval", 4))
    head_dim = h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]
    kv.u32(f"{arch}.rope.dimension_count", int(head_dim * rope_parameters(h).get("partial_rotary_factor", 0.25)))


def _default_mrope_sections(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`_Qwen35MRopeMixin`: Qwen 3.5 always uses interleaved multimodal rope; llama.cpp needs its sections."""
    if "mrope_section" not in rope_parameters(h):
        kv.array(f"{arch}.rope.dimension_sections", [11, 11, 10, 0], CONFIG_NAME)


# --- config classes (transformers 5.25) ------------------------------------------------------------------------------


def _layer_types(h: dict[str, Any]) -> None:
    """`__post_init__`: without layer_types, every `full_attention_interval`-th layer (default 4) is full
    attention (the interval then leaves the config)."""
    if h.get("layer_types") is None:
        interval = h.pop("full_attention_interval", 4)
        h["layer_types"] = ["linear_attention" if (i + 1) % interval else "full_attention"
                            for i in range(h["num_hidden_layers"])]  # fmt: skip


def _rope(h: dict[str, Any]) -> None:
    """The rope parameters transformers 5 standardizes: given or from a legacy `rope_theta`, a quarter of each
    head rotated unless said."""
    rope = h.get("rope_parameters")
    if not isinstance(rope, dict):
        rope = {"rope_theta": h.pop("rope_theta", 10000.0)}
    rope.setdefault("partial_rotary_factor", h.pop("partial_rotary_factor", 0.25))
    rope.setdefault("rope_type", "default")
    h["rope_parameters"] = rope


_TEXT_DEFAULTS = {"vocab_size": 248320, "head_dim": 256, "hidden_act": "silu", "max_position_embeddings": 32768,
                  "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "rope_parameters": None,
                  "num_attention_heads": 16, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
                  "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
                  "layer_types": None}  # fmt: skip
_MOE_DEFAULTS = {"moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts_per_tok": 8}
_DERIVE = (kv_heads_default_to_heads, _layer_types, _rope)
_COMPOSITE = {"tie_word_embeddings": False}

# --- the conversions ------------------------------------------------------------------------------------------------


def _hybrid(gguf: str, names: dict[str, str], *, rewrites: tuple, transforms: tuple = (),
            parameters: tuple = ()) -> Conversion:  # fmt: skip
    """One of the hybrid decoders: the MTP layers as blocks, the gated delta net's tensors as the converter
    writes them, `rewrites` (the experts, Qwen3-Next's split projection) and `transforms` (the value heads)."""
    return Conversion(gguf=gguf, tensor_names=names, required=_REQUIRED, vocab=gpt2_vocab, filters=(dt_bias_as_bias,),
                      transforms=(*transforms, _NORMS, A_FROM_A_LOG),
                      parameters=(moe_parameters, _hybrid_parameters, *parameters),
                      rewrites=(_mtp_as_blocks, squeeze_conv("conv1d"), *rewrites), blocks=_blocks)  # fmt: skip


_QWEN3_NEXT = _hybrid("qwen3next", _MOE_NAMES, rewrites=(_split_qkvz, stack_experts))
_QWEN35 = _hybrid("qwen35", _DENSE_NAMES, rewrites=(), transforms=_VALUE_HEADS, parameters=(_default_mrope_sections,))
_QWEN35_MOE = _hybrid("qwen35moe", _MOE_NAMES, rewrites=(stack_experts,), transforms=_VALUE_HEADS,
                      parameters=(_default_mrope_sections,))  # fmt: skip

# --- the folders `--to hf` writes (transformers 5.25's Qwen3_5ForCausalLM and Qwen3_5MoeForCausalLM) -----------

_EXPORT_CONFIG = {
    "context_length": "max_position_embeddings",
    "block_count": "num_hidden_layers",
    "feed_forward_length": "intermediate_size",
    "embedding_length": "hidden_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.key_length": "head_dim",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "nextn_predict_layers": "mtp_num_hidden_layers",
    "attention.recurrent_layers": "layer_types",
    "ssm.conv_kernel": "linear_conv_kernel_dim",
    "ssm.state_size": "linear_key_head_dim",
    "ssm.group_count": "linear_num_key_heads",
    "ssm.time_step_rank": "linear_num_value_heads",
    "ssm.inner_size": "linear_value_head_dim",  # the whole value width, per head in `_transformers_config`
    "rope.freq_base": "rope_theta",  # these three into rope_parameters by `_transformers_config`
    "rope.dimension_count": "partial_rotary_factor",
    "rope.dimension_sections": "mrope_section",
}
_EXPORT_MOE_CONFIG = {
    "expert_count": "num_experts",
    "expert_used_count": "num_experts_per_tok",
    "expert_feed_forward_length": "moe_intermediate_size",
    "expert_shared_feed_forward_length": "shared_expert_intermediate_size",
}


def _transformers_config(shapes: Any, config: dict[str, Any]) -> dict[str, Any]:
    """The GGUF's measures as transformers' (as its GGUF loader reads them): the layers without the MTP ones,
    each layer's kind, the value width per head, the rope (interleaved multimodal, over a fraction of each head)."""
    mtp = config.get("mtp_num_hidden_layers", 0)
    layers = config["num_hidden_layers"] - mtp
    recurrent = [bool(r) for r in config.get("layer_types", [])][:layers]
    rope = {"rope_type": "default", "rope_theta": config.pop("rope_theta"), "mrope_interleaved": True,
            "partial_rotary_factor": config.pop("partial_rotary_factor") / config["head_dim"],
            "mrope_section": [int(n) for n in config.pop("mrope_section") if n]}  # fmt: skip
    return {
        "num_hidden_layers": layers,
        "layer_types": ["linear_attention" if r else "full_attention" for r in recurrent],
        "linear_value_head_dim": config["linear_value_head_dim"] // config["linear_num_value_heads"],
        "rope_parameters": rope,
    }


def _checkpoint_name(name: str, h: HFConfig) -> str:
    """The names `_dt_bias` and `_mtp_as_blocks` changed, given back: the MTP blocks after the model's layers are
    `mtp.layers.i.*` again, the first one's projection and norms the MTP module's."""
    if name.endswith(".linear_attn.dt_proj.bias"):
        return name.removesuffix(".dt_proj.bias") + ".dt_bias"
    parts = name.split(".", 3)
    first = h["num_hidden_layers"]
    if len(parts) < 4 or parts[:2] != ["model", "layers"] or int(parts[2]) < first:
        return name
    kind, _, suffix = parts[3].rpartition(".")
    if int(parts[2]) == first and (own := _MTP_OWN.get(kind)) is not None:
        return f"mtp.{own}.{suffix}"
    return f"mtp.layers.{int(parts[2]) - first}.{parts[3]}"


_MTP_OWN = {nextn: own for own, nextn in _MTP_RENAMES.items()}


def _export(hf_class: str, model_type: str, conversion: Conversion, config: dict[str, str]) -> Export:
    """Qwen 3.5's folder: what transformers' own GGUF loader makes of the file, and the MTP layers it drops."""
    return Export(hf_class, model_type, conversion, "qwen2", config, derived=(_transformers_config,),
                  rewrites_undone=(unsqueeze_conv("conv1d.weight"),), rename=_checkpoint_name,
                  stacked_experts=True)  # fmt: skip


FAMILY = Family(
    name="qwen35",
    configs={
        "qwen3_next": ConfigClass(
            "Qwen3NextConfig",
            _TEXT_DEFAULTS | _MOE_DEFAULTS | {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
                                              "num_hidden_layers": 48, "num_key_value_heads": 2, "num_experts": 512,
                                              "num_experts_per_tok": 10, "decoder_sparse_step": 1,
                                              "norm_topk_prob": True, "mlp_only_layers": []},
            _DERIVE,
            transformers=5,
        ),
        "qwen3_5_text": ConfigClass(
            "Qwen3_5TextConfig",
            _TEXT_DEFAULTS | {"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 32,
                              "num_key_value_heads": 4},
            _DERIVE,
            transformers=5,
        ),
        "qwen3_5_moe_text": ConfigClass(
            "Qwen3_5MoeTextConfig",
            _TEXT_DEFAULTS | _MOE_DEFAULTS | {"hidden_size": 2048, "num_hidden_layers": 40, "num_key_value_heads": 2,
                                              "num_experts": 256},
            _DERIVE,
            transformers=5,
        ),
        "qwen3_5": ConfigClass("Qwen3_5Config", _COMPOSITE, text_config="qwen3_5_text", transformers=5),
        "qwen3_5_moe": ConfigClass("Qwen3_5MoeConfig", _COMPOSITE, text_config="qwen3_5_moe_text", transformers=5),
    },
    conversions={
        "Qwen3NextForCausalLM": _QWEN3_NEXT,
        "Qwen3_5ForCausalLM": _QWEN35,
        "Qwen3_5ForConditionalGeneration": _QWEN35,
        "Qwen3_5MoeForCausalLM": _QWEN35_MOE,
        "Qwen3_5MoeForConditionalGeneration": _QWEN35_MOE,
    },
    exports={
        "qwen35": _export("Qwen3_5ForCausalLM", "qwen3_5_text", _QWEN35, _EXPORT_CONFIG),
        "qwen35moe": _export("Qwen3_5MoeForCausalLM", "qwen3_5_moe_text", _QWEN35_MOE,
                             _EXPORT_CONFIG | _EXPORT_MOE_CONFIG),
    },
)  # fmt: skip
