"""The architecture keys every text model gets (`TextModel.set_gguf_parameters`) and the rope parameters.

Each key is written only when config.json (with transformers' defaults) has one of its source keys; the
first present key of each list is used, as the converter's `find_hparam` does.
"""

from __future__ import annotations

from typing import Any

from ...errors import FormatError, UnsupportedError
from .config import CONFIG_NAME, HFConfig
from .kv import KV

LAYERS = ("n_layers", "num_hidden_layers", "n_layer", "num_layers")
CONTEXT = ("max_position_embeddings", "n_ctx", "n_positions", "max_length", "max_sequence_length", "model_max_length")
HEADS = ("num_attention_heads", "n_head", "n_heads")
KV_HEADS = ("num_key_value_heads", "n_kv_heads")
_ROPE_THETA = ("global_rope_theta", "rope_global_theta", "rope_theta_global", "rope_theta", "rotary_emb_base")
_LOCAL_ROPE_THETA = (
    "local_rope_theta",
    "rope_local_theta",
    "rope_theta_local",
    "swa_rope_theta",
    "rope_local_base_freq",
)
_GATING = {"softmax": 1, "sigmoid": 2, "sqrtsoftplus": 4}


def block_count(h: HFConfig) -> int:
    """The converter's `block_count`: the config's layers, and any blocks the conversion adds to them."""
    return h.block_count if h.block_count is not None else h.find(LAYERS)


def rope_parameters(h: HFConfig) -> dict[str, Any]:
    """`TextModel.__init__`'s rope parameters: `rope_parameters` or `rope_scaling` (the same dict, changed in
    place), with the global theta, the local one and the type mirrored in when it has no per-attention entries."""
    rope = h.get("rope_parameters", h.get("rope_scaling")) or {}
    if not isinstance(rope, dict):
        raise FormatError(CONFIG_NAME, None, f"rope_scaling {rope!r} is not an object")
    if "full_attention" not in rope and "sliding_attention" not in rope:
        if (local := h.find(_LOCAL_ROPE_THETA, None)) is not None:
            rope["sliding_attention"] = {"rope_theta": local}
        if "rope_theta" not in rope and (theta := h.find(_ROPE_THETA, None)) is not None:
            rope["rope_theta"] = theta
        if "rope_type" not in rope and (kind := rope.get("type")) is not None:
            rope["rope_type"] = kind
        partial = h.find(("partial_rotary_factor", "rope_pct", "rope_percent"), None)
        if "partial_rotary_factor" not in rope and partial is not None:
            rope["partial_rotary_factor"] = partial
        original = h.find(("original_max_position_embeddings",), None)
        if "original_max_position_embeddings" not in rope and original is not None:
            rope["original_max_position_embeddings"] = original
    return rope


def write_text_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """`TextModel.set_gguf_parameters`, from `{arch}.block_count` to `general.file_type`."""
    kv.u32(f"{arch}.block_count", block_count(h))
    for key, names in (
        ("context_length", CONTEXT),
        ("embedding_length", ("hidden_size", "n_embd", "dim")),
        ("feed_forward_length", ("prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size",
                                 "n_inner", "hidden_dim")),
        ("attention.head_count", HEADS),
        ("attention.head_count_kv", KV_HEADS),
    ):  # fmt: skip
        if isinstance(value := h.find(names, None), list):  # one per layer (Gemma 3n's feed-forward widths)
            kv.array(f"{arch}.{key}", value, CONFIG_NAME)
        elif value is not None:
            kv.u32(f"{arch}.{key}", value)
    if h.get("is_causal") is False:
        kv.bool(f"{arch}.attention.causal", False)
    full = rope.get("full_attention", rope)
    _write_rope_scaling(kv, arch, full)
    if "mrope_section" in rope:
        sections = list(rope["mrope_section"]) + [0] * 4
        kv.array(f"{arch}.rope.dimension_sections", sections[:4], CONFIG_NAME)
    if (theta := full.get("rope_theta")) is not None:
        kv.f32(f"{arch}.rope.freq_base", theta)
    if (local := rope.get("sliding_attention", {}).get("rope_theta")) is not None:
        kv.f32(f"{arch}.rope.freq_base_swa", local)
    for key, names in (
        ("attention.layer_norm_rms_epsilon", ("rms_norm_eps", "norm_eps")),
        ("attention.layer_norm_epsilon", ("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon")),
    ):
        if (value := h.find(names, None)) is not None:
            kv.f32(f"{arch}.{key}", value)
    for key, names in (
        ("expert_count", ("num_local_experts", "num_experts", "n_routed_experts")),
        ("expert_used_count", ("num_experts_per_tok", "num_experts_per_token", "top_k_experts")),
        ("expert_group_count", ("n_group",)),
        ("expert_group_used_count", ("topk_group",)),
    ):
        if (value := h.find(names, None)) is not None:
            kv.u32(f"{arch}.{key}", value)
    gating = h.find(("score_function", "scoring_func", "score_func", "moe_router_activation",
                     "moe_router_activation_func", "expert_selection_fn"), None)  # fmt: skip
    if gating is not None:
        if gating not in _GATING:
            raise UnsupportedError(f"{CONFIG_NAME}: expert gating function {gating!r} is not supported")
        kv.u32(f"{arch}.expert_gating_func", _GATING[gating])
    if (head_dim := h.get("head_dim")) is not None:
        kv.u32(f"{arch}.attention.key_length", head_dim)
        kv.u32(f"{arch}.attention.value_length", head_dim)
    kv.u32("general.file_type", file_type)


def _write_rope_scaling(kv: KV, arch: str, rope: dict[str, Any]) -> None:
    kind = rope.get("rope_type")
    if kind is None:
        return
    factor = rope.get("factor")
    if kind == "linear" and factor is not None:
        kv.string(f"{arch}.rope.scaling.type", "linear")
        kv.f32(f"{arch}.rope.scaling.factor", factor)
    elif kind == "yarn" and factor is not None:
        kv.string(f"{arch}.rope.scaling.type", "yarn")
        kv.f32(f"{arch}.rope.scaling.factor", factor)
        if "original_max_position_embeddings" not in rope:
            raise FormatError(CONFIG_NAME, None, "yarn rope scaling without original_max_position_embeddings")
        kv.u32(f"{arch}.rope.scaling.original_context_length", rope["original_max_position_embeddings"])
        for key, value in (
            ("yarn_ext_factor", rope.get("extrapolation_factor")),
            ("yarn_attn_factor", rope.get("attention_factor", rope.get("attn_factor"))),
            ("yarn_beta_fast", rope.get("beta_fast")),
            ("yarn_beta_slow", rope.get("beta_slow")),
        ):
            if value is not None:
                kv.f32(f"{arch}.rope.scaling.{key}", value)
    elif kind in ("su", "longrope"):
        kv.string(f"{arch}.rope.scaling.type", "longrope")
    # "dynamic" and "llama3" write nothing here (llama3 becomes the rope_freqs tensor); others: nothing either
