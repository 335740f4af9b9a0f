"""Every architecture the llama.cpp engine knows, one entry each in `ARCHITECTURES`: the function that builds its
graph (in the module of its family) and what of its hyperparameters llama.cpp reads. Another architecture
llama.cpp knows gets the generic entry (`generic`, its estimate marked approximate); `architecture` and
`read_hparams` refuse one llama.cpp does not know.
"""

from __future__ import annotations

from collections.abc import Mapping

from ....errors import FormatError, UnsupportedError
from ....model import ModelFile
from ..hparams import SWA_CHUNKED, SWA_SYMMETRIC, LlamaCppHParams
from . import (
    bert,
    cohere,
    decoder,
    deepseek,
    falcon_h1,
    gemma,
    generic,
    glm,
    gpt_oss,
    granite,
    hunyuan,
    kimi_linear,
    lfm2,
    llama4,
    mamba,
    minimax,
    nemotron_h,
    phi,
    qwen_next,
    rwkv,
)
from .entry import LlamaCppArchitecture, SlidingWindow

_ROUTING = {  # how experts are chosen and weighted, where the architecture reads it from the file
    "expert_gating_func": "expert_gating_func",
    "expert_weights_norm": "expert_weights_norm",
    "expert_weights_scale": "expert_weights_scale",
}

_GRANITE = LlamaCppArchitecture(
    granite.granite,
    experts=True,
    required=("logit_scale",),
    required_values=("logit_scale",),
    flags={
        "embedding_scale": "embedding_scale",
        "residual_scale": "residual_scale",
        "logit_scale": "logit_scale",
        "rope": "rope.scaling.finetuned",
    },
    flag_defaults={"rope": 1.0},  # granite ropes unless rope.scaling.finetuned says false
)
_XIELU = tuple(f"xielu.{name}" for name in ("alpha_n", "alpha_p", "beta", "eps"))  # apertus' activation, per layer

_DEEPSEEK2 = LlamaCppArchitecture(
    deepseek.deepseek2,
    experts=True,
    mla=True,
    flags={**_ROUTING, "attn_temperature_scale": "attention.temperature_scale"},
)

ARCHITECTURES: Mapping[str, LlamaCppArchitecture] = {
    "llama": LlamaCppArchitecture(decoder.llama, experts=True),
    "mistral3": LlamaCppArchitecture(decoder.mistral3, flags={"attn_temperature_scale": "attention.temperature_scale"}),
    "qwen2": LlamaCppArchitecture(decoder.qwen2),
    "qwen3": LlamaCppArchitecture(decoder.qwen3),
    "qwen3moe": LlamaCppArchitecture(decoder.qwen3, experts=True),
    "qwen2vl": LlamaCppArchitecture(decoder.qwen2vl, mrope=True),
    "qwen3vl": LlamaCppArchitecture(decoder.qwen3, mrope=True, deepstack=True),
    "qwen3vlmoe": LlamaCppArchitecture(decoder.qwen3, mrope=True, deepstack=True, experts=True),
    "gemma2": LlamaCppArchitecture(
        gemma.gemma2,
        swa=SlidingWindow(2, default_window=4096),
        flags={"attn_softcap": "attn_logit_softcapping", "final_softcap": "final_logit_softcapping"},
        flag_defaults={"attn_softcap": 50.0, "final_softcap": 30.0},  # llama_hparams' defaults: gemma2 always caps
    ),
    "gemma3": LlamaCppArchitecture(
        gemma.gemma3, swa=SlidingWindow(6), flags={"final_softcap": "final_logit_softcapping"}
    ),
    "gemma3n": LlamaCppArchitecture(gemma.gemma3n, swa=SlidingWindow(5, window_required=True), kv_layers=20),
    "gemma4": LlamaCppArchitecture(
        gemma.gemma4,
        swa=SlidingWindow(0, window_required=True, pattern_required=True),
        experts=True,  # 26B-A4B's, beside the dense FFN
        shared_kv=True,
        per_layer_input=True,
        rope_freqs_full_attention=True,
        required=("attention.key_length_swa", "attention.value_length_swa"),
        flags={"final_softcap": "final_logit_softcapping"},
        flag_defaults={"final_softcap": 30.0},  # llama_hparams' default, which gemma4 keeps without the key
    ),
    "gpt-oss": LlamaCppArchitecture(gpt_oss.gpt_oss, swa=SlidingWindow(2, window_required=True), experts=True),
    "phi3": LlamaCppArchitecture(phi.phi3),
    "phimoe": LlamaCppArchitecture(phi.phi3, experts=True),  # llama.cpp's phimoe runs phi3's graph
    "minimax-m2": LlamaCppArchitecture(
        minimax.minimax_m2, experts=True, flags={"expert_gating_func": "expert_gating_func"}
    ),
    "deepseek2": _DEEPSEEK2,
    "mistral4": _DEEPSEEK2,  # llama.cpp's mistral4 is deepseek2's loader and graph
    "glm4moe": LlamaCppArchitecture(glm.glm4moe, experts=True, flags=_ROUTING),
    "deepseek32": LlamaCppArchitecture(
        deepseek.deepseek32,
        experts=True,
        mla=True,
        dsa="every",
        required=("expert_gating_func",),
        flags=_ROUTING,
        nextn_loaded=("exp_probs_b.bias",),
    ),
    # llama.cpp's glm-dsa is deepseek32's loader and graph, with GLM-5.2's shared indexers and sigmoid routing unless
    # the file says otherwise
    "glm-dsa": LlamaCppArchitecture(
        deepseek.deepseek32, experts=True, mla=True, dsa="glm", flags=_ROUTING, nextn_loaded=("exp_probs_b.bias",)
    ),
    "llama4": LlamaCppArchitecture(
        llama4.llama4,
        swa=SlidingWindow(4, type=SWA_CHUNKED, default_window=8192, fixed_window=True),
        experts=True,
        required=("interleave_moe_layer_step",),
    ),
    "granitehybrid": LlamaCppArchitecture(
        granite.granite_hybrid,
        recurrent="no_kv_heads",
        experts=True,
        flags={
            "embedding_scale": "embedding_scale",
            "residual_scale": "residual_scale",
            "logit_scale": "logit_scale",
            "rope": "rope.scaling.finetuned",
        },
        flag_defaults={"rope": 1.0},  # granite hybrids rope unless rope.scaling.finetuned says false
    ),
    "qwen3next": LlamaCppArchitecture(qwen_next.qwen3next, recurrent="interval", experts=True, gated_q=True),
    "qwen35": LlamaCppArchitecture(qwen_next.qwen35, recurrent="interval", gated_q=True),
    "qwen35moe": LlamaCppArchitecture(qwen_next.qwen35, recurrent="interval", experts=True, gated_q=True),
    "qwen4exp": LlamaCppArchitecture(
        qwen_next.qwen4exp, recurrent="interval", experts=True, gated_q=True, mrope=True, qsa=True
    ),
    "mamba": LlamaCppArchitecture(mamba.mamba, recurrent="all", flags={"ssm_dt_b_c_rms": "ssm.dt_b_c_rms"}),
    "mamba2": LlamaCppArchitecture(mamba.mamba2, recurrent="all"),
    "rwkv6": LlamaCppArchitecture(
        rwkv.rwkv6,
        recurrent="all",
        wkv=True,
        required=("time_mix_extra_dim", "time_decay_extra_dim"),
        flags={"rescale_every_n_layers": "rescale_every_n_layers"},
    ),
    "rwkv7": LlamaCppArchitecture(
        rwkv.rwkv7,
        recurrent="all",
        wkv=True,
        required=(
            "attention.decay_lora_rank",
            "attention.iclr_lora_rank",
            "attention.value_residual_mix_lora_rank",
        ),
    ),
    "bert": LlamaCppArchitecture(bert.bert, causal=False, tied_output=False),
    "nomic-bert": LlamaCppArchitecture(bert.bert_rope, causal=False, tied_output=False),
    "jina-bert-v3": LlamaCppArchitecture(bert.bert_rope, causal=False, tied_output=False),
    "gemma-embedding": LlamaCppArchitecture(
        gemma.gemma_embedding,
        swa=SlidingWindow(6, type=SWA_SYMMETRIC, window_required=True),
        causal=False,  # the converter writes no attention.causal; llama.cpp sets it false for this architecture
    ),
    "lfm2": LlamaCppArchitecture(lfm2.lfm2, recurrent="no_kv_heads", shortconv=True, output_norm_embd=True),
    "lfm2moe": LlamaCppArchitecture(
        lfm2.lfm2, recurrent="no_kv_heads", shortconv=True, output_norm_embd=True, experts=True, flags=_ROUTING
    ),
    "falcon-h1": LlamaCppArchitecture(falcon_h1.falcon_h1, recurrent="parallel"),
    "nemotron_h": LlamaCppArchitecture(nemotron_h.nemotron_h, recurrent="no_kv_heads_or_ffn"),
    "nemotron_h_moe": LlamaCppArchitecture(
        nemotron_h.nemotron_h,
        recurrent="no_kv_heads_or_ffn",
        experts=True,
        flags={"expert_weights_norm": "expert_weights_norm", "expert_weights_scale": "expert_weights_scale"},
    ),
    "kimi-linear": LlamaCppArchitecture(
        kimi_linear.kimi_linear,
        recurrent="no_kv_heads",
        kda=True,
        experts=True,
        mla=True,
        required=(
            "attention.layer_norm_rms_epsilon",
            "attention.key_length_mla",
            "attention.value_length_mla",
            "expert_feed_forward_length",
            "expert_shared_count",
            "expert_gating_func",
        ),
        required_values=("attention.layer_norm_rms_epsilon",),
        flags={"expert_gating_func": "expert_gating_func", "expert_weights_scale": "expert_weights_scale"},
    ),
    "hunyuan-moe": LlamaCppArchitecture(hunyuan.hunyuan_moe, experts=True, required=("expert_feed_forward_length",)),
    "hunyuan-dense": LlamaCppArchitecture(hunyuan.hunyuan_dense),
    "smollm3": LlamaCppArchitecture(decoder.smollm3),
    "olmo2": LlamaCppArchitecture(decoder.olmo2, swa=SlidingWindow(4), tied_output=False),
    "granite": _GRANITE,
    "granitemoe": _GRANITE,  # llama.cpp's granitemoe is granite's graph
    "exaone4": LlamaCppArchitecture(decoder.exaone4, swa=SlidingWindow(4, default_window=4096, only_n_layer=64)),
    "seed_oss": LlamaCppArchitecture(decoder.seed_oss, tied_output=False),
    "apertus": LlamaCppArchitecture(decoder.apertus, tied_output=False, required=_XIELU, required_values=_XIELU),
    "glm4": LlamaCppArchitecture(decoder.glm4),
    "ernie4_5": LlamaCppArchitecture(decoder.ernie4_5),
    "ernie4_5-moe": LlamaCppArchitecture(decoder.ernie4_5, experts=True, required=("interleave_moe_layer_step",)),
    "cohere2": LlamaCppArchitecture(
        cohere.cohere2,
        swa=SlidingWindow(4, window_required=True),
        required=("logit_scale",),
        required_values=("logit_scale",),
        flags={"logit_scale": "logit_scale"},
    ),
}


def architecture(name: str) -> LlamaCppArchitecture:
    """The entry for the GGUF architecture `name`: its exact one, else the generic one for an architecture
    llama.cpp knows; an UnsupportedError for one llama.cpp does not know."""
    entry = ARCHITECTURES.get(name) or generic.architecture(name)
    if entry is None:
        raise UnsupportedError(f"llama.cpp does not know the architecture {name!r}: it refuses to load the model")
    return entry


def read_hparams(model: ModelFile) -> LlamaCppHParams:
    """The hyperparameters llama.cpp loads for `model`; a FormatError names a missing or malformed key, an
    UnsupportedError an architecture llama.cpp does not know."""
    arch = model.metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise FormatError(getattr(model, "path", None), None, "general.architecture is missing or not a string")
    return architecture(arch).read_hparams(model, arch)


__all__ = ["ARCHITECTURES", "LlamaCppArchitecture", "SlidingWindow", "architecture", "read_hparams"]
