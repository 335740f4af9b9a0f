"""Every model family weightkit converts, one module each, registered in `FAMILIES`.

A family module declares its `Family`: transformers' config classes it reads, how llama.cpp's converter writes
each of its Hugging Face classes (and their projectors, `--mmproj`), and the folder `--to hf` writes for its GGUF
architectures. The pieces families share are in `decoder` (the standard decoder's names and shapes, the rope
un-permutation, ...) and `vision` (the projectors' encoders). Adding a family is a module and its line here;
tests/convert/test_families.py checks every entry is complete.
"""

from __future__ import annotations

from ..hf.config import ConfigClass
from . import (
    bert,
    deepseek,
    ernie,
    gemma,
    gemma3n,
    gemma4,
    glm,
    gpt_oss,
    granite,
    lfm2,
    llama,
    llama4,
    olmo,
    phi3,
    qwen,
    qwen35,
    qwen_vl,
    seed_oss,
)
from .family import Conversion, Export, Family, Transform

FAMILIES: tuple[Family, ...] = (
    llama.FAMILY, qwen.FAMILY, qwen35.FAMILY, qwen_vl.FAMILY, gemma.FAMILY, gemma4.FAMILY, phi3.FAMILY, gpt_oss.FAMILY,
    bert.FAMILY, deepseek.FAMILY, glm.FAMILY, olmo.FAMILY, seed_oss.FAMILY, granite.FAMILY,
    llama4.FAMILY, lfm2.FAMILY, ernie.FAMILY, gemma3n.FAMILY,
)  # fmt: skip

#: HF architecture class -> how the converter writes it
CONVERSIONS: dict[str, Conversion] = {name: c for f in FAMILIES for name, c in f.conversions.items()}
#: HF architecture class -> how the converter writes its projector (`--mmproj`)
PROJECTORS: dict[str, Conversion] = {name: c for f in FAMILIES for name, c in f.projectors.items()}
#: `model_type` -> transformers' config class
CONFIG_CLASSES: dict[str, ConfigClass] = {name: c for f in FAMILIES for name, c in f.configs.items()}
#: GGUF architecture -> the HF folder `--to hf` writes
EXPORTS: dict[str, Export] = {name: e for f in FAMILIES for name, e in f.exports.items()}
#: how the converter writes a checkpoint in Mistral's own format (`--mistral-format`: its `MistralModel`)
MISTRAL_FORMAT: Conversion = llama.MISTRAL_FORMAT

__all__ = [
    "CONFIG_CLASSES",
    "CONVERSIONS",
    "EXPORTS",
    "FAMILIES",
    "MISTRAL_FORMAT",
    "PROJECTORS",
    "Conversion",
    "Export",
    "Family",
    "Transform",
]
