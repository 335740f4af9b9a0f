"""Gemma 2 and Gemma 3 (text, and the language model of the multimodal 4B-27B): `Gemma2Model` and
`Gemma3Model` of llama.cpp's converter, Gemma 3's projector (`Gemma3VisionModel`: SigLIP and its projection),
and transformers' Gemma 3 text class for `--to hf`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FormatError, UnsupportedError
from ..hf.config import CONFIG_NAME, ConfigClass, HFConfig
from ..hf.kv import KV
from ..hf.parameters import LAYERS, rope_parameters
from ..hf.projector import projector_config, write_vision_parameters
from ..hf.tokenizer import SPM_MODEL, write_bpe_vocab, write_sentencepiece_vocab
from .decoder import DECODER_CONFIG, DECODER_NAMES, DECODER_REQUIRED, QK_NORM_NAMES, H, number, rope_type_from_type
from .family import Conversion, Dims, Export, Family, Transform
from .vision import SIGLIP_REQUIRED, projector, siglip_names

#: Gemma's decoder: the Llama names, and norms around attention and the feed-forward
GEMMA_NAMES = DECODER_NAMES | {
    "model.layers.{bid}.post_attention_layernorm": "blk.{bid}.post_attention_norm",
    "model.layers.{bid}.pre_feedforward_layernorm": "blk.{bid}.ffn_norm",
    "model.layers.{bid}.post_feedforward_layernorm": "blk.{bid}.post_ffw_norm",
}
_REQUIRED: dict[str, Dims] = {
    **{k: v for k, v in DECODER_REQUIRED.items() if k != "token_embd.weight"},
    "token_embd.weight": ("vocab_size", H),  # Gemma 3's converter cuts a longer one to the vocabulary: refused here
    "blk.{bid}.post_attention_norm.weight": (H,),
    "blk.{bid}.post_ffw_norm.weight": (H,),
}
#: What every layer of Gemma 3n and Gemma 4 has: K and V are not in the layers that share another's KV cache (nor V
#: in Gemma 4's full attention), and the MLP's width is per layer
GEMMA_SHARED_KV_REQUIRED: dict[str, Dims] = {
    "token_embd.weight": ("vocab_size", H),
    "output_norm.weight": (H,),
    "blk.{bid}.attn_norm.weight": (H,),
    "blk.{bid}.attn_q.weight": (None, H),
    "blk.{bid}.attn_output.weight": (H, None),
    "blk.{bid}.post_attention_norm.weight": (H,),
    "blk.{bid}.ffn_norm.weight": (H,),
    "blk.{bid}.post_ffw_norm.weight": (H,),
    "blk.{bid}.ffn_gate.weight": (None, H),
    "blk.{bid}.ffn_up.weight": (None, H),
    "blk.{bid}.ffn_down.weight": (H, None),
}


def _plus_one(w: np.ndarray, h: HFConfig) -> np.ndarray:
    return w + 1  # in the tensor's own float16 or float32, as torch does it


def _minus_one(w: np.ndarray, h: HFConfig) -> np.ndarray:
    return w - np.float32(1)


# Gemma's RMS norms scale by (1 + weight); GGUF stores the factor itself
_NORMS = Transform(("norm.weight",), _plus_one, lambda shape, h: None, _minus_one)


def _drop_lm_head(name: str) -> str | None:
    """`Gemma2Model.filter_tensors`: llama.cpp ties Gemma 2's output to the embedding, whatever the file has."""
    return None if name == "lm_head.weight" else name


def _gemma2_text_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """`Gemma2Model.set_gguf_parameters` (none of the common keys; no rope base)."""
    kv.u32(f"{arch}.context_length", number(h, "max_position_embeddings"))
    kv.u32(f"{arch}.embedding_length", number(h, "hidden_size"))
    kv.u32(f"{arch}.block_count", h.find(LAYERS))
    kv.u32(f"{arch}.feed_forward_length", number(h, "intermediate_size"))
    kv.u32(f"{arch}.attention.head_count", number(h, "num_attention_heads"))
    kv_heads = "num_key_value_heads" if "num_key_value_heads" in h else "num_attention_heads"
    kv.u32(f"{arch}.attention.head_count_kv", number(h, kv_heads))
    kv.f32(f"{arch}.attention.layer_norm_rms_epsilon", number(h, "rms_norm_eps"))
    kv.u32(f"{arch}.attention.key_length", number(h, "head_dim"))
    kv.u32(f"{arch}.attention.value_length", number(h, "head_dim"))
    kv.u32("general.file_type", file_type)


def _gemma2_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    kv.f32(f"{arch}.attn_logit_softcapping", number(h, "attn_logit_softcapping"))
    kv.f32(f"{arch}.final_logit_softcapping", number(h, "final_logit_softcapping"))
    kv.u32(f"{arch}.attention.sliding_window", number(h, "sliding_window"))


def gemma3_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Gemma3Model.set_gguf_parameters` after the common keys: some set again (they keep their places) with
    Gemma 3's defaults, the final soft-capping and the sliding window."""
    rope = rope_parameters(h)
    kv.u32(f"{arch}.context_length", number(h, "max_position_embeddings", 131072))
    kv.u32(f"{arch}.attention.head_count", number(h, "num_attention_heads", 8))
    kv.f32(f"{arch}.attention.layer_norm_rms_epsilon", number(h, "rms_norm_eps", 1e-6))
    kv.u32(f"{arch}.attention.key_length", number(h, "head_dim", 256))
    kv.u32(f"{arch}.attention.value_length", number(h, "head_dim", 256))
    kv.f32(f"{arch}.rope.freq_base", number(rope.get("full_attention", rope), "rope_theta", 1_000_000.0))
    if h.get("attn_logit_softcapping") is not None:
        raise UnsupportedError(f"{folder / CONFIG_NAME}: Gemma 3 has no attention soft-capping "
                               "(attn_logit_softcapping is set)")  # fmt: skip
    if h.get("final_logit_softcapping"):
        kv.f32(f"{arch}.final_logit_softcapping", number(h, "final_logit_softcapping"))
    if h.get("sliding_window_pattern") != 1:
        kv.u32(f"{arch}.attention.sliding_window", number(h, "sliding_window"))
    kv.u32(f"{arch}.attention.head_count_kv", number(h, "num_key_value_heads", 4))


def _gemma2_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`Gemma2Model.set_vocab`: SentencePiece, and no space prefix."""
    write_sentencepiece_vocab(kv, folder, h)
    kv.bool("tokenizer.ggml.add_space_prefix", False)


def gemma3_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`Gemma3Model.set_vocab`: SentencePiece without space prefix if there is a tokenizer.model, else BPE."""
    if (folder / SPM_MODEL).is_file():
        _gemma2_vocab(kv, folder, h)
    else:
        write_bpe_vocab(kv, folder, h)


_GEMMA2 = Conversion(
    gguf="gemma2",
    tensor_names=GEMMA_NAMES,
    required=_REQUIRED,
    vocab=_gemma2_vocab,
    filters=(_drop_lm_head,),
    transforms=(_NORMS,),
    text_parameters=_gemma2_text_parameters,
    parameters=(_gemma2_parameters,),
)
_GEMMA3 = Conversion(
    gguf="gemma3",
    tensor_names=GEMMA_NAMES | QK_NORM_NAMES,
    required=_REQUIRED,
    vocab=gemma3_vocab,
    transforms=(_NORMS,),
    parameters=(gemma3_parameters,),
)

_VISION_TOWERS = ("multi_modal_projector.", "vision_tower.", "multimodal_projector.", "vision_model.")


def _gemma3_vision_tensors(name: str) -> str | None:
    """`Gemma3VisionModel.filter_tensors`: the vision tower and projector only (no SigLIP head); the projector's
    `mm_input_projection_weight` named as a weight."""
    if "vision_model.head." in name or not name.startswith(_VISION_TOWERS):
        return None
    return name.replace("_weight", ".weight")


def _gemma3_vision_types(hf_name: str, gguf_name: str, matrix_type: str) -> str | None:
    """`Gemma3VisionModel.tensor_force_quant`: the projection in F16 (llama.cpp issue 13025), the embeddings
    in F32."""
    if "input_projection" in hf_name:
        return "F16"
    if ".embeddings." in hf_name:
        return "F32"
    return None


def _gemma3_vision_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`Gemma3VisionModel.set_gguf_parameters` after the common clip keys: the projector type, SigLIP's norm
    epsilon and GELU, and the pooling factor where it is not the real models' 4 (image tokens per side from
    the processor's `image_seq_length`)."""
    h = projector_config(h)
    kv.string("clip.projector_type", "gemma3")
    kv.f32("clip.vision.attention.layer_norm_epsilon", number(h, "layer_norm_eps", 1e-6))
    kv.bool("clip.use_gelu", True)
    tokens = h.preprocessor.get("image_seq_length", 256)
    per_side = int(tokens**0.5) if isinstance(tokens, int) and not isinstance(tokens, bool) else 0
    if per_side < 1:
        raise FormatError(folder / "processor_config.json", None, f"image_seq_length is {tokens!r}, not a count")
    scale = (number(h, "image_size") // number(h, "patch_size")) // per_side
    if scale > 0 and scale != 4:
        kv.u32("clip.vision.projector.scale_factor", scale)


_GEMMA3_VISION = projector(
    tensor_names=siglip_names("vision_tower.vision_model.") | {
        "multi_modal_projector.mm_input_projection": "mm.input_projection",
        "multi_modal_projector.mm_soft_emb_norm": "mm.soft_emb_norm",
    },
    required=SIGLIP_REQUIRED | {"mm.input_projection.weight": ("hidden_size", None),
                                "mm.soft_emb_norm.weight": ("hidden_size",)},
    filters=(_gemma3_vision_tensors,),
    # only the projector's norm is Gemma's (1 + weight); SigLIP's are layer norms, stored as they are
    transforms=(Transform(("soft_emb_norm.weight",), _plus_one, lambda shape, h: None, _minus_one),),
    text_parameters=write_vision_parameters,
    parameters=(_gemma3_vision_parameters,),
    forced_types=(_gemma3_vision_types,),
)  # fmt: skip

_DEFAULTS = {"rms_norm_eps": 1e-6, "tie_word_embeddings": True, "bos_token_id": 2, "eos_token_id": 1,
             "pad_token_id": 0, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
             "num_attention_heads": 8, "head_dim": 256, "num_key_value_heads": 4, "sliding_window": 4096}  # fmt: skip
_GEMMA3_CONFIG = {
    "attention.sliding_window": "sliding_window",
    "rope.freq_base_swa": "rope_local_base_freq",
    "final_logit_softcapping": "final_logit_softcapping",
    "attn_logit_softcapping": "attn_logit_softcapping",
}

FAMILY = Family(
    name="gemma",
    configs={
        "gemma2": ConfigClass(
            "Gemma2Config",
            _DEFAULTS | {"vocab_size": 256000, "max_position_embeddings": 8192, "rope_theta": 10000.0,
                         "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0},
        ),
        "gemma3_text": ConfigClass(
            "Gemma3TextConfig",
            _DEFAULTS | {"vocab_size": 262208, "max_position_embeddings": 131072, "rope_theta": 1_000_000.0,
                         "rope_local_base_freq": 10000.0, "rope_scaling": None, "final_logit_softcapping": None,
                         "attn_logit_softcapping": None},
            (rope_type_from_type,),
        ),
        "gemma3": ConfigClass(
            "Gemma3Config",
            {"mm_tokens_per_image": 256, "boi_token_index": 255999, "eoi_token_index": 256000,
             "image_token_index": 262144, "tie_word_embeddings": True},
            text_config="gemma3_text",
            vision_config="siglip_vision_model",
        ),
        "siglip_vision_model": ConfigClass(
            "SiglipVisionConfig",
            {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
             "num_channels": 3, "image_size": 224, "patch_size": 16, "hidden_act": "gelu_pytorch_tanh",
             "layer_norm_eps": 1e-6, "attention_dropout": 0.0, "vision_use_head": True},
        ),
    },
    conversions={
        "Gemma2ForCausalLM": _GEMMA2,
        "Gemma3ForCausalLM": _GEMMA3,
        "Gemma3ForConditionalGeneration": _GEMMA3,  # its text model; the vision tower is its projector's
    },
    projectors={"Gemma3ForConditionalGeneration": _GEMMA3_VISION},
    exports={
        "gemma3": Export("Gemma3ForCausalLM", "gemma3_text", _GEMMA3, "gemma",
                         DECODER_CONFIG | _GEMMA3_CONFIG | {"attention.key_length": "head_dim"}),
    },
)  # fmt: skip
