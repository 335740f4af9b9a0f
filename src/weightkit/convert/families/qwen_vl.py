"""Qwen2.5-VL and Qwen3-VL (dense and MoE): their language models (`Qwen2VLModel`, `Qwen3VLTextModel` and
`Qwen3VLMoeTextModel` of llama.cpp's converter: Qwen2's and Qwen3's decoders under their own GGUF architectures,
with multimodal rope sections) and their projectors (`--mmproj`, `Qwen2VLVisionModel` and `Qwen3VLVisionModel`)."""

from __future__ import annotations

import copy
import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...errors import FormatError
from ..hf.config import CONFIG_NAME, ConfigClass, HFConfig
from ..hf.experts import QWEN_EXPERTS, Tensors, expert_stacker
from ..hf.kv import KV
from ..hf.projector import (
    projector_config,
    vision_defaults,
    write_vision_parameters,
)
from .decoder import (
    DECODER_ATTENTION_NAMES,
    DECODER_NAMES,
    DECODER_REQUIRED,
    DENSE_FFN,
    MOE_NAMES,
    QK_NORM_NAMES,
    gpt2_vocab,
    head_dim_from_hidden_size,
    moe_required,
    number,
    pooling_type,
    rope_type_from_type,
    sliding_window_only_if_used,
)
from .family import Conversion, Family
from .qwen import moe_parameters, qwen_vocab, refuse_qwen3_reranker
from .vision import TEMPORAL_PATCHES, projector, split_fused_qkv, split_temporal_patches

_V, _FF = "hidden_size", "intermediate_size"
_PATCH = (_V, "in_channels", "patch_size", "patch_size")
_BLOCK_NAMES = {
    "visual.blocks.{bid}.attn.proj": "v.blk.{bid}.attn_out",
    "visual.blocks.{bid}.norm1": "v.blk.{bid}.ln1",
    "visual.blocks.{bid}.norm2": "v.blk.{bid}.ln2",
    "visual.patch_embed.proj": "v.patch_embd",
    TEMPORAL_PATCHES[1]: TEMPORAL_PATCHES[1],
}
_REQUIRED: dict[str, tuple[str | None, ...]] = {
    **{name: _PATCH for name in TEMPORAL_PATCHES},
    "v.blk.{bid}.attn_out.weight": (_V, _V),
    "v.blk.{bid}.ln1.weight": (_V,),
    "v.blk.{bid}.ln2.weight": (_V,),
    "v.post_ln.weight": (_V,),
    "mm.0.weight": (None, None),
    "mm.2.weight": ("out_hidden_size", None),
}


def _visual_only(name: str) -> str | None:
    """`Qwen2VLVisionModel.filter_tensors`: the vision tower (`visual.`) only."""
    return name if name.startswith("visual.") else None


def _qwen3_visual_only(name: str) -> str | None:
    """`Qwen3VLVisionModel.filter_tensors`: the vision tower, as transformers 5 saves it (`model.visual.`) or
    as published (`visual.`); no output head, no MTP layers."""
    if name.startswith(("lm_head.", "mtp.")):
        return None
    if name.startswith("model.visual."):
        name = name.replace("model.visual.", "visual.", 1)
    return name if name.startswith("visual.") else None


def _qwen25_vision_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """The common clip keys over the vision config with the converter's default image size (560)."""
    write_vision_parameters(kv, arch, vision_defaults(h, image_size=560), rope, file_type)


def _qwen25_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Qwen2VLVisionModel.set_gguf_parameters` for Qwen2.5-VL: SiLU, the window-attention pattern (one full
    attention block in every n, from `fullatt_block_indexes`), and the norm epsilon of the top-level config
    (which has none: 1e-6)."""
    h = projector_config(h)
    kv.string("clip.projector_type", "qwen2.5vl_merger")
    kv.bool("clip.use_silu", True)
    full = h.get("fullatt_block_indexes")
    if not isinstance(full, list) or not full or not all(isinstance(i, int) for i in full):
        raise FormatError(folder / CONFIG_NAME, None, f"vision_config: fullatt_block_indexes is {full!r}, not a list "
                                                      "of block numbers")  # fmt: skip
    pattern = full[0] + 1
    if any(b - a != pattern for a, b in itertools.pairwise(full)):
        raise FormatError(folder / CONFIG_NAME, None, f"vision_config: fullatt_block_indexes {full} are not every "
                                                      f"{pattern}th block")  # fmt: skip
    kv.u32("clip.vision.n_wa_pattern", pattern)
    kv.f32("clip.vision.attention.layer_norm_epsilon", number(h.model, "rms_norm_eps", 1e-6))


def _qwen3_vision_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """The common clip keys over the vision config with, where it gives none, the image size its learned
    positions cover (`Qwen3VLVisionModel.__init__`)."""
    side = int(number(h, "num_position_embeddings", 2304) ** 0.5 * number(h, "patch_size", 16))
    write_vision_parameters(kv, arch, vision_defaults(h, image_size=side), rope, file_type)


def _deepstack_layers(h: HFConfig, folder: Path) -> list[int]:
    """`deepstack_visual_indexes`: the vision blocks whose output a deepstack merger takes."""
    indexes, depth = h.get("deepstack_visual_indexes", []), number(h, "depth")
    if not isinstance(indexes, list) or not all(isinstance(i, int) and 0 <= i < depth for i in indexes):
        raise FormatError(folder / CONFIG_NAME, None, f"vision_config: deepstack_visual_indexes is {indexes!r}, not "
                                                      f"block numbers below depth {depth}")  # fmt: skip
    return indexes


def _qwen3_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Qwen3VLVisionModel.set_gguf_parameters`: GELU, the merge size, the text model's norm epsilon, and
    which blocks feed a deepstack merger."""
    h = projector_config(h)
    kv.string("clip.projector_type", "qwen3vl_merger")
    kv.bool("clip.use_gelu", True)
    if h.get("spatial_merge_size") is not None:
        kv.u32("clip.vision.spatial_merge_size", number(h, "spatial_merge_size"))
    text = h.model.get("text_config")
    kv.f32("clip.vision.attention.layer_norm_epsilon", number(text if isinstance(text, dict) else {},
                                                              "rms_norm_eps", 1e-6))  # fmt: skip
    deepstack = set(_deepstack_layers(h, folder))
    kv.array("clip.vision.is_deepstack_layers", [i in deepstack for i in range(number(h, "depth"))], CONFIG_NAME)


def _deepstack_names(tensors: Tensors, h: HFConfig) -> Tensors:
    """`Qwen3VLVisionModel.modify_tensors`: deepstack merger k's norm and linear layers named by the block it
    follows (`deepstack_visual_indexes[k]`)."""
    indexes = _deepstack_layers(h, Path(CONFIG_NAME))
    out: Tensors = []
    for name, t in tensors:
        if name.startswith("visual.deepstack_merger_list."):
            k, part, suffix = name.split(".")[2:5]
            if not k.isdecimal() or int(k) >= len(indexes) or part not in _DEEPSTACK_PARTS:
                raise FormatError(t.file, None, f"tensor {name!r} is no deepstack merger of deepstack_visual_indexes "
                                                f"{indexes}")  # fmt: skip
            name = f"v.deepstack.{indexes[int(k)]}.{_DEEPSTACK_PARTS[part]}.{suffix}"
        out.append((name, t))
    return out


_DEEPSTACK_PARTS = {"norm": "norm", "linear_fc1": "fc1", "linear_fc2": "fc2"}

# --- the language models ----------------------------------------------------------------------------------------


def _qwen2vl_without_thinker(name: str) -> str | None:
    """`Qwen2VLModel.filter_tensors`: an Omni checkpoint's `thinker.` dropped from its names."""
    return name.replace("thinker.", "") if name.startswith("thinker.") else name


def _qwen3vl_without_thinker(name: str) -> str | None:
    """`Qwen3VLTextModel.filter_tensors` (and the MoE's): `thinker.` dropped from every name."""
    return name.replace("thinker.", "")


def _deepstack_count(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Qwen3VLTextModel.set_gguf_parameters`' addition: how many vision blocks feed a deepstack merger."""
    vision = h.get("vision_config") or {}
    kv.u32(f"{arch}.n_deepstack_layers", len(vision.get("deepstack_visual_indexes", [])))


#: `Qwen3VLMoeTextModel.modify_tensors`: the fused experts taken as published (transposed); per-expert tensors
#: stacked as Qwen2-MoE's
_QWEN3_VL_EXPERTS = replace(QWEN_EXPERTS, transposed=True)
#: the stacked experts' sizes are not checked: the converter transposes the fused tensors whatever their layout, so
#: a checkpoint saved by transformers 5.25 (`[experts, 2 * ff, hidden]`, as it holds them) comes out with the sizes
#: swapped, as the converter writes it
_QWEN3_VL_MOE_REQUIRED = {k: v for k, v in DECODER_REQUIRED.items() if k not in DENSE_FFN} | {
    k: (dims[0], *(None,) * (len(dims) - 1)) if "_exps." in k else dims
    for k, dims in moe_required(_QWEN3_VL_EXPERTS.count, "moe_intermediate_size").items()
}

_QWEN25_VL = Conversion(gguf="qwen2vl", tensor_names=DECODER_NAMES, required=DECODER_REQUIRED, vocab=qwen_vocab,
                        filters=(_qwen2vl_without_thinker,))  # fmt: skip
_QWEN3_VL = Conversion(gguf="qwen3vl", tensor_names=DECODER_NAMES | QK_NORM_NAMES, required=DECODER_REQUIRED,
                       vocab=qwen_vocab, filters=(_qwen3vl_without_thinker,),
                       parameters=(pooling_type, _deepstack_count), checks=(refuse_qwen3_reranker,))  # fmt: skip
_QWEN3_VL_MOE = Conversion(gguf="qwen3vlmoe", tensor_names=DECODER_ATTENTION_NAMES | QK_NORM_NAMES | MOE_NAMES,
                           required=_QWEN3_VL_MOE_REQUIRED, vocab=gpt2_vocab, filters=(_qwen3vl_without_thinker,),
                           parameters=(moe_parameters, _deepstack_count),
                           rewrites=(expert_stacker(_QWEN3_VL_EXPERTS),))  # fmt: skip

_QWEN25_VL_VISION = projector(
    tensor_names=_BLOCK_NAMES | {
        **{f"visual.blocks.{{bid}}.attn.{x}": f"v.blk.{{bid}}.attn_{x}" for x in "qkv"},
        "visual.blocks.{bid}.mlp.gate_proj": "v.blk.{bid}.ffn_gate",
        "visual.blocks.{bid}.mlp.up_proj": "v.blk.{bid}.ffn_up",
        "visual.blocks.{bid}.mlp.down_proj": "v.blk.{bid}.ffn_down",
        "visual.merger.ln_q": "v.post_ln",
        "visual.merger.mlp.0": "mm.0",
        "visual.merger.mlp.2": "mm.2",
    },
    required=_REQUIRED | {
        **{f"v.blk.{{bid}}.attn_{x}.weight": (_V, _V) for x in "qkv"},
        "v.blk.{bid}.ffn_gate.weight": (_FF, _V),
        "v.blk.{bid}.ffn_up.weight": (_FF, _V),
        "v.blk.{bid}.ffn_down.weight": (_V, _FF),
    },
    filters=(_visual_only,),
    rewrites=(split_fused_qkv, split_temporal_patches),
    text_parameters=_qwen25_vision_parameters,
    parameters=(_qwen25_parameters,),
)  # fmt: skip
_QWEN3_VL_VISION = projector(
    tensor_names=_BLOCK_NAMES | {
        "visual.blocks.{bid}.attn.qkv": "v.blk.{bid}.attn_qkv",
        "visual.blocks.{bid}.mlp.linear_fc1": "v.blk.{bid}.ffn_up",
        "visual.blocks.{bid}.mlp.linear_fc2": "v.blk.{bid}.ffn_down",
        "visual.pos_embed": "v.position_embd",
        "visual.merger.norm": "v.post_ln",
        "visual.merger.linear_fc1": "mm.0",
        "visual.merger.linear_fc2": "mm.2",
        **{f"v.deepstack.{{bid}}.{x}": f"v.deepstack.{{bid}}.{x}" for x in _DEEPSTACK_PARTS.values()},
    },
    required=_REQUIRED | {
        "v.position_embd.weight": ("num_position_embeddings", _V),
        "v.blk.{bid}.attn_qkv.weight": (None, _V),
        "v.blk.{bid}.ffn_up.weight": (_FF, _V),
        "v.blk.{bid}.ffn_down.weight": (_V, _FF),
    },
    filters=(_qwen3_visual_only,),
    rewrites=(_deepstack_names, split_temporal_patches),
    text_parameters=_qwen3_vision_parameters,
    parameters=(_qwen3_parameters,),
)  # fmt: skip

#: the vision configs' defaults the projectors read (transformers 5.25)
_QWEN_VISION = {"in_channels": 3, "spatial_merge_size": 2, "temporal_patch_size": 2}
_QWEN3_VISION = ConfigClass(
    "Qwen3VLVisionConfig",
    _QWEN_VISION | {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "patch_size": 16,
                    "out_hidden_size": 3584, "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24]},
    transformers=5,
)  # fmt: skip
#: the text configs' defaults the converter reads (transformers 5.25)
_QWEN3_TEXT = {"vocab_size": 151936, "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 128000,
               "rms_norm_eps": 1e-6, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}}  # fmt: skip
_COMPOSITE = {"image_token_id": 151655, "video_token_id": 151656, "tie_word_embeddings": False}

# --- the config classes of transformers 4.57.6, which read the configs 4.x saved ----------------------------------

_COMPOSITE_4 = {"image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
                "vision_end_token_id": 151653}  # fmt: skip


def _text_config_from_top_level(h: dict[str, Any]) -> None:
    """`Qwen2_5_VLConfig.__init__` of 4.57.6 for a config without `text_config` (as Qwen2.5-VL was published):
    the text config made from the top-level keys."""
    if h.get("text_config") is None:
        h["text_config"] = {k: copy.deepcopy(v) for k, v in h.items() if k not in {"vision_config", *_COMPOSITE_4}}


def _mrope_as_default(h: dict[str, Any]) -> None:
    """4.57.6's Qwen2.5-VL text config: rope type "mrope" read as "default", mirrored into `rope_type`."""
    rope = h.get("rope_scaling")
    if isinstance(rope, dict) and rope.get("type") == "mrope":
        rope["type"] = "default"
    rope_type_from_type(h)


#: the 4.57.6 text configs' defaults the converter reads
_QWEN3_TEXT_4 = {"vocab_size": 151936, "hidden_act": "silu", "max_position_embeddings": 128000, "rms_norm_eps": 1e-6,
                 "rope_theta": 5000000.0, "rope_scaling": None, "tie_word_embeddings": False}  # fmt: skip
_QWEN25_VL_4 = ConfigClass("Qwen2_5_VLConfig", _COMPOSITE_4, (_text_config_from_top_level,),
                           text_config="qwen2_5_vl_text", vision_config="qwen2_5_vl_vision")  # fmt: skip
_QWEN25_VL_TEXT_4 = ConfigClass(
    "Qwen2_5_VLTextConfig",
    {"vocab_size": 152064, "hidden_act": "silu", "hidden_size": 8192, "intermediate_size": 29568,
     "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "max_position_embeddings": 32768,
     "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "rope_theta": 1000000.0, "use_sliding_window": False,
     "sliding_window": 4096, "max_window_layers": 80, "rope_scaling": None},
    (sliding_window_only_if_used, _mrope_as_default),
)  # fmt: skip
_QWEN3_VL_TEXT_4 = ConfigClass(
    "Qwen3VLTextConfig",
    _QWEN3_TEXT_4 | {"hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128},
)  # fmt: skip
_QWEN3_VL_MOE_TEXT_4 = ConfigClass(
    "Qwen3VLMoeTextConfig",
    _QWEN3_TEXT_4 | {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
                     "num_attention_heads": 16, "num_key_value_heads": 16, "decoder_sparse_step": 1,
                     "moe_intermediate_size": 1408, "num_experts_per_tok": 4, "num_experts": 60, "mlp_only_layers": []},
    (head_dim_from_hidden_size,),
)  # fmt: skip

FAMILY = Family(
    name="qwen_vl",
    configs={
        "qwen2_5_vl": ConfigClass("Qwen2_5_VLConfig", _COMPOSITE, text_config="qwen2_5_vl_text",
                                  vision_config="qwen2_5_vl_vision", transformers=5, before_5=_QWEN25_VL_4),
        "qwen2_5_vl_text": ConfigClass(
            "Qwen2_5_VLTextConfig",
            {"vocab_size": 152064, "hidden_act": "silu", "hidden_size": 8192, "intermediate_size": 29568,
             "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
             "max_position_embeddings": 32768, "rms_norm_eps": 1e-5, "use_sliding_window": False,
             "sliding_window": None, "max_window_layers": 80,
             "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}},
            transformers=5,
            before_5=_QWEN25_VL_TEXT_4,
        ),
        "qwen2_5_vl_vision": ConfigClass(
            "Qwen2_5_VLVisionConfig",
            _QWEN_VISION | {"depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "num_heads": 16,
                            "patch_size": 14, "out_hidden_size": 3584, "fullatt_block_indexes": [7, 15, 23, 31]},
            transformers=5,
        ),
        "qwen3_vl": ConfigClass("Qwen3VLConfig", _COMPOSITE, text_config="qwen3_vl_text",
                                vision_config="qwen3_vl_vision", transformers=5),
        "qwen3_vl_text": ConfigClass(
            "Qwen3VLTextConfig",
            _QWEN3_TEXT | {"hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
                           "num_attention_heads": 32, "num_key_value_heads": 32},
            transformers=5,
            before_5=_QWEN3_VL_TEXT_4,
        ),
        "qwen3_vl_vision": _QWEN3_VISION,
        "qwen3_vl_moe": ConfigClass("Qwen3VLMoeConfig", _COMPOSITE, text_config="qwen3_vl_moe_text",
                                    vision_config="qwen3_vl_moe_vision", transformers=5),
        "qwen3_vl_moe_text": ConfigClass(
            "Qwen3VLMoeTextConfig",
            _QWEN3_TEXT | {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
                           "num_attention_heads": 16, "num_key_value_heads": 16, "tie_word_embeddings": True,
                           "decoder_sparse_step": 1, "moe_intermediate_size": 1408, "num_experts_per_tok": 4,
                           "num_local_experts": 60, "mlp_only_layers": [], "sliding_window": None},
            transformers=5,
            before_5=_QWEN3_VL_MOE_TEXT_4,
        ),
        "qwen3_vl_moe_vision": _QWEN3_VISION,
    },
    conversions={
        "Qwen2_5_VLForConditionalGeneration": _QWEN25_VL,
        "Qwen3VLForConditionalGeneration": _QWEN3_VL,
        "Qwen3VLMoeForConditionalGeneration": _QWEN3_VL_MOE,
    },
    projectors={
        "Qwen2_5_VLForConditionalGeneration": _QWEN25_VL_VISION,
        "Qwen3VLForConditionalGeneration": _QWEN3_VL_VISION,
        "Qwen3VLMoeForConditionalGeneration": _QWEN3_VL_VISION,  # the same vision tower
    },
)  # fmt: skip
