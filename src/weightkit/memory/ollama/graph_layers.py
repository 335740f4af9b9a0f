"""Layer weights as Ollama counts them: its tensor sizes, its grouping of tensors into layers, and the
output layer of `llm/server.go`.

Ollama sizes a tensor from its own table of GGML types, `elements * type_size / block_size` in uint64:
types it has no entry for (TQ1_0, TQ2_0, NVFP4, the removed repacked types, ...) count as 0 bytes, and
the id 4 (once Q4_2) counts as MXFP4. These are the sizes used here, not the file's byte lengths; for
every type Ollama knows they are the same for tensors whose rows are whole blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...dtypes import GGMLType
from ...errors import FormatError
from .graph_kv import U64

_G = GGMLType

# Ollama's TensorType.BlockSize: 1 for the plain types, 32 for these, 256 for every other id
_BLOCK_1 = {_G.F32, _G.F16, _G.I8, _G.I16, _G.I32, _G.I64, _G.F64, _G.BF16}
_BLOCK_32 = {_G.Q4_0, _G.Q4_1, _G.Q5_0, _G.Q5_1, _G.Q8_0, _G.Q8_1, _G.IQ4_NL, 4, _G.MXFP4}

# Ollama's TensorType.TypeSize (bytes per block), spelled out for its block sizes; other ids: 0
_TYPE_SIZE = {
    _G.F32: 4, _G.F16: 2,
    _G.Q4_0: 2 + 16, _G.Q4_1: 2 + 2 + 16, _G.Q5_0: 2 + 4 + 16, _G.Q5_1: 2 + 2 + 4 + 16,
    _G.Q8_0: 2 + 32, _G.Q8_1: 2 + 2 + 32,
    _G.Q2_K: 16 + 64 + 2 + 2, _G.Q3_K: 32 + 64 + 12 + 2, _G.Q4_K: 2 + 2 + 12 + 128,
    _G.Q5_K: 2 + 2 + 12 + 32 + 128, _G.Q6_K: 128 + 64 + 16 + 2, _G.Q8_K: 4 + 256 + 32,
    _G.IQ2_XXS: 2 + 64, _G.IQ2_XS: 2 + 64 + 8, _G.IQ3_XXS: 2 + 64 + 32, _G.IQ1_S: 2 + 32 + 16,
    _G.IQ4_NL: 2 + 16, _G.IQ3_S: 2 + 64 + 32 + 8 + 4, _G.IQ2_S: 2 + 64 + 16, _G.IQ4_XS: 2 + 2 + 128 + 4,
    _G.I8: 1, _G.I16: 2, _G.I32: 4, _G.I64: 8, _G.F64: 8, _G.IQ1_M: 32 + 16 + 8, _G.BF16: 2,
    4: 1 + 16, _G.MXFP4: 1 + 16,
}  # fmt: skip


def ollama_block_size(kind: int) -> int:
    """Elements per block of a GGML type id, by Ollama's table."""
    if kind in _BLOCK_1:
        return 1
    if kind in _BLOCK_32:
        return 32
    return 256


def ollama_type_size(kind: int) -> int:
    """Bytes per block of a GGML type id, by Ollama's table (0 for ids it does not know)."""
    return _TYPE_SIZE.get(kind, 0)


def _kind(info: Any) -> int:
    dtype = info.dtype
    if not isinstance(dtype, GGMLType):
        raise FormatError(
            None, None, f"tensor {info.name!r} is {dtype}, not a GGML type: Ollama's estimate is for GGUF"
        )
    return int(dtype)


def ggml_shape(info: Any) -> tuple[int, ...]:
    """The tensor's shape as Ollama holds it: GGUF order, innermost (ne0) first."""
    return tuple(int(d) for d in reversed(info.shape))


def tensor_elements(info: Any) -> U64:
    """`Tensor.Elements`: the product of the dimensions, in uint64 (1 for no dimensions)."""
    n = U64(1)
    for d in ggml_shape(info):
        n = n * d
    return n


def tensor_size(info: Any) -> U64:
    """`Tensor.Size`: `elements * type_size / block_size`, in uint64, by Ollama's type table."""
    kind = _kind(info)
    return tensor_elements(info) * ollama_type_size(kind) // ollama_block_size(kind)


def group_layers(tensors: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """`Tensors.GroupLayers`: tensors by layer, then by the rest of their name.

    A name is split at its dots; at the first part that is `blk` or `mm`, that part and the next are
    joined to the parts before it, provided something follows them (`blk.0.attn_q.weight` -> `blk.0`,
    `attn_q.weight`; `v.blk.3.ffn_up.weight` -> `v.blk.3`; `mm.0.bias` -> `mm.0`). Every other tensor
    goes by its first part (`token_embd.weight` -> `token_embd`, `weight`). Within a layer a later
    tensor with the same rest of name replaces an earlier one, as in Ollama's map.
    """
    layers: dict[str, dict[str, Any]] = {}
    for name, info in tensors.items():
        parts = name.split(".")
        for i, part in enumerate(parts):
            if part in ("blk", "mm"):
                if len(parts) > i + 2:
                    parts = [".".join(parts[: i + 2]), *parts[i + 2 :]]
                break
        layers.setdefault(parts[0], {})[".".join(parts[1:])] = info
    return layers


def layer_size(layer: Mapping[str, Any]) -> U64:
    """`Layer.Size`: the sum of its tensors' sizes (uint64)."""
    total = U64(0)
    for info in layer.values():
        total = total + tensor_size(info)
    return total


@dataclass(frozen=True)
class LayerSizes:
    """Bytes of weights per layer as Ollama groups them (`groups`: `blk.0`, `v.blk.0`, `mm.0`,
    `token_embd`, `output_norm`, ...), and the output layer as `llm/server.go` counts it:
    `output_norm` plus `output`, or plus `token_embd` when there is no `output`."""

    groups: dict[str, int] = field(default_factory=dict)
    output: int = 0

    def block(self, i: int) -> int:
        """The weights of repeating layer `blk.i` (0 when the model has none, as Ollama counts it)."""
        return self.groups.get(f"blk.{i}", 0)


def layer_sizes(model: Any) -> LayerSizes:
    """Bytes of weights per layer group and of the output layer, from the tensor infos only."""
    try:
        layers = group_layers(model.tensors)
        groups = {name: int(layer_size(layer)) for name, layer in layers.items()}
    except FormatError as e:
        raise FormatError(getattr(model, "path", None), None, e.reason) from None
    output = U64(groups.get("output_norm", 0))
    if "output" in groups:
        output = output + groups["output"]
    elif "token_embd" in groups:
        output = output + groups["token_embd"]
    return LayerSizes(groups, int(output))
