"""What a model family is to weightkit's converters: the shapes of a family module's declarations.

A family module (one per model family, registered in `families.FAMILIES`) declares a `Family`: the
transformers config classes it reads (`ConfigClass`, by `model_type`), how llama.cpp's converter writes each
of its Hugging Face classes (`Conversion`, by class name) and each one's projector (`--mmproj`: a `Conversion`
to the `clip` architecture, over the vision config), and the Hugging Face folder `--to hf` writes for each of
its GGUF architectures (`Export`, whose tensor names and transforms are its `Conversion`'s, inverted).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..hf.config import ConfigClass, HFConfig
from ..hf.kv import KV
from ..hf.parameters import write_text_parameters
from ..hf.tensors import SourceTensor

TensorFilter = Callable[[str], "str | None"]
TextParameters = Callable[[KV, str, HFConfig, dict[str, Any], int], None]
#: A step between the name filters and the name map (the converter's `modify_tensors` and
#: `generate_extra_tensors`): the checkpoint's tensors in, the tensors to convert out, in order, read lazily.
Rewrite = Callable[[list[tuple[str, SourceTensor]], HFConfig], list[tuple[str, SourceTensor]]]
TensorShapes = Mapping[str, tuple[int, ...]]
#: A tensor's shape by config.json keys: a key, the first present of several (the converter's find_hparam), or None
#: for any size.
Dims = tuple[str | tuple[str, ...] | None, ...]
#: The converter's `tensor_force_quant`: (filtered HF name, GGUF name, the outtype's matrix type) -> the GGML
#: type that tensor is written in whatever the outtype (vectors and norms stay F32), or None for the usual rule.
ForcedType = Callable[[str, str, str], "str | None"]
#: The converter's block count from the config and the filtered tensor names, where it is not the config's layers.
Blocks = Callable[[HFConfig, list[str]], int]


@dataclass(frozen=True)
class Transform:
    """A change of a tensor's values, for the tensors whose (filtered) HF name ends with one of `suffixes` and
    with none of `exclude`. `apply(values, hparams)` keeps the shape; `check(shape, hparams)` says why a shape
    will not do; `invert(values, hparams)` undoes `apply` (GGUF -> HF), giving the shape `inverted_shape` says
    where it is not the GGUF tensor's (the undoing of a rewrite that changed the shape, `Export.rewrites_undone`).
    `rows`: `apply` moves whole rows (a permutation of the output rows), so a LoRA pair's product B @ A is
    transformed by transforming B."""

    suffixes: tuple[str, ...]
    apply: Callable[[np.ndarray, HFConfig], np.ndarray]
    check: Callable[[tuple[int, ...], HFConfig], str | None]
    invert: Callable[[np.ndarray, HFConfig], np.ndarray] | None = None
    exclude: tuple[str, ...] = ()
    inverted_shape: Callable[[tuple[int, ...]], tuple[int, ...]] | None = None
    rows: bool = False

    def applies_to(self, name: str) -> bool:
        return name.endswith(self.suffixes) and not name.endswith(self.exclude)


@dataclass(frozen=True)
class Conversion:
    """How the converter turns one HF architecture class into GGUF."""

    gguf: str
    tensor_names: Mapping[str, str]  # HF name ({bid} for the block number) -> GGUF name, without .weight/.bias
    required: Mapping[str, Dims]  # GGUF tensor -> its shape, by config.json keys
    vocab: Callable[[KV, Path, HFConfig], None]
    filters: tuple[TensorFilter, ...] = ()
    transforms: tuple[Transform, ...] = ()
    extra_tensors: tuple[Callable[[HFConfig, dict[str, Any]], list[tuple[str, np.ndarray]]], ...] = ()
    parameters: tuple[Callable[[KV, str, Path, HFConfig], None], ...] = ()
    checks: tuple[Callable[[Path, HFConfig], None], ...] = field(default=())
    text_parameters: TextParameters = write_text_parameters  # the keys up to general.file_type
    leading_parameters: tuple[Callable[[KV, str, HFConfig, dict[str, Any]], None], ...] = ()  # before general.*
    rewrites: tuple[Rewrite, ...] = ()
    quantized: tuple[str, ...] = ()  # the quantization_config.quant_method values converted as stored
    forced_types: tuple[ForcedType, ...] = ()  # the first that names a type decides
    general_type: str = "model"  # general.type: "model", or "mmproj" for a projector
    # the converter's block count from the config and the filtered tensor names, where it adds blocks to the
    # config's layers (multi-token prediction layers); else the config's layer count
    blocks: Blocks | None = None


@dataclass(frozen=True)
class Export:
    """One GGUF architecture as the HF folder `--to hf` writes it."""

    hf_class: str  # config.json's architectures[0]
    model_type: str
    conversion: Conversion  # the forward entry: its tensor names and transforms, inverted
    tokenizer: str  # the tokenizer family: "llama" (SentencePiece-style BPE or GPT-2 BPE), "qwen2", "gemma"
    config: Mapping[str, str]  # GGUF key after "{arch}." -> config.json key
    derived: tuple[Callable[[TensorShapes, dict[str, Any]], dict[str, Any]], ...] = ()
    # tokenizer_config.json's class for a byte-level BPE (`gpt2`) vocabulary, where the forward converter
    # reads that class to choose its vocabulary path; else the family's
    byte_level_class: str | None = None
    # (word, export): a `general.name` with the word in it (any case) is written as that export instead
    named: tuple[tuple[str, Export], ...] = ()
    # the conversion's rewrites that changed a tensor's values or shape, undone after its transforms are
    # (a squeezed convolution kernel given its middle axis back)
    rewrites_undone: tuple[Transform, ...] = ()
    # (HF name as the tensor map gives it back, hparams) -> the checkpoint's name, where the conversion's filters
    # and rewrites renamed it (Qwen 3.5's `dt_bias`, its MTP layers as blocks)
    rename: Callable[[str, HFConfig], str] | None = None
    # experts as transformers 5 has them (stacked, gate and up in one `gate_up_proj`), not one tensor per expert
    stacked_experts: bool = False


@dataclass(frozen=True)
class Family:
    """One model family: everything weightkit's converters know of it."""

    name: str
    configs: Mapping[str, ConfigClass]  # model_type -> transformers' config class
    conversions: Mapping[str, Conversion]  # HF architecture class -> how the converter writes it
    projectors: Mapping[str, Conversion] = field(default_factory=dict)  # HF class -> its projector (--mmproj)
    exports: Mapping[str, Export] = field(default_factory=dict)  # GGUF architecture -> the HF folder


__all__ = ["Blocks", "Conversion", "Dims", "Export", "Family", "ForcedType", "Rewrite", "TensorShapes", "Transform"]
