"""llama-quantize's option syntax, for the command line: `--tensor-type PATTERN=TYPE` (or a
`--tensor-type-file` of them), `--override-kv KEY=TYPE:VALUE` and `--prune-layers L0,L1,...`
(`tools/quantize/quantize.cpp`, `string_parse_kv_override`)."""

from __future__ import annotations

import os

from ..dtypes import GGMLType, ggml_type
from ..errors import WeightkitError
from ..gguf import GGUFValueType, Value

_MAX_KEY = 127  # llama_model_kv_override.key is char[128]; so is its string value


def parse_tensor_type(option: str) -> tuple[str, GGMLType]:
    """`PATTERN=TYPE`: the pattern lowercased (as llama-quantize does), the type a GGML type."""
    pattern, sep, type_name = option.partition("=")
    if not sep or not pattern or not type_name:
        raise WeightkitError(f"--tensor-type {option!r}: expected PATTERN=TYPE, e.g. attn_v=q8_0")
    try:
        return pattern.lower(), ggml_type(type_name).type
    except ValueError:
        raise WeightkitError(f"--tensor-type {option!r}: {type_name!r} is not a GGML type") from None


def read_tensor_types(path: str | os.PathLike[str]) -> list[tuple[str, GGMLType]]:
    """A `--tensor-type-file`: PATTERN=TYPE entries separated by any whitespace, in order."""
    with open(path, encoding="utf-8") as f:
        return [parse_tensor_type(entry) for entry in f.read().split()]


def parse_kv_override(option: str) -> tuple[str, Value]:
    """`KEY=TYPE:VALUE` with TYPE int, float, bool or str, as the value llama-quantize writes: an int is
    stored as UINT32 of its magnitude (llama.cpp's `(uint32_t)std::abs(v)`), a float as FLOAT32."""
    key, sep, rest = option.partition("=")
    if not sep or not key or len(key.encode()) > _MAX_KEY:
        raise WeightkitError(f"--override-kv {option!r}: expected KEY=TYPE:VALUE with a key of 1-127 bytes")
    kind, _, text = rest.partition(":")
    try:
        if kind == "int":
            return key, Value(abs(int(text)) % 2**32, GGUFValueType.UINT32)
        if kind == "float":
            return key, Value(float(text), GGUFValueType.FLOAT32)
    except ValueError:
        raise WeightkitError(f"--override-kv {option!r}: {text!r} is not an {kind}") from None
    if kind == "bool" and text in ("true", "false"):
        return key, Value(text == "true", GGUFValueType.BOOL)
    if kind == "str" and len(text.encode()) <= _MAX_KEY:
        return key, Value(text, GGUFValueType.STRING)
    raise WeightkitError(
        f"--override-kv {option!r}: the value must be int:N, float:X, bool:true|false or str:TEXT (up to 127 bytes)"
    )


def parse_prune_layers(option: str) -> list[int]:
    """`L0,L1,...`: layer numbers, sorted, each once."""
    try:
        layers = [int(part) for part in option.split(",")]
    except ValueError:
        layers = [-1]
    if any(layer < 0 for layer in layers):
        raise WeightkitError(f"--prune-layers {option!r}: expected layer numbers like 0,5,6")
    return sorted(set(layers))
