"""llama.cpp's quantization mixes: the type llama-quantize gives each tensor for a file type such as Q4_K_M.

A transcription of `llama_tensor_get_type_impl` in llama.cpp's `src/llama-quant.cpp` (the llama.cpp that
llama-cpp-python 0.3.36 bundles). Its rules read a tensor's role (from its name), its layer and a few of
the model's hyperparameters, and some count the attention-V and FFN tensors seen so far; llama.cpp visits
tensors by layer, then by name, and so must `MixPlanner.choose`'s caller.

llama.cpp's own branch for fused `attn_qkv` matrices (Q4_K_M -> Q5_K, ...) is unreachable there, since
they count as attention-V matrices first; they get the attention-V rules here too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any, NamedTuple

import numpy as np

from ..dtypes import GGMLType, ggml_type
from ..errors import ArgumentError, WeightkitError
from ..gguf.constants import FILE_TYPES, KEY_ARCHITECTURE

_T = GGMLType


class FileType(NamedTuple):
    """A llama.cpp file type (`llama_ftype`): its name, its id in `general.file_type`, its base tensor type."""

    name: str
    id: int
    base: GGMLType


# llama_ftype_get_default_type: the type of the tensors no rule moves.
_BASE = {
    "F32": _T.F32, "F16": _T.F16, "BF16": _T.BF16, "Q4_0": _T.Q4_0, "Q4_1": _T.Q4_1, "Q5_0": _T.Q5_0,
    "Q5_1": _T.Q5_1, "Q8_0": _T.Q8_0, "Q1_0": _T.Q1_0, "Q2_0": _T.Q2_0, "MXFP4_MOE": _T.MXFP4,
    "Q2_K": _T.Q2_K, "Q2_K_S": _T.Q2_K, "IQ3_XS": _T.IQ3_S, "Q3_K_S": _T.Q3_K, "Q3_K_M": _T.Q3_K,
    "Q3_K_L": _T.Q3_K, "Q4_K_S": _T.Q4_K, "Q4_K_M": _T.Q4_K, "Q5_K_S": _T.Q5_K, "Q5_K_M": _T.Q5_K,
    "Q6_K": _T.Q6_K, "TQ1_0": _T.TQ1_0, "TQ2_0": _T.TQ2_0, "IQ2_XXS": _T.IQ2_XXS, "IQ2_XS": _T.IQ2_XS,
    "IQ2_S": _T.IQ2_XS, "IQ2_M": _T.IQ2_S, "IQ3_XXS": _T.IQ3_XXS, "IQ1_S": _T.IQ1_S, "IQ1_M": _T.IQ1_M,
    "IQ4_NL": _T.IQ4_NL, "IQ4_XS": _T.IQ4_XS, "IQ3_S": _T.IQ3_S, "IQ3_M": _T.IQ3_S,
}  # fmt: skip
# llama-quantize's names that stand for another (tools/quantize/quantize.cpp).
_ALIASES = {"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}
_IDS = {name: ftype for ftype, name in FILE_TYPES.items()}


def file_type(name: str) -> FileType:
    """The file type llama-quantize means by `name` (case-insensitive; Q4_K is Q4_K_M, as there; or its
    number, as `llama-quantize in out 15`)."""
    key = name.upper()
    if key.isdigit() and FILE_TYPES.get(int(key)) in _BASE:
        key = FILE_TYPES[int(key)]
    key = _ALIASES.get(key, key)
    if key not in _BASE:
        raise ArgumentError(f"unknown llama.cpp file type {name!r}; known: {', '.join(names())}")
    return FileType(key, _IDS[key], _BASE[key])


def names() -> list[str]:
    """Every name llama-quantize takes for a file type (aliases included), in id order."""
    return sorted([*_BASE, *_ALIASES], key=lambda n: (file_type(n).id, n))


def mixture_names() -> list[str]:
    """The file-type names that are not also GGML type names: these always mean a mixture."""
    return [n for n in names() if n not in GGMLType.__members__]


class Role(Enum):
    """`tensor_category`: what a tensor is, from its name."""

    TOKEN_EMBD = auto()
    OUTPUT = auto()
    ATTN_QKV = auto()
    ATTN_KV_B = auto()
    ATTN_V = auto()
    ATTN_K = auto()
    ATTN_Q = auto()
    ATTN_OUTPUT = auto()
    FFN_UP = auto()
    FFN_GATE = auto()
    FFN_DOWN = auto()
    OTHER = auto()


# Searched in this order: the first fragment in the name decides.
_FRAGMENTS = (
    ("attn_qkv.weight", Role.ATTN_QKV), ("attn_kv_b.weight", Role.ATTN_KV_B), ("attn_v.weight", Role.ATTN_V),
    ("attn_k.weight", Role.ATTN_K), ("attn_q.weight", Role.ATTN_Q), ("attn_output.weight", Role.ATTN_OUTPUT),
    ("ffn_up", Role.FFN_UP), ("ffn_gate", Role.FFN_GATE), ("ffn_down", Role.FFN_DOWN),
)  # fmt: skip
TOKEN_EMBEDDINGS = ("token_embd.weight", "per_layer_token_embd.weight")
OUTPUT = "output.weight"
_ATTN_V_LIKE = (Role.ATTN_V, Role.ATTN_QKV, Role.ATTN_KV_B)


@functools.lru_cache(maxsize=1 << 14)
def role(name: str) -> Role:
    """The part a tensor plays, by its name (kept per name: a plan asks for every tensor's role several times)."""
    if name == OUTPUT:
        return Role.OUTPUT
    if name in TOKEN_EMBEDDINGS:
        return Role.TOKEN_EMBD
    return next((r for fragment, r in _FRAGMENTS if fragment in name), Role.OTHER)


_LAYER = re.compile(r"blk\.\s*([+-]?\d+)")


def layer_of(name: str) -> int | None:
    """The layer number as C's `sscanf(name, "blk.%d.", ...)` reads it, or None."""
    m = _LAYER.match(name)
    return None if m is None else int(m.group(1))


def llama_order(names: Iterable[str]) -> list[str]:
    """The order llama.cpp visits tensors in (its `weight_name_comparer`): by layer (none first), then name."""

    def key(name: str) -> tuple[int, bytes]:
        layer = layer_of(name)
        return (-1 if layer is None else layer, name.encode())

    return sorted(names, key=key)


_BLOCK = re.compile(r"blk\.(\d+)\.")


def prune_renames(names: Iterable[str], prune: Iterable[int]) -> tuple[dict[str, str | None], int]:
    """llama-quantize's --prune-layers (`remap_layer`): each tensor's new name, None for the tensors of a
    pruned layer, and the layer count to write. Layers below the first pruned one keep their numbers; the
    ones after close the gaps, numbered in llama.cpp's visiting order."""
    prune = sorted(set(prune))
    names = llama_order(names)
    if not prune:
        return {n: n for n in names}, 0
    mapped: dict[int, str] = {}
    next_id = 0
    renames: dict[str, str | None] = {}
    for name in names:
        m = _BLOCK.search(name)
        if m is None:
            renames[name] = name
            continue
        layer = int(m.group(1))
        if layer not in mapped:
            if layer in prune:
                mapped[layer] = ""
            elif layer < prune[0]:
                mapped[layer], next_id = str(layer), layer + 1
            else:
                mapped[layer], next_id = str(next_id), next_id + 1
        new = mapped[layer]
        renames[name] = name[: m.start(1)] + new + name[m.end(1) :] if new else None
    return renames, next_id


# Architectures whose 80-layer (jais2: 68-layer) models llama.cpp calls LLM_TYPE_70B.
_70B_LAYERS = {"llama": 80, "qwen2": 80, "deci": 80, "olmo": 80, "jais2": 68}


@dataclass(frozen=True)
class ModelFacts:
    """The hyperparameters the rules read (llama.cpp's `hparams` and model type)."""

    arch: str
    n_layer: int
    n_expert: int
    n_gqa: int
    is_70b: bool

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> ModelFacts:
        arch = str(metadata.get(KEY_ARCHITECTURE, ""))

        def first(key: str) -> int | None:
            return _first(metadata, f"{arch}.{key}")

        n_layer = first("block_count")
        if n_layer is None or n_layer <= 0:
            raise WeightkitError(f"llama.cpp's mixes need {arch}.block_count (the model's layer count)")
        n_head = first("attention.head_count") or 0
        n_head_kv = first("attention.head_count_kv")
        n_head_kv = n_head if n_head_kv is None else n_head_kv
        n_nextn = first("nextn_predict_layers") or 0
        is_70b = _70B_LAYERS.get(arch) == n_layer - n_nextn and (arch != "llama" or n_head != n_head_kv)
        return cls(
            arch=arch,
            n_layer=n_layer,
            n_expert=first("expert_count") or 0,
            n_gqa=n_head // n_head_kv if n_head_kv else 0,
            is_70b=is_70b,
        )


def _first(metadata: Mapping[str, Any], key: str) -> int | None:
    """An integer hyperparameter, or its first layer's value when it is given per layer."""
    value = metadata.get(key)
    if isinstance(value, (list, tuple, np.ndarray)):
        value = value[0] if len(value) else None
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise WeightkitError(f"{key} is {value!r}, not an integer")
    return int(value)


def _use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


_IQ_LOW = frozenset({"IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"})


class MixPlanner:
    """llama.cpp's per-tensor choice for one file type, with the counters it keeps across a model."""

    def __init__(
        self,
        ftype: FileType,
        facts: ModelFacts,
        names: Iterable[str],
        *,
        has_imatrix: bool = False,
        output_type: GGMLType | None = None,
    ) -> None:
        names = list(names)
        self.ftype, self.facts, self.has_imatrix, self.output_type = ftype, facts, has_imatrix, output_type
        self.tied_embeddings = OUTPUT not in names
        self.n_attention_wv = sum(role(n) in _ATTN_V_LIKE for n in names)
        self.i_attention_wv = self.i_ffn_down = self.i_ffn_gate = self.i_ffn_up = 0

    def choose(self, name: str, shape: tuple[int, ...]) -> GGMLType:
        """The type for one quantizable tensor (before the fallback for rows that are not whole blocks).
        Call in `llama_order`: the counters advance as llama.cpp's do."""
        ft, f, r = self.ftype.name, self.facts, role(name)
        new = self.ftype.base
        if f.arch == "glm5-next" and any(s in name for s in ("attn_q_a", "attn_q_b", "nextn.eh_proj")):
            return _T.Q8_0
        if r is Role.OUTPUT or (self.tied_embeddings and r is Role.TOKEN_EMBD):
            return self._output(shape)
        if ft == "MXFP4_MOE":
            experts = len(shape) >= 3 and shape[-3] > 1
            expert_role = r in (Role.FFN_UP, Role.FFN_GATE, Role.FFN_DOWN)
            return _T.MXFP4 if experts and (f.arch != "bailingmoe3" or expert_role) else _T.Q8_0
        if r is Role.TOKEN_EMBD:
            return self._token_embedding(new)
        if ft in _IQ_LOW:
            return self._iq_low(name, r, new)
        if r in _ATTN_V_LIKE:
            return self._attn_v(new)
        if r is Role.ATTN_K:
            if f.n_expert == 8:
                return _T.Q8_0
            return {"IQ3_XS": _T.IQ3_XXS, "IQ3_XXS": _T.IQ2_S}.get(ft, new)
        if r is Role.ATTN_Q:
            return {"IQ3_XS": _T.IQ3_XXS, "IQ3_XXS": _T.IQ2_S}.get(ft, new)
        if r is Role.FFN_DOWN:
            return self._ffn_down(name, new)
        if r is Role.ATTN_OUTPUT:
            return self._attn_output(new)
        if r in (Role.FFN_GATE, Role.FFN_UP):
            counter = "i_ffn_gate" if r is Role.FFN_GATE else "i_ffn_up"
            i_layer, n_layer = self._layer(getattr(self, counter), name)
            setattr(self, counter, getattr(self, counter) + 1)
            if ft == "IQ3_XS" and n_layer // 8 <= i_layer < 7 * n_layer // 8:
                return _T.IQ3_XXS
        return new

    def _output(self, shape: tuple[int, ...]) -> GGMLType:
        """output.weight, and token_embd.weight when the model ties the two."""
        if self.output_type is not None:
            return self.output_type
        ft, new = self.ftype.name, self.ftype.base
        if ft == "MXFP4_MOE" or self.facts.arch == "falcon" or shape[-1] % ggml_type(new).block_size:
            return _T.Q8_0
        if ft in _IQ_LOW | {"IQ3_XXS"}:
            return _T.Q5_K
        return new if new == _T.Q8_0 else _T.Q6_K

    def _token_embedding(self, new: GGMLType) -> GGMLType:
        ft = self.ftype.name
        if ft in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
            return _T.Q2_K
        if ft in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
            return _T.IQ3_S
        if ft in ("TQ1_0", "TQ2_0", "Q2_0"):
            return _T.Q4_K
        return new

    def _iq_low(self, name: str, r: Role, new: GGMLType) -> GGMLType:
        """The 1- and 2-bit IQ file types have rules of their own."""
        ft, f = self.ftype.name, self.facts
        s_type = ft in ("IQ2_S", "IQ2_M")
        if r in _ATTN_V_LIKE:
            self.i_attention_wv += 1
            if f.n_gqa >= 4 or f.n_expert >= 4:
                return _T.Q4_K
            return _T.IQ3_S if s_type else _T.Q2_K
        if f.n_expert == 8 and r is Role.ATTN_K:
            return _T.Q4_K
        if r is Role.FFN_DOWN:
            first = self.i_ffn_down < f.n_layer // 8
            self.i_ffn_down += 1
            if first:
                return _T.IQ3_S if s_type else _T.Q2_K
        elif r is Role.ATTN_OUTPUT:
            if f.n_expert == 8:
                return _T.Q5_K
            if ft in ("IQ1_S", "IQ1_M"):
                return _T.IQ2_XXS
            if s_type:
                return _T.IQ3_S
        return new

    def _attn_v(self, new: GGMLType) -> GGMLType:
        ft, f, i, n = self.ftype.name, self.facts, self.i_attention_wv, self.n_attention_wv
        gqa4 = f.n_gqa >= 4
        if ft == "Q2_K":
            new = _T.Q4_K if gqa4 else _T.Q3_K
        elif ft == "Q2_K_S" and gqa4:
            new = _T.Q4_K
        elif ft == "IQ3_XXS":
            new = _T.Q4_K if gqa4 else _T.IQ3_XXS if self.has_imatrix else _T.IQ3_S
        elif (ft in ("IQ3_XS", "IQ3_S") and gqa4) or ft == "IQ3_M":
            new = _T.Q4_K
        elif ft == "Q3_K_M":
            new = _T.Q5_K if i < 2 else _T.Q4_K
        elif ft == "Q3_K_L" or (ft in ("IQ4_NL", "IQ4_XS") and gqa4):
            new = _T.Q5_K
        elif ft in ("Q4_K_M", "Q5_K_M") and _use_more_bits(i, n):
            new = _T.Q6_K
        elif ft == "Q4_K_S" and i < 4:
            new = _T.Q5_K
        if f.is_70b and new in (_T.Q3_K, _T.Q4_K):
            new = _T.Q5_K  # 70B: eight heads share attn_v, so more bits for it cost little
        if f.n_expert == 8:
            new = _T.Q8_0
        self.i_attention_wv += 1
        return new

    def _ffn_down(self, name: str, new: GGMLType) -> GGMLType:
        ft, f = self.ftype.name, self.facts
        i, n = self._layer(self.i_ffn_down, name)
        self.i_ffn_down += 1
        falcon = f.arch == "falcon"
        more = _use_more_bits(i, n)
        if ft == "Q2_K":
            return _T.Q3_K
        if ft == "Q2_K_S":
            return _T.Q4_K if i < n // 8 else new
        if ft == "IQ3_XXS" and not self.has_imatrix:
            return _T.Q4_K if i < n // 8 else _T.Q3_K
        if ft == "Q3_K_M":
            return _T.Q5_K if i < n // 16 else _T.Q4_K if not falcon or more else _T.Q3_K
        if ft == "IQ3_M" and (i < n // 8 or (f.n_expert == 8 and more)):
            return _T.Q4_K
        if ft == "Q3_K_L":
            return _T.Q4_K if falcon else _T.Q5_K
        if ft == "Q4_K_M":
            if falcon:
                return _T.Q6_K if i < n // 16 else _T.Q5_K if more else _T.Q4_K
            return _T.Q6_K if more else new
        if i < n // 8 and ft in ("IQ4_NL", "IQ4_XS") and not self.has_imatrix:
            return _T.Q5_K
        if ft == "Q5_K_M" and more:
            return _T.Q6_K
        if ft == "Q4_K_S" and not falcon and i < n // 8:
            return _T.Q5_K
        if ft in ("Q4_0", "Q5_0") and self.has_imatrix and i < n // 8:
            return _T.Q4_1 if ft == "Q4_0" else _T.Q5_1  # guards the first ffn_down layers against outliers
        return new

    def _attn_output(self, new: GGMLType) -> GGMLType:
        ft, f = self.ftype.name, self.facts
        if f.arch == "falcon":
            return _T.Q4_K if ft == "Q3_K_L" else new
        if f.n_expert == 8:
            bumped = {"Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S"}
            return _T.Q5_K if ft in bumped | {"IQ3_M", "IQ4_XS"} else new
        return {"Q2_K": _T.Q3_K, "IQ3_XXS": _T.IQ3_S, "Q3_K_M": _T.Q4_K, "Q3_K_L": _T.Q5_K, "IQ3_M": _T.Q4_K}.get(
            ft, new
        )

    def _layer(self, counter: int, name: str) -> tuple[int, int]:
        """`layer_info`: (layer, layers) from the running count, or for MoE models from the name."""
        n = self.facts.n_layer
        if self.facts.n_expert <= 1:
            return counter, n
        layer = layer_of(name)
        if layer is None:
            raise WeightkitError(f"failed to determine the layer of tensor {name!r}")
        if not 0 <= layer < n:
            raise WeightkitError(f"bad layer {layer} for tensor {name!r}: must be in [0, {n})")
        return layer, n
