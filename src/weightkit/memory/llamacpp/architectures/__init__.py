"""Every architecture the llama.cpp engine knows, one entry each in `ARCHITECTURES`: the function that builds its
graph (in the module of its family) and what of its hyperparameters llama.cpp reads. Another architecture
llama.cpp knows gets the generic entry (`generic`, its estimate marked approximate); `architecture` and
`read_hparams` refuse one llama.cpp does not know.
"""

from __future__ import annotations

from collections.abc import Mapping

from ....errors import FormatError, UnsupportedError
from ....model import ModelFile
from ..hparams import SWA_CHUNKED, LlamaCppHParams
from . import bert, decoder, deepseek, gemma, generic, glm, gpt_oss, granite, llama4, mamba, phi, qwen_next, rwkv
from .entry import LlamaCppArchitecture, SlidingWindow

_ROUTING = {  # how experts are chosen and weighted, where the architecture reads it from the file
    "expert_gating_func": "expert_gating_func",
    "expert_weights_norm": "expert_weights_norm",
    "expert_weights_scale": "expert_weights_scale",
}

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
        shared_kv=True,
        per_layer_input=True,
        required=("attention.key_length_swa", "attention.value_length_swa"),
        flags={"final_softcap": "final_logit_softcapping"},
        flag_defaults={"final_softcap": 30.0},  # llama_hparams' default, which gemma4 keeps without the key
    ),
    "gpt-oss": LlamaCppArchitecture(gpt_oss.gpt_oss, swa=SlidingWindow(2, window_required=True), experts=True),
    "phi3": LlamaCppArchitecture(phi.phi3),
    "deepseek2": _DEEPSEEK2,
    "mistral4": _DEEPSEEK2,  # llama.cpp's mistral4 is deepseek2's loader and graph
    "glm4moe": LlamaCppArchitecture(glm.glm4moe, experts=True, flags=_ROUTING),
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
