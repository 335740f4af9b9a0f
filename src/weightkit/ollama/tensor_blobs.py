"""Ollama's safetensors tensor blobs: its generic quantization rule and the helpers its per-architecture
policies share (x/create's GetTensorQuantization and quantpolicy.go), expert groups, blob metadata, and the
loader that turns a manifest's tensor layers back into one model.

A blob holds one tensor, or one tensor quantized with MLX (`{name}` packed U32, `{name}.scale`, and for the
affine modes `{name}.bias`), or the stacked expert projections of one layer. `__metadata__` says `quant_type` and
`group_size` for the whole blob, or `<name>.quant_type` / `<name>.group_size` per tensor when a blob mixes
types (x/create/quantize.go).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from types import MappingProxyType

import numpy as np

from ..dtypes import MLXQuantType, numpy_dtype
from ..errors import FormatError, UnsupportedError
from ..model import ShardedModelFile, TensorInfo
from ..quant.mlx import blob_quant_params, canonical_quant_type, check_layout, mlx_dequantize
from ..safetensors import SafetensorsFile
from .store import Layer

_EXPERT_MARKERS = (
    ".mlp.experts.", ".mlp.shared_experts.", ".mlp.switch_mlp.", ".moe.experts.", ".mixer.experts.",
    ".mixer.shared_experts.",
)  # fmt: skip
_EXPERT_LAYER = re.compile(
    r"^(?:model\.language_model\.backbone\.|model\.language_model\.|language_model(?:\.model)?\.|"
    r"language_model\.backbone\.|model\.|backbone\.|mtp\.)?layers\.\d+$"
)
_ROUTING_GATES = (".mlp.gate.weight", ".mixer.gate.weight", ".shared_expert_gate.weight", ".router.proj.weight")


def canonical_quant(text: str) -> MLXQuantType:
    """Ollama's spellings (int4, Q4, FP8, NVFP4, ...) to a quant type."""
    try:
        return MLXQuantType(canonical_quant_type(text))
    except ValueError:
        raise UnsupportedError(f"unknown quantization {text!r}; one of int4, int8, nvfp4, mxfp4, mxfp8") from None


def _stacked_expert(name: str) -> bool:
    if name.endswith((".bias", ".scale", ".qbias")):
        return False
    return any(m in name for m in (".experts.", ".mlp.switch_mlp.", ".mlp.shared_experts.", ".mixer.shared_experts."))


def _should_quantize(name: str) -> bool:
    """ShouldQuantize (for language models): linear weights, not embeddings, norms, biases or audio."""
    if is_audio_tower(name) or "embed" in name:
        return False
    if "norm" in name or "ln_" in name or "layernorm" in name:
        return False
    return name.endswith(".weight")


def aligned(shape: tuple[int, ...], q: MLXQuantType) -> bool:
    """MLX quantizes whole groups along the last axis (x/create's isAligned)."""
    return bool(shape) and shape[-1] % q.group_size == 0


def eight_bit(q: MLXQuantType) -> MLXQuantType:
    """The 8-bit type of `q`'s family: int8 for the affine types, mxfp8 for the fp4 ones."""
    return MLXQuantType.INT8 if q.mode == "affine" else MLXQuantType.MXFP8


def is_vision(name: str) -> bool:
    """A tensor of a vision tower, embedder or projection, kept at source precision."""
    return "vision" in name or "visual" in name


def is_audio_tower(name: str) -> bool:
    return "audio_tower" in name or "embed_audio" in name


def is_embed_tokens_weight(name: str) -> bool:
    """The main token embedding (not Gemma's per-layer ones)."""
    return name.endswith("embed_tokens.weight") and "per_layer" not in name


_LAYER_INDEX = re.compile(r"\.layers\.(\d+)\.")


def layer_index(name: str) -> int:
    """The block number in a tensor name (`....layers.5....`), or -1."""
    m = _LAYER_INDEX.search(name)
    return int(m[1]) if m else -1


def use_more_bits(layer: int, n_layers: int, middle_end: int | None = None) -> bool:
    """quantpolicy.go's useMoreBits: the first and last eighth of the layers and every third between them
    (up to `middle_end`, by default the start of the last eighth) take more bits."""
    if layer < 0 or n_layers <= 0:
        return False
    first, last = n_layers // 8, 7 * n_layers // 8
    middle_end = last if middle_end is None else middle_end
    return layer < first or layer >= last or (first <= layer < middle_end and (layer - first) % 3 == 2)


def promote_embedding(shape: tuple[int, ...], base: MLXQuantType) -> MLXQuantType | None:
    """The 8-bit type of `base`'s family for an embedding that fits it, else None."""
    eight = eight_bit(base)
    return eight if aligned(shape, eight) else None


def sensitive_type(promote: bool, shape: tuple[int, ...], base: MLXQuantType) -> MLXQuantType | None:
    """A v/k/down projection: the 8-bit type when promoted and it fits, else `base` when it fits, else None."""
    if promote and aligned(shape, eight_bit(base)):
        return eight_bit(base)
    return base if aligned(shape, base) else None


def tensor_quantization(name: str, shape: tuple[int, ...], quantize: MLXQuantType) -> MLXQuantType | None:
    """The type Ollama quantizes a tensor to, or None to keep it (x/create's GetTensorQuantization):
    2-D linear weights (3-D stacked experts) of 1024+ elements, not routers or vision; lm_head, and for
    int4 (and fp4 outside experts) v_proj, k_proj and down_proj, promoted to the 8-bit type."""
    stacked = _stacked_expert(name)
    if not stacked and not _should_quantize(name):
        return None
    if len(shape) != 2 and not (len(shape) == 3 and stacked):
        return None
    if int(np.prod(shape)) < 1024 or name.endswith(_ROUTING_GATES):
        return None
    if name.endswith("lm_head.weight"):
        return promote_embedding(shape, quantize)
    if is_vision(name) or not aligned(shape, quantize):
        return None
    fp4 = quantize in (MLXQuantType.NVFP4, MLXQuantType.MXFP4)
    sensitive = ".v_proj" in name or ".k_proj" in name or "down_proj" in name
    if sensitive and (quantize is MLXQuantType.INT4 or (fp4 and not stacked)):
        return promote_embedding(shape, quantize) or quantize
    return quantize


def expert_group_prefix(name: str) -> str:
    """The blob an expert tensor is packed into (`model.layers.1.mlp.experts`), or "" for its own blob."""
    if not name.endswith(".weight"):
        return ""
    for marker in _EXPERT_MARKERS:
        i = name.find(marker)
        if i >= 0 and _EXPERT_LAYER.match(name[:i]):
            return name[:i] + marker.rstrip(".")
    return ""


def blob_metadata(items: Iterable[tuple[str, MLXQuantType | None]]) -> dict[str, str] | None:
    """One quant_type/group_size for a blob whose quantized tensors agree, else per-tensor keys, as Ollama
    decides it (an unquantized tensor after a quantized one also makes the blob mixed)."""
    items = list(items)
    uniform, mixed, seen = None, False, False
    for _, q in items:
        if q is None:
            mixed = mixed or seen
        elif not seen:
            seen, uniform = True, q
        elif q is not uniform:
            mixed = True
    if not seen:
        return None
    if not mixed:
        return {"quant_type": uniform.value, "group_size": str(uniform.group_size)}
    md: dict[str, str] = {}
    for name, q in items:
        if q is not None:
            md[f"{name}.quant_type"] = q.value
            md[f"{name}.group_size"] = str(q.group_size)
    return md


def _quant_metadata(md: dict[str, str], name: str) -> dict[str, str]:
    """A tensor's quant_type and group_size: its own keys in a mixed blob, else the blob's."""
    found = {key: md.get(f"{name}.{key}", md.get(key)) for key in ("quant_type", "group_size")}
    return {key: value for key, value in found.items() if value is not None}


def _layout(info: TensorInfo) -> tuple[tuple[int, ...], np.dtype | None]:
    return info.shape, numpy_dtype(info.dtype)


class TensorBlobModel(ShardedModelFile):
    """A model stored as tensor blobs, opened as one model. Quantized tensors have an `MLXQuantType` dtype and
    their logical shape; `tensor(name)` dequantizes them as MLX does, `raw(name)` is the packed words."""

    format = "ollama"

    def __init__(
        self, path: Path, layers: list[Layer], blob_path, config: dict | None, *, framework: str = "numpy"
    ) -> None:
        self.config = config
        self.shards: list[SafetensorsFile] = []
        self._quant: dict[str, tuple[MLXQuantType, int, str, str | None, str | None]] = {}
        tensors: dict[str, TensorInfo] = {}
        try:
            for layer in layers:
                blob = SafetensorsFile(blob_path(layer.digest), framework=framework)
                self.shards.append(blob)
                self._add_blob(len(self.shards) - 1, blob, layer.name, tensors)
        except BaseException:
            self.close()
            raise
        self.framework = framework
        super().__init__(path, MappingProxyType({"ollama.layers": str(len(layers))}), tensors)

    def _add_blob(self, index: int, blob: SafetensorsFile, layer_name: str, tensors: dict[str, TensorInfo]) -> None:
        """A layer named by a tensor key brings that tensor; one named by a group prefix brings them all."""
        md = dict(blob.metadata)
        names = [layer_name] if layer_name in blob.tensors else list(blob.tensors)
        own = {name: _quant_metadata(md, name) for name in names}
        quantized = {name for name in names if own[name].get("quant_type") and f"{name}.scale" in blob.tensors}
        companions = {f"{name}.{part}" for name in quantized for part in ("scale", "bias", "global_scale")}
        for name in names:
            info = blob.tensors[name]
            if name in companions:
                continue
            if name not in quantized:
                tensors[name] = info._replace(shard=index)
                continue
            bias = f"{name}.bias" if f"{name}.bias" in blob.tensors else None
            try:
                q_name, _, _, group = blob_quant_params(own[name])
                biases = None if bias is None else _layout(blob.tensors[bias])
                check_layout(q_name, group, _layout(info), _layout(blob.tensors[f"{name}.scale"]), biases)
            except (ValueError, TypeError) as e:
                raise FormatError(blob.path, None, f"tensor {name!r}: {e}") from None
            q = MLXQuantType(q_name)
            shape = (*info.shape[:-1], info.shape[-1] * 32 // q.bits)
            glob = f"{name}.global_scale" if f"{name}.global_scale" in blob.tensors else None
            self._quant[name] = (q, group, f"{name}.scale", bias, glob)
            tensors[name] = TensorInfo(name, q, shape, info.offset, info.nbytes, index)

    def _array(self, name: str) -> np.ndarray:
        if name not in self._quant:
            return super()._array(name)
        q, group, scale, bias, glob = self._quant[name]
        blob = self.shards[self.tensors[name].shard]
        biases = None if bias is None else blob._array(bias)
        out = mlx_dequantize(blob._array(name), blob._array(scale), biases, q.value, group)
        if glob is None:
            return out
        # x/mlxrunner's Dequantize: times the global scale (one, or one per row), back in the output's dtype
        factor = np.asarray(blob._array(glob), np.float32)
        factor = factor.reshape(-1, 1) if factor.size > 1 else factor.reshape(())
        return (out.astype(np.float32) * factor).astype(out.dtype)
