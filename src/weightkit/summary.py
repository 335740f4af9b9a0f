"""What a person wants to know about a model at a glance: architecture, size, quantization, shape."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .gguf.constants import FILE_TYPES, MAX_NAME
from .model import ModelFile
from .safetensors.checkpoint import read_config


@dataclass
class TypeUsage:
    """How much of a model one tensor type holds."""

    type: str
    tensors: int = 0
    parameters: int = 0
    nbytes: int = 0

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.nbytes / self.parameters if self.parameters else 0.0


@dataclass
class ModelSummary:
    format: str
    architecture: str | None
    name: str | None
    parameters: int
    tensor_bytes: int
    tensor_count: int
    file_type: str | None = None
    context_length: int | None = None
    embedding_length: int | None = None
    block_count: int | None = None
    head_count: int | list[int] | None = None
    head_count_kv: int | list[int] | None = None
    vocab_size: int | None = None
    types: list[TypeUsage] = field(default_factory=list)
    # A file whose tensor data is cut short (opened header-only): bytes missing, and the tensors they belong to
    missing_bytes: int = 0
    incomplete_tensors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what keeps llama.cpp from loading the file

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.tensor_bytes / self.parameters if self.parameters else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["bits_per_weight"] = round(self.bits_per_weight, 4)
        for usage, t in zip(d["types"], self.types, strict=True):
            usage["bits_per_weight"] = round(t.bits_per_weight, 4)
        return d


def summarize(model: ModelFile) -> ModelSummary:
    """Summarize any opened model from its metadata and tensor infos (no tensor data is read)."""
    usage: dict[str, TypeUsage] = {}
    params = nbytes = 0
    for info in model.tensors.values():
        name = info.dtype.name
        u = usage.setdefault(name, TypeUsage(name))
        u.tensors += 1
        u.parameters += info.n_elements
        u.nbytes += info.nbytes
        params += info.n_elements
        nbytes += info.nbytes
    types = sorted(usage.values(), key=lambda u: -u.parameters)
    md = model.metadata
    arch = _str(md.get("general.architecture"))
    s = ModelSummary(model.format, arch, _str(md.get("general.name")), params, nbytes, len(model.tensors), types=types)
    s.file_type = _file_type(md)
    missing: Mapping[str, int] = getattr(model, "missing", {})
    s.missing_bytes = sum(missing.values())
    s.incomplete_tensors = list(missing)
    s.warnings = _llama_cpp_warnings(model)
    if arch:
        s.context_length = _int(md.get(f"{arch}.context_length"))
        s.embedding_length = _int(md.get(f"{arch}.embedding_length"))
        s.block_count = _int(md.get(f"{arch}.block_count"))
        s.head_count = _ints(md.get(f"{arch}.attention.head_count"))
        s.head_count_kv = _ints(md.get(f"{arch}.attention.head_count_kv"))
    tokens = md.get("tokenizer.ggml.tokens")
    s.vocab_size = len(tokens) if isinstance(tokens, (list, np.ndarray)) else None
    config = getattr(model, "config", None)
    if config is None and model.format == "safetensors" and isinstance(model.path, Path):
        config = read_config(model.path if model.path.is_dir() else model.path.parent)
    if config:
        _from_config(s, config)
    return s


def _llama_cpp_warnings(model: ModelFile) -> list[str]:
    """What in a GGUF that weightkit reads llama.cpp refuses: tensor names of GGML_MAX_NAME bytes or more."""
    if model.format != "gguf":
        return []
    long = [name for name in model.tensors if len(name.encode("utf-8", "surrogateescape")) >= MAX_NAME]
    if not long:
        return []
    return [
        f"{len(long)} tensor name(s) of {MAX_NAME} bytes or more (e.g. {long[0]!r}): "
        f"llama.cpp allows {MAX_NAME - 1} and will not load this file"
    ]


def _from_config(s: ModelSummary, config: Mapping[str, Any]) -> None:
    """What a Hugging Face config.json says (safetensors files carry no such metadata themselves)."""
    architectures = config.get("architectures")
    s.architecture = _str(config.get("model_type")) or (
        _str(architectures[0]) if isinstance(architectures, list) and architectures else None
    )
    s.name = _str(config.get("_name_or_path")) or s.name
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    s.context_length = _int(text.get("max_position_embeddings"))
    s.embedding_length = _int(text.get("hidden_size"))
    s.block_count = _int(text.get("num_hidden_layers"))
    s.head_count = _int(text.get("num_attention_heads"))
    s.head_count_kv = _int(text.get("num_key_value_heads"))
    s.vocab_size = _int(text.get("vocab_size"))


def _file_type(md: Mapping[str, Any]) -> str | None:
    ft = _int(md.get("general.file_type"))
    return None if ft is None else FILE_TYPES.get(ft, f"unknown ({ft})")


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else None


def _ints(v: Any) -> int | list[int] | None:
    """A per-layer array collapses to one number when every layer agrees."""
    if isinstance(v, np.ndarray) and v.dtype.kind in "iu" and v.size:
        return int(v[0]) if (v == v[0]).all() else [int(x) for x in v]
    return _int(v)
