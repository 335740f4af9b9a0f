"""Every architecture the llama.cpp engine knows, one entry each in `ARCHITECTURES`: the function that builds its
graph (in the module of its family) and what of its hyperparameters llama.cpp reads. Another architecture
llama.cpp knows gets the generic entry (`generic`, its estimate marked approximate); `architecture` and
`read_hparams` refuse one llama.cpp does not know.
"""

from __future__ import annotations

from collections.abc import Mapping

from ....errors import FormatError, UnsupportedError
from ....model import ModelFile
from ..hparams import LlamaCppHParams
from . import bert, decoder, deepseek, gemma, generic, gpt_oss, granite, mamba, phi, rwkv
from .entry import LlamaCppArchitecture, SlidingWindow

ARCHITECTURES: Mapping[str, LlamaCppArchitecture] = {
    "llama": LlamaCppArchitecture(decoder.llama, experts=True),
    "qwen2": LlamaCppArchitecture(decoder.qwen2),
    "qwen3": LlamaCppArchitecture(decoder.qwen3),
    "qwen3moe": LlamaCppArchitecture(decoder.qwen3, experts=True),
    "gemma2": LlamaCppArchitecture(
        gemma.gemma2,
        swa=SlidingWindow(2, default_window=4096),
        flags={"attn_softcap": "attn_logit_softcapping", "final_softcap": "final_logit_softcapping"},
    ),
    "gemma3": LlamaCppArchitecture(
        gemma.gemma3, swa=SlidingWindow(6), flags={"final_softcap": "final_logit_softcapping"}
    ),
    "gpt-oss": LlamaCppArchitecture(gpt_oss.gpt_oss, swa=SlidingWindow(2, window_required=True), experts=True),
    "phi3": LlamaCppArchitecture(phi.phi3),
    "deepseek2": LlamaCppArchitecture(
        deepseek.deepseek2,
        experts=True,
        mla=True,
        flags={
            "expert_gating_func": "expert_gating_func",
            "expert_weights_norm": "expert_weights_norm",
            "expert_weights_scale": "expert_weights_scale",
        },
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
