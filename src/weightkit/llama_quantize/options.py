"""What to quantize to and how: `QuantizeOptions`, llama-quantize's parameters under its own flag names, built
once and passed down (as llama.cpp passes `llama_model_quantize_params`); and the parsers of its option
syntax: `--tensor-type PATTERN=TYPE` (or a `--tensor-type-file` of them), `--override-kv KEY=TYPE:VALUE` and
`--prune-layers L0,L1,...` (`tools/quantize/quantize.cpp`, `string_parse_kv_override`)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dtypes import GGMLType, ggml_type
from ..errors import ArgumentError
from ..gguf import GGUFValueType, Value
from .mixes import FileType, file_type, names

_T = GGMLType

# general.file_type for a GGML type that is no llama-quantize file type of its own name: the file type
# whose tensors are mostly of that type (llama_ftype_get_default_type), else LLAMA_FTYPE_GUESSED.
_FILE_TYPE_OF = {_T.MXFP4: 38, _T.NVFP4: 39}
FTYPE_GUESSED = 1024
# `llama-quantize in out COPY`: tensors copied, not quantized (its QUANT_OPTIONS give it LLAMA_FTYPE_ALL_F32,
# which only_copy then ignores).
COPY = "COPY"
_ALL_F32 = 0


@dataclass(frozen=True)
class Target:
    """What `--type` means: the base type, the file type whose mixture decides each matrix's type (None:
    the base type for every matrix), and the `general.file_type` the output gets. `only_copy` is COPY's
    (llama_model_quantize_params.only_copy): every tensor kept as it is, the file type the input's."""

    name: str
    base: GGMLType
    mixture: FileType | None
    file_type_id: int
    only_copy: bool = False


def resolve_target(name: str | GGMLType, pure: bool = False) -> Target:
    """What llama-quantize means by a type name: a file type (Q4_K_M; Q4_0, Q8_0 and the other type-named
    file types too; Q4_K is Q4_K_M there; or its number), whose mixture gives each matrix its type, or with
    `pure` its base type for every matrix. A GGML type that names no file type (MXFP4, NVFP4, ...) means that
    type for every matrix; COPY, every tensor as it is."""
    text = name.name if isinstance(name, GGMLType) else str(name).strip()
    if text.upper() == COPY:
        return Target(COPY, _T.F32, None, _ALL_F32, only_copy=True)
    try:
        ftype = file_type(text)
    except ArgumentError:
        try:
            base = ggml_type(text).type
        except ValueError:
            raise ArgumentError(
                f"--type {text!r}: neither a llama.cpp file type ({', '.join(names())}) nor a GGML type"
            ) from None
        return Target(base.name, base, None, _FILE_TYPE_OF.get(base, FTYPE_GUESSED))
    return Target(ftype.name, ftype.base, None if pure else ftype, ftype.id)


@dataclass(frozen=True)
class QuantizeOptions:
    """llama-quantize's parameters, named as its flags (`--type`, `--pure`, `--output-tensor-type`, ...).

    - `type`: a llama.cpp file type (Q4_K_M, Q8_0, IQ2_M, ...: each matrix gets its mixture's choice, as
      `llama-quantize in out TYPE`), a GGML type that is no file type (MXFP4, NVFP4: every matrix), or COPY
      (`only_copy`: every tensor as it is, rewritten in llama-quantize's layout with the input's file type).
    - `pure`: every matrix gets the file type's base type (`llama-quantize --pure`).
    - `output_tensor_type`, `token_embedding_type`: types for output.weight and token_embd.weight.
    - `tensor_type`: (regular expression, type) pairs; the first whose pattern is found in a matrix's name
      gives its type (`--tensor-type`, lowercased, searched as std::regex_search does).
    - `leave_output_tensor`: keep output.weight as it is.
    - `override_kv`: metadata keys set last, which the mixture's rules read too (`--override-kv`).
    - `keep_split`: write a shard per shard of a split source.
    - `prune_layers`: layers to leave out; the rest are renumbered.
    - `imatrix`: an imatrix file (llama.cpp's GGUF or the legacy .dat) or a mapping of tensor name to
      importance weights; `include_weights` / `exclude_weights` select its entries by name fragments.

    Every value is checked when the options are made (`ArgumentError` names the flag), so a bad one fails
    before any work.
    """

    type: str | GGMLType
    pure: bool = False
    output_tensor_type: GGMLType | str | None = None
    token_embedding_type: GGMLType | str | None = None
    tensor_type: tuple[tuple[str, GGMLType | str], ...] = ()
    leave_output_tensor: bool = False
    override_kv: tuple[tuple[str, Value], ...] = ()
    keep_split: bool = False
    prune_layers: tuple[int, ...] = ()
    imatrix: str | os.PathLike[str] | Mapping[str, np.ndarray] | None = None
    include_weights: tuple[str, ...] = ()
    exclude_weights: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise once, here
        set_(self, "target", resolve_target(self.type, self.pure))
        for flag in ("output_tensor_type", "token_embedding_type"):
            value = getattr(self, flag)
            if value is not None:
                set_(self, flag, _ggml_type(f"--{flag.replace('_', '-')}", value))
        patterns = []
        for pattern, kind in self.tensor_type:
            try:
                patterns.append((re.compile(pattern), _ggml_type("--tensor-type", kind)))
            except re.error as e:
                raise ArgumentError(f"--tensor-type pattern {pattern!r}: {e}") from None
        set_(self, "tensor_type", tuple(self.tensor_type))
        set_(self, "patterns", tuple(patterns))
        set_(self, "override_kv", tuple(self.override_kv))
        layers = tuple(sorted(set(self.prune_layers)))
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in layers):
            raise ArgumentError(f"--prune-layers {self.prune_layers!r}: expected layer numbers like 0,5,6")
        set_(self, "prune_layers", layers)
        set_(self, "include_weights", tuple(self.include_weights))
        set_(self, "exclude_weights", tuple(self.exclude_weights))

    target: Target = field(init=False, repr=False, compare=False)
    patterns: tuple[tuple[re.Pattern[str], GGMLType], ...] = field(init=False, repr=False, compare=False)

    @property
    def hyperparameters(self) -> dict[str, Any]:
        """The overridden metadata values, as the mixture's rules read them."""
        return {key: value.value for key, value in self.override_kv}


def _ggml_type(flag: str, value: GGMLType | str) -> GGMLType:
    try:
        return ggml_type(value).type
    except ValueError:
        raise ArgumentError(f"{flag} {value!r}: not a GGML type (Q4_K, Q8_0, IQ4_XS, ...)") from None


_MAX_KEY = 127  # llama_model_kv_override.key is char[128]; so is its string value


def parse_tensor_type(option: str) -> tuple[str, GGMLType]:
    """`PATTERN=TYPE`: the pattern lowercased (as llama-quantize does), the type a GGML type."""
    pattern, sep, type_name = option.partition("=")
    if not sep or not pattern or not type_name:
        raise ArgumentError(f"--tensor-type {option!r}: expected PATTERN=TYPE, e.g. attn_v=q8_0")
    return pattern.lower(), _ggml_type("--tensor-type", type_name)


def read_tensor_types(path: str | os.PathLike[str]) -> list[tuple[str, GGMLType]]:
    """A `--tensor-type-file`: PATTERN=TYPE entries separated by any whitespace, in order."""
    with open(path, encoding="utf-8") as f:
        return [parse_tensor_type(entry) for entry in f.read().split()]


def parse_kv_override(option: str) -> tuple[str, Value]:
    """`KEY=TYPE:VALUE` with TYPE int, float, bool or str, as the value llama-quantize writes: an int is
    stored as UINT32 of its magnitude (llama.cpp's `(uint32_t)std::abs(v)`), a float as FLOAT32."""
    key, sep, rest = option.partition("=")
    if not sep or not key or len(key.encode()) > _MAX_KEY:
        raise ArgumentError(f"--override-kv {option!r}: expected KEY=TYPE:VALUE with a key of 1-127 bytes")
    kind, _, text = rest.partition(":")
    try:
        if kind == "int":
            return key, Value(abs(int(text)) % 2**32, GGUFValueType.UINT32)
        if kind == "float":
            return key, Value(float(text), GGUFValueType.FLOAT32)
    except ValueError:
        raise ArgumentError(f"--override-kv {option!r}: {text!r} is not an {kind}") from None
    if kind == "bool" and text in ("true", "false"):
        return key, Value(text == "true", GGUFValueType.BOOL)
    if kind == "str" and len(text.encode()) <= _MAX_KEY:
        return key, Value(text, GGUFValueType.STRING)
    raise ArgumentError(
        f"--override-kv {option!r}: the value must be int:N, float:X, bool:true|false or str:TEXT (up to 127 bytes)"
    )


def parse_prune_layers(option: str) -> list[int]:
    """`L0,L1,...`: layer numbers, sorted, each once."""
    try:
        layers = [int(part) for part in option.split(",")]
    except ValueError:
        layers = [-1]
    if any(layer < 0 for layer in layers):
        raise ArgumentError(f"--prune-layers {option!r}: expected layer numbers like 0,5,6")
    return sorted(set(layers))
