"""What `ollama create` makes of a safetensors checkpoint folder, decided from the headers alone (x/create's
inventory.go, classify.go, plan.go, blockfp8.go, prequant.go): the tensors found (`read_inventory`), the kind
of source and the quantization in effect (`classify`), and the blobs to write (`plan`), each a list of output
tensors with their sources, the transform that makes them and the type they are quantized to. The writer in
`create` then has nothing left to decide.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path

from ..dtypes import MLXQuantType
from ..errors import FormatError, UnsupportedError
from ..safetensors import SafetensorsFile
from .import_arch import Policy, import_policy
from .import_arch.config_fields import ConfigFieldError
from .tensor_blobs import aligned, canonical_quant, expert_group_prefix, is_embed_tokens_weight

INDEX_NAME = "model.safetensors.index.json"


@dataclass(frozen=True)
class SourceTensor:
    name: str
    dtype: str  # the safetensors dtype as the header spells it
    shape: tuple[int, ...]
    file: str  # the shard's name in the folder


@dataclass
class Inventory:
    """A checkpoint folder's config.json and every tensor its headers list (no weight data read)."""

    folder: Path
    config: dict
    tensors: dict[str, SourceTensor]

    def sorted_names(self) -> list[str]:
        return sorted(self.tensors)

    @property
    def architecture(self) -> str:
        """What Ollama keys a checkpoint by: its first architecture, else its (text) model_type."""
        arch = self.config.get("architectures")
        if isinstance(arch, list) and arch and isinstance(arch[0], str) and arch[0]:
            return arch[0]
        for where in (self.config, self.config.get("text_config")):
            if isinstance(where, dict) and isinstance(where.get("model_type"), str) and where["model_type"]:
                return where["model_type"]
        return ""

    def quantization_configs(self) -> list[dict]:
        """The config's quantization sections, in the order Ollama consults them."""
        found = []
        for where in (self.config, self.config.get("text_config")):
            for key in ("quantization", "quantization_config", "compression_config"):
                section = where.get(key) if isinstance(where, dict) else None
                found.append(section if isinstance(section, dict) else {})
        return found


def _config_error(folder: Path, what: str) -> FormatError:
    return FormatError(folder / "config.json", None, what)


def read_inventory(folder: str | os.PathLike[str]) -> Inventory:
    """config.json and the tensors of the checkpoint's weights: the index's shards, or without an index
    model.safetensors or the sharded model-*.safetensors (other .safetensors files, such as Mistral's
    consolidated ones, are not the model). An index naming a tensor no shard holds is an incomplete download."""
    folder = Path(folder)
    try:
        config = json.loads((folder / "config.json").read_bytes())
    except FileNotFoundError:
        raise FormatError(folder, None, "no config.json: not a Hugging Face checkpoint folder") from None
    except ValueError as e:
        raise _config_error(folder, f"not JSON: {e}") from None
    if not isinstance(config, dict):
        raise _config_error(folder, "not a JSON object")
    _check_quantization_configs(folder, config)
    index = _read_index(folder)
    if index:
        files = sorted(set(index.values()))
        for f in files:
            if not f or Path(f).name != f or not f.endswith(".safetensors"):
                raise FormatError(folder / INDEX_NAME, None, f"the index names an invalid shard path {f!r}")
    else:
        files = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name.startswith("model")
                       and p.name.endswith(".safetensors"))  # fmt: skip
        if "model.safetensors" in files and len(files) > 1:
            raise FormatError(folder, None, "both model.safetensors and sharded model-*.safetensors: ambiguous")
    tensors: dict[str, SourceTensor] = {}
    for file in files:
        if not (folder / file).is_file():
            raise FormatError(folder / file, None, "the index names this shard but it is missing (incomplete)")
        with SafetensorsFile(folder / file) as st:
            for name, info in st.tensors.items():
                if index and name not in index:
                    continue
                if index and index[name] != file:
                    raise FormatError(folder / file, None, f"tensor {name!r} is indexed in {index[name]!r}")
                if name in tensors:
                    raise FormatError(folder / file, None, f"duplicate tensor {name!r}: also in {tensors[name].file}")
                tensors[name] = SourceTensor(name, info.dtype.value, tuple(info.shape), file)
    for name, file in index.items():
        if name not in tensors:
            raise FormatError(folder / file, None, f"tensor {name!r} of the index is not in it (incomplete)")
    if not tensors:
        raise FormatError(folder, None, "no model weights found")
    return Inventory(folder, config, tensors)


def _read_index(folder: Path) -> dict[str, str]:
    path = folder / INDEX_NAME
    if not path.is_file():
        return {}
    try:
        weight_map = json.loads(path.read_bytes()).get("weight_map") or {}
    except (ValueError, AttributeError) as e:
        raise FormatError(path, None, f"not a JSON index: {e}") from None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise FormatError(path, None, "weight_map must map tensor names to shard names")
    return weight_map


_QUANT_FIELDS = {"bits": int, "group_size": int, "mode": str, "format": str, "quant_method": str,
                 "weight_block_size": list, "config_groups": dict}  # fmt: skip


def _check_quantization_configs(folder: Path, config: dict) -> None:
    """A config Go's decoder would refuse (a field of the wrong JSON type) is refused here."""
    arch = config.get("architectures")
    if arch is not None and not (isinstance(arch, list) and all(isinstance(a, str) for a in arch)):
        raise _config_error(folder, "architectures is not a list of strings")
    text = config.get("text_config")
    if text is not None and not isinstance(text, dict):
        raise _config_error(folder, "text_config is not an object")
    for where, prefix in ((config, ""), (text or {}, "text_config.")):
        if where.get("model_type") is not None and not isinstance(where["model_type"], str):
            raise _config_error(folder, f"{prefix}model_type is not a string")
    for where, prefix in ((config, ""), (config.get("text_config"), "text_config.")):
        if not isinstance(where, dict):
            continue
        for key in ("quantization", "quantization_config", "compression_config"):
            section = where.get(key)
            if section is None:
                continue
            if not isinstance(section, dict):
                raise _config_error(folder, f"{prefix}{key} is not an object")
            for name, kind in _QUANT_FIELDS.items():
                value = section.get(name)
                if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                    raise _config_error(folder, f"{prefix}{key}.{name} is not a JSON {kind.__name__}")
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in section.get("weight_block_size") or []):
                raise _config_error(folder, f"{prefix}{key}.weight_block_size must be integers")


class SourceKind(Enum):
    FLOAT = "float"  # bf16/fp16/fp32: quantized on request
    BLOCK_FP8 = "block-fp8"  # Hugging Face block-FP8: decoded and quantized to mxfp8
    PREQUANTIZED = "prequantized"  # MLX, ModelOpt or compressed-tensors quantized: copied through


@dataclass(frozen=True)
class Classification:
    kind: SourceKind
    quantize: MLXQuantType | None


_E4M3 = ("F8_E4M3", "F8_E4M3FN")
_E5M2 = ("F8_E5M2", "F8_E5M2FNUZ")


def classify(inv: Inventory, requested: str | None) -> Classification:
    """The source's kind and the quantization in effect, refusing a request its kind does not allow."""
    want = canonical_quant(requested) if requested and requested.strip() else None
    for name, t in inv.tensors.items():
        if name.endswith(".weight") and t.dtype.upper() in _E5M2:
            raise UnsupportedError(f"{inv.folder}: tensor {name!r} is F8_E5M2; only F8_E4M3 block-FP8 is imported")
    kind = _detect_kind(inv)
    if kind is SourceKind.FLOAT:
        return Classification(kind, want)
    if kind is SourceKind.PREQUANTIZED:
        if want is not None:
            raise UnsupportedError(f"{inv.folder}: the checkpoint is quantized already; it cannot be quantized "
                                   f"to {want.value} (only bf16/fp16/fp32 sources can)")  # fmt: skip
        return Classification(kind, _prequantized_type(inv))
    rows_cols = fp8_block_size(inv)
    if rows_cols is None:
        raise UnsupportedError(f"{inv.folder}: an FP8 checkpoint without weight_block_size in its config")
    if rows_cols != (128, 128):
        raise UnsupportedError(f"{inv.folder}: FP8 block size {rows_cols[0]}x{rows_cols[1]} (only 128x128)")
    if want is not None:
        raise UnsupportedError(f"{inv.folder}: an FP8 checkpoint is converted to mxfp8 as it is; it cannot be "
                               f"quantized to {want.value}")  # fmt: skip
    return Classification(kind, MLXQuantType.MXFP8)


def _detect_kind(inv: Inventory) -> SourceKind:
    fp8 = False
    for name, t in inv.tensors.items():
        if name.endswith((".scales", ".weight_packed")):
            return SourceKind.PREQUANTIZED
        if name.endswith(".weight_scale"):
            base = inv.tensors.get(name.removesuffix("_scale"))
            if base is not None and base.dtype.upper() in ("U8", "U32"):
                return SourceKind.PREQUANTIZED
        fp8 = fp8 or (name.endswith(".weight") and t.dtype.upper() in _E4M3)
    return SourceKind.BLOCK_FP8 if fp8 else SourceKind.FLOAT


def fp8_block_size(inv: Inventory) -> tuple[int, int] | None:
    """The FP8 block (rows, cols): `weight_block_size`, or a compressed-tensors float group's block."""
    for q in inv.quantization_configs():
        block = q.get("weight_block_size") or []
        if str(q.get("quant_method", "")).lower() == "fp8" and len(block) == 2:
            return block[0], block[1]
        if str(q.get("quant_method", "")).lower() != "compressed-tensors" and (
            str(q.get("format", "")).lower() != "float-quantized"
        ):
            continue
        for group in (q.get("config_groups") or {}).values():
            w = group.get("weights") if isinstance(group, dict) else None
            if not isinstance(w, dict) or str(group.get("format", "")).lower() != "float-quantized":
                continue
            shape = w.get("block_structure") or []
            if w.get("num_bits") == 8 and str(w.get("type", "")).lower() == "float" and len(shape) == 2:
                return shape[0], shape[1]
    return None


def source_quant_metadata(inv: Inventory) -> dict[str, str]:
    """The first quantization section with bits: its quant_type and group_size (sourceModelConfig.QuantMetadata)."""
    q = next((q for q in inv.quantization_configs() if q.get("bits")), {})
    mode, bits = str(q.get("mode", "")).lower(), q.get("bits")
    quant_type = {("affine", 4): "int4", ("affine", 8): "int8"}.get((mode, bits))
    quant_type = quant_type or (mode if mode in ("nvfp4", "mxfp4", "mxfp8") else None)
    if quant_type is None:
        return {}
    md = {"quant_type": quant_type}
    if isinstance(q.get("group_size"), int) and q["group_size"] > 0:
        md["group_size"] = str(q["group_size"])
    return md


# The plan.

# The transforms (x/create's Transform): how a tensor is made from its sources.
NONE = ""  # one source, copied
REPACK_FP4 = "repack_fp4"  # U8 fp4 bytes relabelled as U32 words
RELABEL_U8 = "relabel_u8"  # an F8_E4M3 scale relabelled as U8
SCALAR_F32 = "scalar_f32"  # a checked one-value F32 global scale
RECIPROCAL_F32 = "reciprocal_f32"  # its reciprocal
STACK_EXPERTS = "stack_experts"  # per-expert tensors stacked into [experts, ...]
DECODE_FP8 = "decode_fp8"  # a block-FP8 weight decoded with its scale (through MLX)
DECODE_STACK_FP8 = "decode_stack_fp8"  # per-expert block-FP8 weights stacked and decoded


@dataclass
class TensorSpec:
    """One tensor of a blob: its sources, the transform that makes it from them, its dtype and shape after
    it (None: the one source's), and the type it is quantized to (None: stored as made)."""

    name: str
    sources: list[SourceTensor]
    transform: str = NONE
    quantize: MLXQuantType | None = None
    out_dtype: str | None = None
    out_shape: tuple[int, ...] | None = None


@dataclass
class BlobSpec:
    name: str
    tensors: list[TensorSpec]
    metadata: dict[str, str] | None = field(default=None)


def architecture_policy(inv: Inventory) -> Policy:
    """The policy `tensorImportTransformRegistry` gives the checkpoint's architecture, its config checked."""
    try:
        return import_policy(inv.architecture, inv.config)
    except ConfigFieldError as e:
        raise _config_error(inv.folder, f"{inv.architecture}: {e}") from None


def plan(inv: Inventory, cls: Classification, policy: Policy | None = None) -> list[BlobSpec]:
    """The blobs to write, in Ollama's order. `policy`: the architecture's (the table's, by default)."""
    if policy is None:
        policy = architecture_policy(inv)
    if cls.kind is SourceKind.FLOAT:
        specs = _plan_float(inv, cls.quantize, policy)
    elif cls.kind is SourceKind.PREQUANTIZED:
        specs = _plan_prequantized(inv)
    else:
        specs = _plan_block_fp8(inv, cls.quantize, policy)
    blobs: set[str] = set()
    owner: dict[str, str] = {}
    for spec in specs:
        if spec.name in blobs:
            raise FormatError(inv.folder, None, f"two blobs named {spec.name!r} (source tensors clash)")
        blobs.add(spec.name)
        for t in spec.tensors:
            if t.name in owner:
                raise FormatError(inv.folder, None, f"output tensor {t.name!r} planned in blobs {owner[t.name]!r} "
                                  f"and {spec.name!r} (source tensors clash)")  # fmt: skip
            owner[t.name] = spec.name
    return specs


def _quantize(policy: Policy, name: str, shape: tuple[int, ...], q: MLXQuantType | None) -> MLXQuantType | None:
    return None if q is None else policy(name, shape, q)


def per_expert_group(name: str) -> str:
    """The group a per-expert weight (`<layer>.mlp.experts.3.gate_proj.weight`) is stacked in, or ""."""
    gp = expert_group_prefix(name)
    if not gp:
        return ""
    idx = name[len(gp) + 1 :].split(".", 1)
    return gp if len(idx) == 2 and re.fullmatch(r"[+-]?\d+", idx[0]) else ""


def _plan_float(inv: Inventory, q: MLXQuantType | None, policy: Policy) -> list[BlobSpec]:
    groups: dict[str, list[SourceTensor]] = {}
    specs = []
    for name in inv.sorted_names():
        t = inv.tensors[name]
        if gp := per_expert_group(name):
            groups.setdefault(gp, []).append(t)
            continue
        specs.append(BlobSpec(name, [TensorSpec(name, [t], quantize=_quantize(policy, name, t.shape, q))]))
    for gp in sorted(groups):
        specs += _plan_expert_group(inv, gp, groups[gp], q, policy)
    return specs


def _expert_parts(gp: str, name: str) -> tuple[int, str]:
    rest = name[len(gp) + 1 :].removesuffix(".weight")
    idx, _, proj = rest.partition(".")
    return int(idx), proj


def _plan_expert_group(
    inv: Inventory, gp: str, tensors: list[SourceTensor], q: MLXQuantType | None, policy: Policy, fp8: bool = False
) -> list[BlobSpec]:
    """Each projection's experts stacked into [experts, out, in], in one blob when all take one type, else
    one blob per projection (so a blob's metadata describes all of it)."""
    by_proj: dict[str, list[tuple[int, SourceTensor]]] = {}
    for t in tensors:
        idx, proj = _expert_parts(gp, t.name)
        by_proj.setdefault(proj, []).append((idx, t))
    specs = []
    for proj in sorted(by_proj):
        experts = [t for _, t in sorted(by_proj[proj], key=lambda e: e[0])]
        base = experts[0]
        scales = [_checked_fp8_scale(inv, t) for t in experts] if fp8 else []
        for t in experts:
            if (t.dtype, t.shape) != (base.dtype, base.shape):
                raise FormatError(inv.folder / t.file, None, f"expert group {gp} projection {proj}: {t.name} is "
                                  f"{t.dtype} {list(t.shape)}, not {base.dtype} {list(base.shape)}")  # fmt: skip
        for s in scales:
            if (s.dtype, s.shape) != (scales[0].dtype, scales[0].shape):
                raise FormatError(inv.folder / s.file, None, f"expert group {gp} projection {proj}: scale "
                                  f"{s.name} does not match {scales[0].name}")  # fmt: skip
        name, shape = f"{gp}.{proj}.weight", (len(experts), *base.shape)
        specs.append(TensorSpec(name, experts + scales, DECODE_STACK_FP8 if fp8 else STACK_EXPERTS,
                                _quantize(policy, name, shape, q), base.dtype, shape))  # fmt: skip
    if len({s.quantize for s in specs}) <= 1:
        return [BlobSpec(gp, specs)] if specs else []
    return [BlobSpec(s.name, [s]) for s in specs]


def fp8_scale_for(inv: Inventory, name: str) -> str:
    """An FP8 weight's block-scale companion (`_scale_inv` before `_scale`), or ""."""
    return next((name + s for s in ("_scale_inv", "_scale") if name + s in inv.tensors), "")


def _checked_fp8_scale(inv: Inventory, weight: SourceTensor) -> SourceTensor:
    """The weight's block scale, whose shape must tile the weight in 128x128 blocks (per expert if stacked)."""
    scale = inv.tensors[fp8_scale_for(inv, weight.name)]
    *lead, rows, cols = weight.shape if len(weight.shape) in (2, 3) else (None, None)
    want = (*lead, -(-rows // 128), -(-cols // 128)) if rows is not None else None
    if scale.shape != want:
        raise FormatError(inv.folder / scale.file, None, f"tensor {scale.name!r}: FP8 scale shape {list(scale.shape)} "
                          f"for weight shape {list(weight.shape)}; want {list(want or [])}")  # fmt: skip
    return scale


def _is_fp8_weight(inv: Inventory, name: str) -> bool:
    t = inv.tensors[name]
    return name.endswith(".weight") and t.dtype.upper() in _E4M3 and bool(fp8_scale_for(inv, name))


def _plan_block_fp8(inv: Inventory, q: MLXQuantType | None, policy: Policy) -> list[BlobSpec]:
    """Every FP8 weight decoded with its block scale (to BF16) and quantized as the policy says (kept in
    BF16 when it declines); per-expert FP8 weights stacked, decoded and quantized together."""
    consumed = {fp8_scale_for(inv, n) for n in inv.tensors if _is_fp8_weight(inv, n)}
    groups: dict[str, list[SourceTensor]] = {}
    fp8_groups: dict[str, list[SourceTensor]] = {}
    specs = []
    for name in inv.sorted_names():
        if name in consumed:
            continue
        t = inv.tensors[name]
        gp = per_expert_group(name)
        if _is_fp8_weight(inv, name):
            if gp:
                fp8_groups.setdefault(gp, []).append(t)
                continue
            scale = _checked_fp8_scale(inv, t)
            specs.append(BlobSpec(name, [TensorSpec(name, [t, scale], DECODE_FP8, _quantize(policy, name, t.shape, q),
                                                    "BF16", t.shape)]))  # fmt: skip
        elif gp:
            groups.setdefault(gp, []).append(t)
        else:
            specs.append(BlobSpec(name, [TensorSpec(name, [t])]))
    for gp in sorted(groups):
        specs += _plan_expert_group(inv, gp, groups[gp], None, policy)
    for gp in sorted(fp8_groups):
        specs += _plan_expert_group(inv, gp, fp8_groups[gp], q, policy, fp8=True)
    return specs


@dataclass(frozen=True)
class PrequantPattern:
    """How one producer stores a quantized weight and its companions (suffixes after the weight's base)."""

    name: str
    weight: str
    scale: str
    repack_weight: bool = False  # U8 fp4 bytes relabelled as U32 words
    scale_as_u8: bool = False  # an F8_E4M3 scale relabelled as U8
    bias: str = ""
    global_scale: str = ""
    global_reciprocal: bool = False
    ignored: tuple[str, ...] = ()
    quant_type: str = ""  # overrides the config's
    default_group_size: str = ""  # when the config gives none


PREQUANT_PATTERNS = (
    PrequantPattern("mlx", ".weight", ".scales", bias=".biases"),
    PrequantPattern("compressed-tensors-nvfp4", ".weight_packed", ".weight_scale", True, True,
                    global_scale=".weight_global_scale", global_reciprocal=True,
                    ignored=(".input_scale", ".input_global_scale"), quant_type="nvfp4", default_group_size="16"),
    PrequantPattern("modelopt-nvfp4", ".weight", ".weight_scale", True, True, global_scale=".weight_scale_2",
                    ignored=(".input_scale", ".input_global_scale"), quant_type="nvfp4"),
)  # fmt: skip


def match_prequant(inv: Inventory, name: str) -> tuple[BlobSpec, list[str]] | None:
    """The fused blob of a quantized weight and the companions it takes, or None for any other tensor."""
    for p in PREQUANT_PATTERNS:
        if not name.endswith(p.weight) or name[: -len(p.weight)] + p.scale not in inv.tensors:
            continue
        base = name[: -len(p.weight)]
        out = base + ".weight"
        w = inv.tensors[name]
        weight = TensorSpec(out, [w])
        if p.repack_weight and w.dtype.upper() == "U8" and len(w.shape) == 2:
            weight = TensorSpec(out, [w], REPACK_FP4, None, "U32", (w.shape[0], w.shape[1] // 4))
        scale = inv.tensors[base + p.scale]
        tensors = [weight, TensorSpec(out + ".scale", [scale])]
        if p.scale_as_u8 and scale.dtype.upper() in _E4M3:
            tensors[1] = TensorSpec(out + ".scale", [scale], RELABEL_U8, None, "U8")
        consumed = [scale.name]
        if p.bias and base + p.bias in inv.tensors:
            tensors.append(TensorSpec(out + ".bias", [inv.tensors[base + p.bias]]))
            consumed.append(base + p.bias)
        if p.global_scale and base + p.global_scale in inv.tensors:
            transform = RECIPROCAL_F32 if p.global_reciprocal else SCALAR_F32
            tensors.append(TensorSpec(out + ".global_scale", [inv.tensors[base + p.global_scale]], transform))
            consumed.append(base + p.global_scale)
        consumed += [base + s for s in p.ignored if base + s in inv.tensors]
        md = source_quant_metadata(inv)
        if p.quant_type:
            md["quant_type"] = p.quant_type
        if p.default_group_size:
            md.setdefault("group_size", p.default_group_size)
        return BlobSpec(out, tensors, md or None), consumed
    return None


def _plan_prequantized(inv: Inventory) -> list[BlobSpec]:
    fused: dict[str, BlobSpec] = {}
    consumed: set[str] = set()
    for name in inv.sorted_names():
        if (m := match_prequant(inv, name)) is not None:
            fused[name] = m[0]
            consumed.update(m[1])
    specs = []
    for name in inv.sorted_names():
        if name in fused:
            specs.append(fused[name])
        elif name not in consumed:
            specs.append(BlobSpec(name, [TensorSpec(name, [inv.tensors[name]])]))
    return specs


def _prequantized_type(inv: Inventory) -> MLXQuantType | None:
    """The one quantization the prequantized weights share, or None for a mixed or unknown one."""
    found = None
    for name in inv.sorted_names():
        if (m := match_prequant(inv, name)) is None:
            continue
        try:
            q = canonical_quant((m[0].metadata or {}).get("quant_type", ""))
        except UnsupportedError:
            continue
        if found is not None and q is not found:
            return None
        found = q
    return found


# A DRAFT model's import (draft.go): planned as any model, under a policy that gives its output head the
# requested type, then every output name prefixed so it sits beside the target's in one manifest.
DRAFT_TENSOR_PREFIX = "draft."
DRAFT_CONFIG_PREFIX = "draft/"


def draft_policy(inner: Policy) -> Policy:
    """draftPolicy: the draft's output head (a tied embedding or lm_head) takes the requested type where its
    groups fit, with no 8-bit promotion (a draft's quality only moves acceptance); the rest as `inner`."""

    def policy(name: str, shape: tuple[int, ...], quantize: MLXQuantType) -> MLXQuantType | None:
        if is_embed_tokens_weight(name) or name.endswith("lm_head.weight"):
            return quantize if aligned(shape, quantize) else None
        return inner(name, shape, quantize)

    return policy


def prefix_specs(specs: list[BlobSpec], prefix: str) -> list[BlobSpec]:
    """prefixSpecs: `prefix` before every blob's and output tensor's name (their scales' and biases' follow);
    the sources keep their names in the source files."""
    return [BlobSpec(prefix + s.name, [replace(t, name=prefix + t.name) for t in s.tensors], s.metadata) for s in specs]
