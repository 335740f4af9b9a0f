"""Gemma 4 (text, and the language model of the multimodal models; dense, with per-layer inputs and a shared KV
cache, or mixture-of-experts): `Gemma4Model` of llama.cpp's converter; and the multimodal models' projector
(`Gemma4VisionAudioModel`: the vision encoder, and the audio encoder where the model has one, in one file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FormatError, UnsupportedError
from ..hf.config import CONFIG_NAME, ConfigClass, HFConfig
from ..hf.experts import Tensors, derived_tensor
from ..hf.kv import KV
from ..hf.parameters import LAYERS
from ..hf.projector import (
    PROJECTOR_LAYERS,
    ProjectorConfig,
    projector_config,
    write_audio_parameters,
    write_vision_parameters,
)
from ..hf.tokenizer import (
    TokenType,
    is_llama_hf_bpe,
    llama_hf_vocab,
    load_special_vocab,
    write_special_vocab,
)
from ..hf.torch_math import softplus
from .decoder import QK_NORM_NAMES, number
from .family import Conversion, Dims, Family, Transform
from .gemma import GEMMA_NAMES, GEMMA_SHARED_KV_REQUIRED, gemma3_parameters
from .vision import projector

#: The per-layer inputs (Gemma 3n's and 4's): their embeddings, projected and gated into each layer
PER_LAYER_INPUT_NAMES = {
    "model.embed_tokens_per_layer": "per_layer_token_embd",
    "model.per_layer_model_projection": "per_layer_model_proj",
    "model.per_layer_projection_norm": "per_layer_proj_norm",
    "model.layers.{bid}.per_layer_input_gate": "blk.{bid}.inp_gate",
    "model.layers.{bid}.per_layer_projection": "blk.{bid}.proj",
    "model.layers.{bid}.post_per_layer_input_norm": "blk.{bid}.post_norm",
}
_NAMES = GEMMA_NAMES | QK_NORM_NAMES | PER_LAYER_INPUT_NAMES | {
    "model.layers.{bid}.layer_scalar": "blk.{bid}.layer_output_scale",
    # the experts beside the MLP
    "model.layers.{bid}.router.proj": "blk.{bid}.ffn_gate_inp",
    "model.layers.{bid}.router.scale": "blk.{bid}.ffn_gate_inp.scale",
    "model.layers.{bid}.router.per_expert_scale": "blk.{bid}.ffn_down_exps.scale",
    "model.layers.{bid}.experts.gate_up_proj": "blk.{bid}.ffn_gate_up_exps",
    "model.layers.{bid}.experts.down_proj": "blk.{bid}.ffn_down_exps",
    "model.layers.{bid}.pre_feedforward_layernorm_2": "blk.{bid}.pre_ffw_norm_2",
    "model.layers.{bid}.post_feedforward_layernorm_1": "blk.{bid}.post_ffw_norm_1",
    "model.layers.{bid}.post_feedforward_layernorm_2": "blk.{bid}.post_ffw_norm_2",
}  # fmt: skip


def _suffix_weight(name: str) -> str | None:
    """`Gemma4Model.filter_tensors`: the layer scalars and the stacked experts get a `.weight` suffix."""
    if name.endswith(("per_dim_scale", "layer_scalar")):
        name += ".weight"
    if ".experts." in name and not name.endswith((".weight", ".weight_scale", ".weight_scale_2", ".input_scale")):
        name += ".weight"
    return name


def _full_attention(h: HFConfig, key: str, given: str) -> Any:
    """A full-attention layer's `key` (its head size, its KV heads): config.json's `given` key, else the first
    full-attention layer's entry in `per_layer_config` that has it."""
    if (value := h.get(given)) is not None:
        return value
    layer_types = h.get("layer_types") or []
    for index, layer in (h.get("per_layer_config") or {}).items():
        i = int(index)
        if i < len(layer_types) and layer_types[i] == "full_attention" and key in layer:
            return layer[key]
    return None


def _head_dim_full(h: HFConfig) -> int:
    head_dim = _full_attention(h, "head_dim", "global_head_dim")
    if head_dim is None:
        raise FormatError(CONFIG_NAME, None, "no head size for full attention (global_head_dim or per_layer_config)")
    return int(head_dim)


def _parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Gemma4Model.set_gguf_parameters` after Gemma 3's: shared KV layers, per-layer inputs, the sliding
    pattern, head sizes, KV heads and rope dimensions apart for full and sliding attention, expert and
    per-layer feed-forward sizes."""
    shared = number(h, "num_kv_shared_layers")
    kv.u32(f"{arch}.attention.shared_kv_layers", shared)
    kv.u32(f"{arch}.embedding_length_per_layer_input", h.get("hidden_size_per_layer_input") or 0)
    swa = [t == "sliding_attention" for t in h["layer_types"]]
    kv.array(f"{arch}.attention.sliding_window_pattern", swa, CONFIG_NAME)
    head_dim_full, head_dim_swa = _head_dim_full(h), number(h, "head_dim")
    kv.u32(f"{arch}.attention.key_length", head_dim_full)
    kv.u32(f"{arch}.attention.value_length", head_dim_full)
    kv.u32(f"{arch}.attention.key_length_swa", head_dim_swa)
    kv.u32(f"{arch}.attention.value_length_swa", head_dim_swa)
    if (expert_ff := h.find(("expert_intermediate_size", "moe_intermediate_size"), None)) is not None:
        kv.u32(f"{arch}.expert_feed_forward_length", expert_ff)
    n_blocks = h.find(LAYERS)
    if h.get("use_double_wide_mlp", False):
        ff = number(h, "intermediate_size")
        kv.array(f"{arch}.feed_forward_length", [ff if i < n_blocks - shared else ff * 2 for i in range(n_blocks)],
                 CONFIG_NAME)  # fmt: skip
    kv_full = _full_attention(h, "num_key_value_heads", "num_global_key_value_heads")
    kv_swa = h.get("num_key_value_heads")
    if kv_full is not None and kv_swa is not None:
        kv.array(f"{arch}.attention.head_count_kv", [kv_swa if s else kv_full for s in swa], CONFIG_NAME)
    partial_swa = h.get("rope_parameters", {}).get("partial_rotary_factor", 1.0)
    kv.u32(f"{arch}.rope.dimension_count", head_dim_full)
    kv.u32(f"{arch}.rope.dimension_count_swa", int(head_dim_swa * partial_swa))


def _rope_freqs(h: HFConfig, rope: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """`Gemma4Model.generate_extra_tensors`: full attention's "proportional" rope rotates part of each head;
    the other dimensions get a frequency factor of 1e30, which stops their rotation."""
    full = rope.get("full_attention", {})
    if full.get("rope_type") != "proportional":
        raise UnsupportedError(f"{CONFIG_NAME}: Gemma 4's full attention rope type is {full.get('rope_type')!r}; "
                               "the converter takes only 'proportional'")  # fmt: skip
    head_dim = _head_dim_full(h)
    rotated = int(head_dim * number(full, "partial_rotary_factor") / 2)
    values = [1.0] * rotated + [1e30] * (int(head_dim / 2) - rotated)
    return [("rope_freqs.weight", np.array(values, dtype=np.float32))]


#: Tokens the converter marks user-defined, so that llama.cpp renders them for the chat parser.
_VISIBLE = frozenset(("<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
                      "<tool_response|>", '<|"|>'))  # fmt: skip


def _vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`Gemma4Model.set_vocab`: `LlamaHfVocab`'s tokens, the chat parser's tokens user-defined, model "gemma4",
    the special vocabulary with merges, no space prefix, BOS added."""
    if not is_llama_hf_bpe(folder):
        raise UnsupportedError(f"{folder}: Gemma 4's tokenizer is read from tokenizer.json, a BPE model with "
                               "byte fallback and a Sequence decoder; this folder has none")  # fmt: skip
    vocab = llama_hf_vocab(folder, h)
    for i, token in enumerate(vocab.tokens):
        if token in _VISIBLE:
            vocab.types[i] = TokenType.USER_DEFINED
    kv.string("tokenizer.ggml.model", "gemma4")
    kv.strings("tokenizer.ggml.tokens", vocab.tokens)
    kv.float32s("tokenizer.ggml.scores", vocab.scores)
    kv.int32s("tokenizer.ggml.token_type", vocab.types)
    write_special_vocab(kv, load_special_vocab(folder, load_merges=True), folder / "tokenizer_config.json")
    kv.bool("tokenizer.ggml.add_space_prefix", False)
    kv.bool("tokenizer.ggml.add_bos_token", True)


_GEMMA4 = Conversion(
    gguf="gemma4",
    tensor_names=_NAMES,
    required=GEMMA_SHARED_KV_REQUIRED,
    vocab=_vocab,
    filters=(_suffix_weight,),
    extra_tensors=(_rope_freqs,),
    parameters=(gemma3_parameters, _parameters),
)

# --- the projector: vision and audio encoders ------------------------------------------------------------------------

_CLIP_RANGES = tuple(f"{end}_{bound}" for end in ("input", "output") for bound in ("min", "max"))


def _clippable(names: dict[str, str]) -> dict[str, str]:
    """Gemma 4's clippable linears (`Gemma4ClippableLinear`: the weight under `.linear`, and the scalar ranges
    it clips to beside it where its config says so) -> the clip tensor and its ranges."""
    out: dict[str, str] = {}
    for hf, gguf in names.items():
        out[hf + ".linear"] = gguf
        out |= {f"{hf}.{r}": f"{gguf}.{r}" for r in _CLIP_RANGES}
    return out


_V, _VL, _A, _AL = "model.vision_tower.", "model.vision_tower.encoder.layers.{bid}.", "model.audio_tower.", \
    "model.audio_tower.layers.{bid}."  # fmt: skip
_PROJECTOR_NAMES = {
    _V + "std_bias": "v.std_bias",
    _V + "std_scale": "v.std_scale",
    _V + "patch_embedder.input_proj": "v.patch_embd",
    _V + "patch_embedder.position_embedding_table": "v.position_embd.weight",
    _VL + "self_attn.q_norm": "v.blk.{bid}.attn_q_norm",
    _VL + "self_attn.k_norm": "v.blk.{bid}.attn_k_norm",
    _VL + "input_layernorm": "v.blk.{bid}.ln1",
    _VL + "post_attention_layernorm": "v.blk.{bid}.attn_post_norm",
    _VL + "pre_feedforward_layernorm": "v.blk.{bid}.ln2",
    _VL + "post_feedforward_layernorm": "v.blk.{bid}.ffn_post_norm",
    _VL + "layer_scalar": "v.blk.{bid}.out_scale.weight",
    **_clippable({
        _VL + "self_attn.q_proj": "v.blk.{bid}.attn_q", _VL + "self_attn.k_proj": "v.blk.{bid}.attn_k",
        _VL + "self_attn.v_proj": "v.blk.{bid}.attn_v", _VL + "self_attn.o_proj": "v.blk.{bid}.attn_out",
        _VL + "mlp.gate_proj": "v.blk.{bid}.ffn_gate", _VL + "mlp.up_proj": "v.blk.{bid}.ffn_up",
        _VL + "mlp.down_proj": "v.blk.{bid}.ffn_down",
    }),
    "model.embed_vision.embedding_projection": "mm.input_projection",
    _A + "subsample_conv_projection.layer{bid}.conv": "a.conv1d.{bid}",
    _A + "subsample_conv_projection.layer{bid}.norm": "a.conv1d.{bid}.norm",
    _A + "subsample_conv_projection.input_proj_linear": "a.input_projection",
    _AL + "feed_forward1.pre_layer_norm": "a.blk.{bid}.ffn_norm",
    _AL + "feed_forward1.post_layer_norm": "a.blk.{bid}.ffn_post_norm",
    _AL + "feed_forward2.pre_layer_norm": "a.blk.{bid}.ffn_norm_1",
    _AL + "feed_forward2.post_layer_norm": "a.blk.{bid}.ffn_post_norm_1",
    _AL + "self_attn.per_dim_scale": "a.blk.{bid}.per_dim_scale.weight",
    _AL + "self_attn.relative_k_proj": "a.blk.{bid}.attn_k_rel",
    _AL + "lconv1d.depthwise_conv1d": "a.blk.{bid}.conv_dw",
    _AL + "lconv1d.pre_layer_norm": "a.blk.{bid}.conv_norm",
    _AL + "lconv1d.conv_norm": "a.blk.{bid}.norm_conv",
    _AL + "norm_pre_attn": "a.blk.{bid}.attn_pre_norm",
    _AL + "norm_post_attn": "a.blk.{bid}.attn_post_norm",
    _AL + "norm_out": "a.blk.{bid}.ln2",
    **_clippable({
        _AL + "feed_forward1.ffw_layer_1": "a.blk.{bid}.ffn_up",
        _AL + "feed_forward1.ffw_layer_2": "a.blk.{bid}.ffn_down",
        _AL + "feed_forward2.ffw_layer_1": "a.blk.{bid}.ffn_up_1",
        _AL + "feed_forward2.ffw_layer_2": "a.blk.{bid}.ffn_down_1",
        _AL + "self_attn.q_proj": "a.blk.{bid}.attn_q", _AL + "self_attn.k_proj": "a.blk.{bid}.attn_k",
        _AL + "self_attn.v_proj": "a.blk.{bid}.attn_v", _AL + "self_attn.post": "a.blk.{bid}.attn_out",
        _AL + "lconv1d.linear_start": "a.blk.{bid}.conv_pw1", _AL + "lconv1d.linear_end": "a.blk.{bid}.conv_pw2",
    }),
    _A + "output_proj": "a.pre_encode.out",
    "model.embed_audio.embedding_projection": "mm.a.input_projection",
}  # fmt: skip
# an encoder's blocks: with two encoders the converter maps any block number below 128 and checks none
_PROJECTOR_REQUIRED: dict[str, Dims] = {
    "v.patch_embd.weight": ("hidden_size", None, "patch_size", "patch_size"),
    "v.position_embd.weight": (None, None, "hidden_size"),
    "mm.input_projection.weight": (None, "hidden_size"),
}


def _audio(h: HFConfig) -> dict[str, Any]:
    """`Gemma4VisionAudioModel`'s audio hyperparameters: the audio config with its mel bins (`feat_in`) and its
    feed-forward width (4 x hidden_size) set; empty where the model has no audio encoder."""
    audio = projector_config(h).model.get("audio_config")
    if not audio:
        return {}
    if not isinstance(audio, dict):
        raise FormatError(CONFIG_NAME, None, "audio_config is not an object")
    audio = {**audio, "feat_in": audio.get("input_feat_size", 128)}
    if "hidden_size" in audio:
        audio["intermediate_size"] = number(audio, "hidden_size") * 4
    return audio


def _projector_blocks(h: HFConfig, names: list[str]) -> int:
    """`MmprojModel`'s block count: 128 with two encoders (each maps its own blocks), else the vision config's."""
    return 128 if _audio(h) else h.find(PROJECTOR_LAYERS, None)


def _vision_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """The common clip keys, the vision config's image size 224 (which the encoder does not use)."""
    h = projector_config(h)
    vision = ProjectorConfig(h | {"image_size": 224}, h.text_hidden_size, h.preprocessor, h.model)
    write_vision_parameters(kv, arch, vision, rope, file_type)


def _projector_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Gemma4VisionAudioModel.set_gguf_parameters` after the vision keys: the audio encoder's sizes, the
    projector types, the norms' epsilons (the default where the configs name none), the mel bins."""
    audio = _audio(h)
    if audio:
        write_audio_parameters(kv, h, audio)
    kv.string("clip.vision.projector_type", "gemma4v")
    kv.f32("clip.vision.attention.layer_norm_epsilon", number(h, "layer_norm_eps", 1e-6))
    if audio:
        kv.string("clip.audio.projector_type", "gemma4a")
        kv.u32("clip.audio.num_mel_bins", number(audio, "feat_in"))
        kv.f32("clip.audio.attention.layer_norm_epsilon", number(audio, "layer_norm_eps", 1e-6))


def _reshaped(tensors: Tensors, h: HFConfig) -> Tensors:
    """`Gemma4VisionAudioModel.modify_tensors`' new shapes: scalars (the clipping ranges) as 1-D tensors, the
    depthwise convolution's kernel [C, 1, K] as [C, K], and the patch embedding's linear projection
    [n, p * p * 3] as the convolution kernel [n, 3, p, p] it stands for."""
    out: Tensors = []
    for name, t in tensors:
        if not t.shape:
            shape, read = (1,), (lambda t=t: t.read().reshape(1))
        elif name.endswith("depthwise_conv1d.weight"):
            if len(t.shape) != 3 or t.shape[1] != 1:
                raise FormatError(t.file, None, f"tensor {name!r} {list(t.shape)}: not a depthwise kernel [C, 1, K]")
            shape, read = (t.shape[0], t.shape[2]), (lambda t=t: t.read()[:, 0])
        elif name.endswith("patch_embedder.input_proj.weight"):
            patch = int((t.shape[-1] // 3) ** 0.5) if len(t.shape) == 2 else 0
            if patch < 1 or t.shape[1] != 3 * patch * patch:
                raise FormatError(t.file, None, f"tensor {name!r} {list(t.shape)}: not a projection of square "
                                                "3-channel patches [n, p * p * 3]")  # fmt: skip
            shape = (t.shape[0], 3, patch, patch)
            read = lambda t=t, p=patch: t.read().reshape(t.shape[0], p, p, 3).transpose(0, 3, 1, 2)  # noqa: E731
        else:
            out.append((name, t))
            continue
        out.append((name, derived_tensor(t, name, shape, read)))
    return out


def _softplus(w: np.ndarray, h: HFConfig) -> np.ndarray:
    """torch's softplus, in float32 (then the tensor's own float type, as torch computes a float16 one)."""
    return softplus(w).astype(w.dtype)


def _projector_types(hf_name: str, gguf_name: str, matrix_type: str) -> str | None:
    """`Gemma4VisionAudioModel.tensor_force_quant`: the audio encoder's convolutions (and, as the converter
    reads its test, every audio tensor with `_conv` in its name) and the position table in F32."""
    audio = "audio_tower" in hf_name or "embed_audio" in hf_name
    if audio and (".conv" in hf_name or ("_conv" in hf_name and ".weight" in hf_name)):
        return "F32"
    if "position_embedding_table" in hf_name:
        return "F32"
    return None


_GEMMA4_PROJECTOR = projector(
    tensor_names=_PROJECTOR_NAMES,
    required=_PROJECTOR_REQUIRED,
    rewrites=(_reshaped,),
    # the per-dimension query scale is stored before its softplus
    transforms=(Transform(("per_dim_scale",), _softplus, lambda shape, h: None),),
    text_parameters=_vision_parameters,
    parameters=(_projector_parameters,),
    forced_types=(_projector_types,),
    blocks=_projector_blocks,
)

# --- transformers 5.25's Gemma4TextConfig --------------------------------------------------------------------------


def _layer_types(h: dict[str, Any]) -> None:
    """Five sliding-window layers to one full-attention layer unless given; the last one full attention."""
    if h.get("layer_types") is None:
        h["layer_types"] = ["sliding_attention" if (i + 1) % 6 else "full_attention"
                            for i in range(h["num_hidden_layers"])]  # fmt: skip
    if h["layer_types"] and h["layer_types"][-1] != "full_attention":
        h["layer_types"][-1] = "full_attention"


def _rope(h: dict[str, Any]) -> None:
    if h.get("rope_parameters") is None:
        h["rope_parameters"] = {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
        }


def _per_layer_config(h: dict[str, Any]) -> None:
    """`global_head_dim` and `num_global_key_value_heads` are read once, into the full-attention layers'
    `per_layer_config` unless the file has one (the saved config keeps neither key)."""
    head_dim = h.pop("global_head_dim", 512)
    kv_heads = h.pop("num_global_key_value_heads", None)
    if "per_layer_config" not in h:
        overrides = {"head_dim": head_dim}
        if kv_heads is not None and h.get("attention_k_eq_v", True):
            overrides["num_key_value_heads"] = kv_heads
        h["per_layer_config"] = {i: dict(overrides) for i, t in enumerate(h["layer_types"]) if t == "full_attention"}


def _bidirectional(h: dict[str, Any]) -> None:
    if h.get("use_bidirectional_attention") == "all":
        h["is_causal"] = False


FAMILY = Family(
    name="gemma4",
    configs={
        "gemma4_text": ConfigClass(
            "Gemma4TextConfig",
            {"vocab_size": 262_144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
             "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 131_072,
             "rms_norm_eps": 1e-6, "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2,
             "tie_word_embeddings": True, "rope_parameters": None, "attention_bias": False, "sliding_window": 512,
             "layer_types": None, "final_logit_softcapping": None, "use_bidirectional_attention": None,
             "vocab_size_per_layer_input": 262_144, "hidden_size_per_layer_input": 256, "attention_k_eq_v": False,
             "num_kv_shared_layers": 0, "enable_moe_block": False, "use_double_wide_mlp": False,
             "num_experts": None, "top_k_experts": None, "moe_intermediate_size": None},
            (_bidirectional, _layer_types, _rope, _per_layer_config),
            transformers=5,
        ),
        "gemma4": ConfigClass(
            "Gemma4Config",
            {"boi_token_id": 255_999, "eoi_token_id": 258_882, "image_token_id": 258_880, "video_token_id": 258_884,
             "boa_token_id": 256_000, "eoa_token_index": 258_883, "audio_token_id": 258_881,
             "tie_word_embeddings": True},
            text_config="gemma4_text",
            transformers=5,
        ),
    },
    conversions={
        "Gemma4ForCausalLM": _GEMMA4,
        "Gemma4ForConditionalGeneration": _GEMMA4,  # its text model; the vision and audio towers are its projector's
    },
    projectors={"Gemma4ForConditionalGeneration": _GEMMA4_PROJECTOR},
)  # fmt: skip
