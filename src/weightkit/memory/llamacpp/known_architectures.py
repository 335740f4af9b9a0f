"""Every architecture the llama.cpp that llama-cpp-python 0.3.36 bundles knows (`LLM_ARCH_NAMES` in
`src/llama-arch.cpp`), with what a generic estimate needs of each: the memory `llama_model::create_memory` gives
it and how its `load_arch_hparams` marks sliding-window layers. An architecture with an exact entry
(`architectures.ARCHITECTURES`) is estimated by that; any other one here gets the generic estimate; a name not
here is one llama.cpp itself refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .hparams import SWA_CHUNKED, SWA_STANDARD

#: what `create_memory` gives an architecture
KV = "kv"  # llama_kv_cache, or llama_kv_cache_iswa with sliding-window layers: the standard cache
NONE = "none"  # no memory at all (encoders, diffusion models)
RECURRENT = "recurrent"  # llama_memory_recurrent: every layer's state (llm_arch_is_recurrent)
HYBRID = "hybrid"  # llama_memory_hybrid(_iswa): attention and recurrent layers, split by the architecture's filter
OWN = "own"  # a cache of its own (sparse-attention indexers, caches shared between layers or models, ...)

#: the nearest graph family by memory (the generic graph builds its layers as this family does)
FAMILIES = {KV: "decoder", OWN: "decoder", NONE: "encoder", RECURRENT: "recurrent", HYBRID: "hybrid"}


@dataclass(frozen=True)
class SlidingLayers:
    """How `load_arch_hparams` marks sliding-window layers: `load_swa_pattern(pattern, dense_first)` (the file's
    `attention.sliding_window_pattern` wins), an array the file must hold (`pattern` None), or neither unless
    the model has `n_layer` layers (`only_n_layer`: EXAONE 4 slides only in its 64-layer size)."""

    pattern: int | None = 4
    dense_first: bool = False
    type: str = SWA_STANDARD
    only_n_layer: int | None = None


@dataclass(frozen=True)
class KnownArchitecture:
    """One of llama.cpp's architectures as the generic estimate sees it."""

    memory: str = KV
    swa: SlidingLayers | None = None

    @property
    def family(self) -> str:
        return FAMILIES[self.memory]


_KV = KnownArchitecture()
_NONE = KnownArchitecture(NONE)
_RECURRENT = KnownArchitecture(RECURRENT)
_HYBRID = KnownArchitecture(HYBRID)
_OWN = KnownArchitecture(OWN)
_ARRAY = SlidingLayers(None)

LLAMA_CPP_ARCHITECTURES: Mapping[str, KnownArchitecture] = {
    "llama": _KV, "llama4": KnownArchitecture(swa=SlidingLayers(4, type=SWA_CHUNKED)), "deci": _KV, "falcon": _KV,
    "grok": _KV, "gpt2": _KV, "gptj": _KV, "gptneox": _KV, "mpt": _KV, "baichuan": _KV, "starcoder": _KV,
    "refact": _KV, "bert": _NONE, "modern-bert": KnownArchitecture(NONE, SlidingLayers(3, dense_first=True)),
    "nomic-bert": _NONE, "nomic-bert-moe": _NONE, "neo-bert": _NONE, "jina-bert-v2": _NONE, "jina-bert-v3": _NONE,
    "eurobert": _NONE, "bloom": _KV, "stablelm": _KV, "qwen": _KV, "qwen2": _KV, "qwen2moe": _KV, "qwen2vl": _KV,
    "qwen3": _KV, "qwen3moe": _KV, "qwen3next": _HYBRID, "qwen3vl": _KV, "qwen3vlmoe": _KV, "qwen35": _HYBRID,
    "qwen35moe": _HYBRID, "qwen4exp": _HYBRID, "phi2": _KV, "phi3": _KV, "phimoe": _KV, "plamo": _KV,
    "plamo2": _HYBRID, "plamo3": KnownArchitecture(swa=SlidingLayers(8)), "codeshell": _KV, "orion": _KV,
    "internlm2": _KV, "minicpm": _KV, "minicpm3": _KV, "gemma": _KV, "gemma2": KnownArchitecture(swa=SlidingLayers(2)),
    "gemma3": KnownArchitecture(swa=SlidingLayers(6)), "gemma3n": KnownArchitecture(OWN, SlidingLayers(5)),
    "gemma4": KnownArchitecture(OWN, _ARRAY), "gemma4-assistant": KnownArchitecture(OWN, _ARRAY),
    "gemma-embedding": KnownArchitecture(NONE, SlidingLayers(6)), "starcoder2": _KV, "mamba": _RECURRENT,
    "mamba2": _RECURRENT, "maple": KnownArchitecture(swa=_ARRAY), "jamba": _HYBRID, "falcon-h1": _HYBRID,
    "xverse": _KV, "command-r": _KV, "cohere2": KnownArchitecture(swa=SlidingLayers(4)),
    "cohere2moe": KnownArchitecture(swa=SlidingLayers(4, dense_first=True)), "dbrx": _KV, "olmo": _KV,
    "olmo2": KnownArchitecture(swa=SlidingLayers(4)), "olmoe": _KV,
    "muse-glimmer": KnownArchitecture(swa=SlidingLayers(4)), "openelm": _KV, "arctic": _KV, "deepseek": _KV,
    "deepseek2": _KV, "deepseek2-ocr": _KV, "deepseek32": _OWN, "deepseek4": _OWN, "chatglm": _KV, "glm4": _KV,
    "glm4moe": _KV, "glm-dsa": _OWN, "bitnet": _KV, "t5": _KV, "t5encoder": _KV, "jais": _KV, "jais2": _KV,
    "nemotron": _KV, "nemotron_h": _HYBRID, "nemotron_h_moe": _HYBRID, "exaone": _KV,
    "exaone4": KnownArchitecture(swa=SlidingLayers(4, only_n_layer=64)),
    "exaone-moe": KnownArchitecture(swa=SlidingLayers(4)), "rwkv6": _RECURRENT, "rwkv6qwen2": _RECURRENT,
    "rwkv7": _RECURRENT, "arwkv7": _RECURRENT, "granite": _KV, "granitemoe": _KV, "granitehybrid": _HYBRID,
    "graniteswitch": _KV, "granite_swa": KnownArchitecture(swa=_ARRAY), "chameleon": _KV, "wavtokenizer-dec": _NONE,
    "plm": _KV, "bailingmoe": _KV, "bailingmoe2": _KV, "bailingmoe3": _HYBRID, "dots1": _KV,
    "dots3note": KnownArchitecture(OWN, _ARRAY), "arcee": _KV, "afmoe": KnownArchitecture(swa=SlidingLayers(4)),
    "laguna": KnownArchitecture(swa=SlidingLayers(4, dense_first=True)), "ernie4_5": _KV, "ernie4_5-moe": _KV,
    "hunyuan-moe": _KV, "hunyuan-dense": _KV, "hunyuan_vl": _KV, "hy_v3": _KV, "hy_v4": _OWN, "smollm3": _KV,
    "gpt-oss": KnownArchitecture(swa=SlidingLayers(2)), "lfm2": _HYBRID, "lfm2moe": _HYBRID, "dream": _NONE,
    "smallthinker": KnownArchitecture(swa=SlidingLayers(4, dense_first=True)), "llada": _NONE, "llada-moe": _NONE,
    "seed_oss": _KV, "grovemoe": _KV, "apertus": _KV, "minimax-01": _HYBRID, "hrm_text": _KV, "minimax-m2": _KV,
    "minimax-m3": _OWN, "cogvlm": _KV, "rnd1": _NONE, "pangu-embedded": _KV, "mistral3": _KV, "eagle3": _KV,
    "dflash": KnownArchitecture(OWN, _ARRAY), "mistral4": _KV, "paddleocr": _KV,
    "mimo2": KnownArchitecture(swa=_ARRAY), "step35": KnownArchitecture(swa=_ARRAY),
    "spark2_5": KnownArchitecture(swa=_ARRAY), "llama-embed": _KV, "maincoder": _KV, "kimi-linear": _HYBRID,
    "kimi-k3": _HYBRID, "glm5-next": _OWN, "talkie": _KV, "mellum": KnownArchitecture(swa=SlidingLayers(4)),
    "nanbeige": _KV, "qwen3tts": _KV, "pockettts": _KV,
}  # fmt: skip

#: architectures whose models have no KV cache or state at all (`create_memory` gives them none)
NO_MEMORY = frozenset(name for name, known in LLAMA_CPP_ARCHITECTURES.items() if known.memory == NONE)
