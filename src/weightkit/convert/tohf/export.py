"""`convert_gguf_to_hf`: a GGUF model to a Hugging Face folder that transformers loads.

The tensors go through the architecture's table entry backwards: GGUF names to HF names (the forward map,
inverted), the forward transforms undone (Llama's rope permutation, Gemma's norm + 1, LFM2's and Qwen 3.5's squeezed
convolution kernels), stacked experts split
into one tensor each (or kept stacked, as transformers 5 has them, for an export that says so), quantized types
dequantized. They are written one at a time as `save_pretrained` lays
them out (safetensors shards of at most 5 GB and an index), beside config.json, generation_config.json and
the tokenizer files, in a temporary folder next to the destination that is renamed into place when whole.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ... import quant
from ...dtypes import GGMLType, SafetensorsDType
from ...errors import ArgumentError, FormatError, UnsupportedError
from ...gguf import open_gguf
from ...model import ModelFile
from ...safetensors import tensor_from, write_checkpoint
from .. import families
from ..families.family import Export, Transform
from ..hf.config import HFConfig
from .config import generation_ids, hf_config
from .tokenizer import tokenizer_files

DTYPE_CHOICES = ("auto", "f32", "f16", "bf16")
_SAFETENSORS = {"f32": SafetensorsDType.F32, "f16": SafetensorsDType.F16, "bf16": SafetensorsDType.BF16}
_HALF = {GGMLType.F16: "f16", GGMLType.BF16: "bf16"}
#: GGUF tensors with no place in the HF layout: rope factors HF computes from config.json.
_DROPPED = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")
MAX_SHARD_BYTES = 5 * 10**9  # save_pretrained's default max_shard_size, "5GB"

Progress = Callable[[str, int, int], None]


@dataclass
class ExportReport:
    """What `convert_gguf_to_hf` wrote: the HF class, the dtype, each tensor, the files."""

    source: str
    output: str
    architecture: str
    hf_architecture: str
    dtype: str
    tensors: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)  # HF name -> (dtype, shape)
    files: list[str] = field(default_factory=list)
    bytes_written: int = 0


@dataclass(frozen=True)
class _Out:
    """One HF tensor: where its values come from in the GGUF, and what is done to them."""

    name: str
    source: str
    expert: int | None
    shape: tuple[int, ...]
    transforms: tuple[Transform, ...]
    joined: str | None = None  # a second GGUF tensor whose rows follow the source's (a fused gate and up)


def convert_gguf_to_hf(
    gguf: str | os.PathLike[str],
    output: str | os.PathLike[str],
    dtype: str = "auto",
    progress: Progress | None = None,
    *,
    max_shard_bytes: int = MAX_SHARD_BYTES,
) -> ExportReport:
    """Write the GGUF model at `gguf` as a Hugging Face folder `output` (which must not exist, or be empty).
    `dtype`: f32, f16, bf16, or auto (the file's own type when every matrix is F16, or every one BF16; else
    f32, which holds every dequantized value exactly). `progress(tensor_name, bytes_done, bytes_total)` is
    called after each tensor is written."""
    gguf, output = Path(gguf), Path(output)
    if dtype not in DTYPE_CHOICES:
        raise ArgumentError(f"--dtype {dtype!r}: one of {', '.join(DTYPE_CHOICES)}")
    if not gguf.is_file():
        raise ArgumentError(f"{gguf}: not a file (give a GGUF model)")
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ArgumentError(f"{output}: already exists; give a new (or empty) folder")
    with open_gguf(gguf) as model:
        meta = dict(model.metadata)
        arch = str(meta.get("general.architecture"))
        export = _export(arch, meta, gguf)
        shapes = {name: tuple(info.shape) for name, info in model.tensors.items()}
        dtype = _resolve_dtype(dtype, model)
        config = hf_config(meta, export, arch, shapes, dtype)
        h = HFConfig(config)
        plan = _plan(export, arch, meta, shapes, h, gguf)
        files: dict[str, Any] = {"config.json": config}
        if ids := generation_ids(meta):
            files["generation_config.json"] = ids
        if "tokenizer.ggml.tokens" in meta:
            files |= tokenizer_files(meta, export.tokenizer, gguf, export.byte_level_class)
        report = ExportReport(str(gguf), str(output), arch, export.hf_class, dtype)
        _write(output, model, plan, h, dtype, files, report, progress, max_shard_bytes)
    return report


def _export(arch: str, meta: dict[str, Any], path: Path) -> Export:
    """The architecture's export, or the one its `general.name` picks (llama.cpp writes Mistral as `llama`)."""
    export = families.EXPORTS.get(arch)
    if export is None:
        supported = ", ".join(families.EXPORTS)
        raise UnsupportedError(f"{path}: architecture {arch!r} is not supported (supported: {supported})")
    name = str(meta.get("general.name", "")).lower()
    return next((named for word, named in export.named if word in name), export)


def _resolve_dtype(dtype: str, model: ModelFile) -> str:
    if dtype != "auto":
        return dtype
    kinds = {info.dtype for info in model.tensors.values() if len(info.shape) >= 2}
    return _HALF.get(kinds.pop(), "f32") if len(kinds) == 1 else "f32"


def _gguf_to_hf(export: Export, n_blocks: int) -> dict[str, str]:
    """GGUF -> HF names (without .weight/.bias) for blocks 0..n_blocks-1: the forward map, inverted."""
    out: dict[str, str] = {}
    for hf, gguf in export.conversion.tensor_names.items():
        for bid in range(n_blocks) if "{bid}" in hf else [None]:
            out[gguf.format(bid=bid)] = hf.replace("{bid}", str(bid))
    return out


def _plan(export: Export, arch: str, meta: dict[str, Any], shapes: dict[str, tuple[int, ...]], h: HFConfig,
          path: Path) -> list[_Out]:  # fmt: skip
    """Every HF tensor, in the GGUF's order, with its source and the inverse transforms it needs: the
    conversion's transforms undone last first, then its rewrites (`Export.rewrites_undone`)."""
    n_blocks = meta.get(f"{arch}.block_count")
    if not isinstance(n_blocks, int) or n_blocks < 0:
        raise FormatError(path, None, f"{arch}.block_count {n_blocks!r} is not a layer count")
    names = _gguf_to_hf(export, n_blocks)
    transforms = export.conversion.transforms
    plan: list[_Out] = []
    for name, shape in shapes.items():
        if name in _DROPPED:
            continue
        base, dot, suffix = name.rpartition(".")
        if (hf := names.get(name)) is None:  # else a weight or bias (a parameter such as `A_log` is named whole)
            hf = names.get(base) if suffix in ("weight", "bias") else None
            if hf is None:
                raise FormatError(path, None, f"tensor {name!r} has no Hugging Face name for {arch} "
                                              f"({n_blocks} layers in {arch}.block_count)")  # fmt: skip
            hf += dot + suffix
        steps = tuple(t for t in reversed(transforms) if t.applies_to(hf))
        if any(t.invert is None for t in steps):
            raise UnsupportedError(f"{path}: tensor {name!r}: its transform has no inverse")
        steps += tuple(t for t in export.rewrites_undone if t.applies_to(hf))
        if export.rename is not None:
            hf = export.rename(hf, h)
        if base.endswith("_exps") and export.stacked_experts:
            plan += _stacked_experts(name, hf, shape, steps, shapes, path)
        elif base.endswith("_exps"):  # stacked by the converter from one tensor per expert: `experts.N.`
            plan += [_Out(hf.replace(".experts.", f".experts.{x}."), name, x, _shape(shape[1:], steps), steps)
                     for x in range(shape[0])]  # fmt: skip
        else:
            plan.append(_Out(hf, name, None, _shape(shape, steps), steps))
    return plan


def _stacked_experts(name: str, hf: str, shape: tuple[int, ...], steps: tuple[Transform, ...],
                     shapes: dict[str, tuple[int, ...]], path: Path) -> list[_Out]:  # fmt: skip
    """transformers 5's experts: stacked as the GGUF has them, named without `.weight`, the gate's rows and the
    up projection's in one `gate_up_proj` (written where the gate is)."""
    if ".ffn_up_exps." in name:
        return []
    hf = hf.removesuffix(".weight")
    if ".ffn_gate_exps." not in name:
        return [_Out(hf, name, None, _shape(shape, steps), steps)]
    up = name.replace(".ffn_gate_exps.", ".ffn_up_exps.")
    if up not in shapes or shapes[up][:1] + shapes[up][2:] != shape[:1] + shape[2:]:
        raise FormatError(path, None, f"tensor {name!r} {list(shape)} has no up projection {up!r} of its experts "
                                      f"and width to join it with")  # fmt: skip
    joined = (shape[0], shape[1] + shapes[up][1], *shape[2:])
    return [_Out(hf.replace(".gate_proj", ".gate_up_proj"), name, None, _shape(joined, steps), steps, up)]


def _shape(shape: tuple[int, ...], steps: tuple[Transform, ...]) -> tuple[int, ...]:
    """The HF tensor's shape: the GGUF tensor's, as the steps that change it give it back."""
    for t in steps:
        if t.inverted_shape is not None:
            shape = t.inverted_shape(shape)
    return shape


def _write(output: Path, model: ModelFile, plan: list[_Out], h: HFConfig, dtype: str, files: dict[str, Any],
           report: ExportReport, progress: Progress | None, max_shard_bytes: int) -> None:  # fmt: skip
    """Stream the tensors and write the JSON files into a temporary folder, then rename it to `output`."""
    st_dtype = _SAFETENSORS[dtype]
    total = sum(int(np.prod(o.shape, dtype=np.int64)) * st_dtype.bits // 8 for o in plan)
    done = 0
    cache: dict[str, np.ndarray] = {}  # the stacked expert tensor being split, decoded once

    def values(o: _Out) -> np.ndarray:
        nonlocal done
        if o.expert is None:
            cache.clear()
            x = _float32(model, o.source)
            if o.joined is not None:
                x = np.concatenate([x, _float32(model, o.joined)], axis=1)
        else:
            if o.source not in cache:
                cache.clear()
                cache[o.source] = _float32(model, o.source)
            x = cache[o.source][o.expert]
        for t in o.transforms:
            x = t.invert(x, h)  # type: ignore[misc]
        out = quant.quantize(x, "BF16") if dtype == "bf16" else np.ascontiguousarray(x, dtype=st_dtype.numpy)
        done += int(np.prod(o.shape, dtype=np.int64)) * st_dtype.bits // 8
        if progress is not None:
            progress(o.name, done, total)
        return out

    tensors = [tensor_from(o.name, lambda o=o: values(o), st_dtype.value, o.shape) for o in plan]
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent))
    try:
        written = write_checkpoint(tmp, tensors, {"format": "pt"}, max_shard_bytes=max_shard_bytes)
        for name, content in files.items():
            if isinstance(content, bytes):
                (tmp / name).write_bytes(content)
                continue
            text = content if isinstance(content, str) else json.dumps(content, indent=2, ensure_ascii=False) + "\n"
            (tmp / name).write_text(text, encoding="utf-8")
        os.chmod(tmp, 0o777 & ~_umask())
        if output.is_dir():
            output.rmdir()  # empty, checked before
        os.rename(tmp, output)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report.tensors = {o.name: (st_dtype.value, o.shape) for o in plan}
    report.files = sorted([p.name for p in written] + list(files))
    report.bytes_written = sum((output / f).stat().st_size for f in report.files)


def _float32(model: ModelFile, name: str) -> np.ndarray:
    """A tensor's values as float32: a quantized tensor's dequantized values (float32 already) and an F32
    tensor's stored ones as they are (a view of the file), not copied once more."""
    return model.tensor(name).astype(np.float32, copy=False)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


__all__ = ["DTYPE_CHOICES", "ExportReport", "convert_gguf_to_hf"]
