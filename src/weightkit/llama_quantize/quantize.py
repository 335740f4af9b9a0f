"""Re-quantize a GGUF model the way llama.cpp's `llama-quantize` does, streaming one tensor, and within it a
bounded group of rows, at a time.

The target is a llama.cpp file type such as Q4_K_M or Q8_0, whose per-tensor mixture `mixes` reproduces,
or with `pure` its base type for every weight matrix (`QuantizeOptions`). Which tensors are quantized, the fallback for
rows that are not whole blocks of the chosen type, the `--output-tensor-type` / `--token-embedding-type`
overrides, the imatrix file and `general.file_type` follow llama.cpp's `src/llama-quant.cpp` and
`tools/quantize/quantize.cpp`.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import quant
from ..dtypes import GGMLType, ggml_type, view_as
from ..errors import ArgumentError, WeightkitError
from ..gguf import GGUFValueType, GGUFWriter, Value, open_gguf, plan_tensor, row_groups
from ..gguf.constants import KEY_ARCHITECTURE, KEY_FILE_TYPE
from ..gguf.split import SPLIT_KEYS, split_keys, split_path
from ..model import ModelFile
from .imatrix import ImportanceMatrix, read_imatrix
from .mixes import OUTPUT, TOKEN_EMBEDDINGS, FileType, MixPlanner, ModelFacts, prune_renames
from .options import FTYPE_GUESSED, QuantizeOptions

_T = GGMLType

# Name fragments llama.cpp never quantizes: norms, MoE routers, tiny, positional or multimodal matrices
# (tensor_allows_quantization in src/llama-quant.cpp).
_NEVER = (
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
    "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
    "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
    "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
    "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
    "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
    "mm.a.code_embd",
)  # fmt: skip
_NEVER_EXACT = ("position_embd.weight", "token_types.weight")
# ... and for some architectures a few more.
_NEVER_FOR = {
    "glm5-next": (
        "hc_", "indexer.attn_q_b", "indexer.attn_k", "indexer.proj", "indexer_compressor_gate",
        "indexer_compressor_ape", "ssm_f_a.weight", "ssm_f_b.weight", "ssm_g_a.weight", "ssm_g_b.weight",
        "ssm_beta.weight", "attn_kv_a_mqa.weight", "attn_k_b.weight", "attn_v_b.weight",
    ),
}  # fmt: skip

# tensor_type_fallback: for rows that are not whole blocks of the chosen type (then F16 if that fails too;
# types of blocks of 32 or fewer without an entry go to F16 directly).
_FALLBACK = {
    _T.IQ1_S: _T.IQ4_NL, _T.IQ1_M: _T.IQ4_NL, _T.IQ2_XXS: _T.IQ4_NL, _T.IQ2_XS: _T.IQ4_NL, _T.IQ2_S: _T.IQ4_NL,
    _T.IQ3_XXS: _T.IQ4_NL, _T.IQ3_S: _T.IQ4_NL, _T.IQ4_XS: _T.IQ4_NL, _T.Q2_0: _T.Q4_0, _T.Q2_K: _T.Q4_0,
    _T.Q3_K: _T.Q4_0, _T.TQ1_0: _T.Q4_0, _T.TQ2_0: _T.Q4_0, _T.Q4_K: _T.Q5_0, _T.Q5_K: _T.Q5_1, _T.Q6_K: _T.Q8_0,
}  # fmt: skip

# ggml cannot quantize these without an importance matrix (ggml_quantize_requires_imatrix) ...
GGML_NEEDS_IMATRIX = frozenset({_T.IQ2_XXS, _T.IQ2_XS, _T.IQ1_S})
# ... and llama-quantize refuses these too without one, except for the embedding and output matrices.
LLAMA_NEEDS_IMATRIX = GGML_NEEDS_IMATRIX | {_T.IQ3_XXS, _T.IQ2_S, _T.IQ1_M}
_IMATRIX_EXEMPT = (*TOKEN_EMBEDDINGS, OUTPUT)

KEY_QUANT_VERSION = "general.quantization_version"
GGML_QNT_VERSION = 2

# llama_model_loader's guess of a file's type with no general.file_type: the file type (llama_ftype) here for the
# type most of its tensors have (the first to reach the count, in name order), marked guessed; other types
# guess ALL_F32.
_GUESSED_FILE_TYPE = {
    _T.F32: 0, _T.F16: 1, _T.BF16: 32, _T.Q4_0: 2, _T.Q4_1: 3, _T.Q5_0: 8, _T.Q5_1: 9, _T.Q8_0: 7, _T.Q2_K: 10,
    _T.Q3_K: 12, _T.Q4_K: 15, _T.Q5_K: 17, _T.Q6_K: 18, _T.TQ1_0: 36, _T.TQ2_0: 37, _T.IQ2_XXS: 19,
    _T.IQ2_XS: 20, _T.IQ2_S: 28, _T.IQ3_XXS: 23, _T.IQ1_S: 24, _T.IQ1_M: 31, _T.IQ4_NL: 25, _T.IQ4_XS: 30,
    _T.IQ3_S: 26, _T.NVFP4: 39, _T.Q1_0: 40, _T.Q2_0: 41,
}  # fmt: skip


def is_quantizable(name: str, shape: tuple[int, ...], arch: str = "") -> bool:
    """Does llama-quantize quantize this tensor at all? (2-D and 3-D weights, but not norms and the like)"""
    return (
        name.endswith("weight")
        and len(shape) >= 2
        and name not in _NEVER_EXACT
        and _never_pattern(arch).search(name) is None
    )


@functools.cache
def _never_pattern(arch: str) -> re.Pattern[str]:
    """One pattern matching any of the fragments `arch`'s tensors are never quantized for: a plan asks for
    every tensor of a model, and dozens of substring tests a name add up over thousands of tensors."""
    return re.compile("|".join(map(re.escape, (*_NEVER, *_NEVER_FOR.get(arch, ())))))


def ggml_dims(shape: tuple[int, ...]) -> tuple[int, ...]:
    """`shape` as ggml counts its dimensions (`ggml_n_dims`: outer sizes of 1 do not count, one dimension at
    least): what llama-quantize decides by and writes (a converter's [1, n] gate is a vector to it)."""
    dims = tuple(shape)
    while len(dims) > 1 and dims[0] == 1:
        dims = dims[1:]
    return dims


def compatible_type(target: GGMLType, row: int) -> GGMLType:
    """`target`, or llama.cpp's fallback when a row of `row` elements is not whole blocks of it."""
    if row % ggml_type(target).block_size == 0:
        return target
    fallback = _FALLBACK.get(target)
    if fallback is None and ggml_type(target).block_size <= 32:
        return _T.F16
    if fallback is None:
        raise WeightkitError(f"rows of {row} elements cannot be stored as {target.name}, and it has no fallback")
    return fallback if row % ggml_type(fallback).block_size == 0 else _T.F16


def plan_types(model: ModelFile, options: QuantizeOptions | str, *, has_imatrix: bool = False) -> dict[str, GGMLType]:
    """The type every tensor gets (in the model's order, keyed by the output's names after any
    `prune_layers`); tensors that are not quantized keep their own. `has_imatrix` matters to a few of
    llama.cpp's mixtures. See `QuantizeOptions` for the rest."""
    options = _options(options)
    renames, _ = prune_renames(model.tensors, options.prune_layers)
    tensors = {new: model.tensors[old] for old, new in renames.items() if new is not None}
    target = options.target
    arch = str(model.metadata.get(KEY_ARCHITECTURE, ""))
    output, embd = options.output_tensor_type, options.token_embedding_type
    planner = None
    if target.mixture is not None and ggml_type(target.base).quantized:
        facts = ModelFacts.from_metadata(ChainMap(options.hyperparameters, model.metadata))
        planner = MixPlanner(target.mixture, facts, tensors, has_imatrix=has_imatrix, output_type=output)
    plan = {}
    for name, info in tensors.items():  # in llama.cpp's order: the mixtures count tensors as they go
        named = next((t for pattern, t in options.patterns if pattern.search(name)), None)
        if (
            target.only_copy
            or not is_quantizable(name, ggml_dims(info.shape), arch)
            or (options.leave_output_tensor and name == OUTPUT)
        ):
            chosen = info.dtype
        elif embd is not None and name in TOKEN_EMBEDDINGS and (name == TOKEN_EMBEDDINGS[0] or named is None):
            chosen = embd  # a pattern may name the per-layer table instead (llama_tensor_get_type)
        elif output is not None and name == OUTPUT:
            chosen = output
        elif not ggml_type(target.base).quantized:
            chosen = target.base
        else:
            chosen = named if named is not None else planner.choose(name, info.shape) if planner else target.base
        plan[name] = compatible_type(chosen, info.shape[-1]) if chosen != info.dtype else chosen
    return {renames[old]: plan[renames[old]] for old in model.tensors if renames[old] is not None}


def _options(options: QuantizeOptions | str | GGMLType) -> QuantizeOptions:
    """A type name alone means the options of `llama-quantize in out TYPE`."""
    return options if isinstance(options, QuantizeOptions) else QuantizeOptions(options)


def _needs_imatrix(name: str, t: GGMLType, ftype: FileType | None) -> bool:
    """`tensor_requires_imatrix` (and ggml's own refusal): Q2_K matrices of a Q2_K_S mixture need one too."""
    if t in GGML_NEEDS_IMATRIX:
        return True
    if name in _IMATRIX_EXEMPT:
        return False
    return t in LLAMA_NEEDS_IMATRIX or (t == _T.Q2_K and ftype is not None and ftype.name == "Q2_K_S")


@dataclass
class QuantizeReport:
    """What a quantization did (or, dry, would do): the target's name, bytes before and after, each
    tensor's type change, the files written, every output tensor's type and shape (in llama-quantize's
    order), and the number of metadata keys written."""

    target: str = ""
    bytes_before: int = 0
    bytes_after: int = 0
    changes: dict[str, tuple[str, str]] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    tensors: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    metadata_keys: int = 0


Progress = Callable[[str, int, int], None]  # (tensor name, bytes done, bytes in all)


def quantize_gguf(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str] | None,
    options: QuantizeOptions | str,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> QuantizeReport:
    """Write `src` to `dst` quantized as llama-quantize would (metadata kept, file type updated).

    `options` is a `QuantizeOptions`, or just a type name (`"Q4_K_M"`, `"Q8_0"`): what
    `llama-quantize src dst TYPE` does. An imatrix file's provenance is recorded in the output, as
    llama-quantize's is. `dry_run` plans and reports without writing (`dst` may then be None).
    """
    with open_gguf(src) as model:
        return quantize_model(model, dst, options, dry_run=dry_run, progress=progress)


def _imatrix(options: QuantizeOptions) -> tuple[ImportanceMatrix | None, list[tuple[str, Value]]]:
    """The importance matrix the options name (its entries selected; None when there are none left, as
    llama-quantize then quantizes without one), and the metadata overrides: --override-kv's, then the
    imatrix file's provenance."""
    overrides = list(options.override_kv)
    imatrix = options.imatrix
    if imatrix is None:
        return None, overrides
    path = None if isinstance(imatrix, Mapping) else imatrix
    imatrix = (read_imatrix(path) if path is not None else ImportanceMatrix(imatrix)).select(
        options.include_weights, options.exclude_weights
    )
    if not imatrix:
        return None, overrides
    if path is not None:
        overrides += imatrix.provenance(path)
    return imatrix, overrides


def quantize_model(
    model: ModelFile,
    dst: str | os.PathLike[str] | None,
    options: QuantizeOptions | str,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> QuantizeReport:
    """`quantize_gguf` on an opened model: any `ModelFile` whose tensors have GGML types and whose `raw(name)`
    gives their bytes (a GGUF, or the tensors `convert_hf` makes as it goes)."""
    options = _options(options)
    imatrix, overrides = _imatrix(options)
    target, prune_layers = options.target, options.prune_layers
    plan = plan_types(model, options, has_imatrix=imatrix is not None)
    renames, n_layers = prune_renames(model.tensors, prune_layers)
    source = {new: old for old, new in renames.items() if new is not None}  # output name -> model's
    missing = [
        n
        for n, t in plan.items()
        if not target.only_copy  # COPY quantizes nothing, so needs nothing
        and _needs_imatrix(n, t, target.mixture)
        and (imatrix is None or source[n] not in imatrix)
    ]
    if missing:
        raise WeightkitError(
            f"{plan[missing[0]].name} needs an importance matrix (--imatrix) for {missing[0]!r}"
            + (f" and {len(missing) - 1} more tensors" if len(missing) > 1 else "")
        )
    # llama-quantize writes the tensors by layer, then name: so the same input gives the same file
    planned = [plan_tensor(new, ggml_dims(model.tensors[old].shape), plan[new]) for new, old in source.items()]
    report = QuantizeReport(
        target=target.name,
        bytes_before=sum(model.tensors[old].nbytes for old in source.values()),
        bytes_after=sum(p.nbytes for p in planned),
        changes={
            new: (model.tensors[old].dtype.name, plan[new].name)
            for new, old in source.items()
            if plan[new] != model.tensors[old].dtype
        },
        tensors={p.name: (p.type.name, p.shape) for p in planned},
    )
    if dry_run:
        return report
    if dst is None:
        raise ArgumentError("quantize_gguf needs an output path unless dry_run")
    ftype_id = input_file_type(model) if target.only_copy else target.file_type_id
    metadata = _output_metadata(model, ftype_id, overrides, n_layers if prune_layers else None)
    report.metadata_keys = len(metadata)
    done = 0
    for path, shard_metadata, tensors in _outputs(model, source, dst, metadata, planned, options.keep_split):
        with GGUFWriter(path, shard_metadata, byte_order=model.byte_order) as w:
            for p in tensors:
                w.add_planned(p)
            for p in tensors:
                old = source[p.name]
                weights = None if imatrix is None else imatrix.get(old)
                w.write_tensor(p.name, _converted(model, old, plan[p.name], weights))
                done += model.tensors[old].nbytes
                if progress is not None:
                    progress(p.name, done, report.bytes_before)
        report.outputs.append(str(path))
    return report


def input_file_type(model: ModelFile) -> int:
    """The file type llama.cpp's loader gives a model (what COPY writes): its general.file_type, else a
    guess from its tensors' most common type (`_GUESSED_FILE_TYPE`), marked guessed (| 1024)."""
    stated = model.metadata.get(KEY_FILE_TYPE)
    if stated is not None:
        return int(stated)
    counts: dict[GGMLType, int] = {}
    most, most_type = 0, _T.F32
    for name in sorted(model.tensors, key=lambda n: n.encode()):  # a std::map's order: bytewise
        t = model.tensors[name].dtype
        counts[t] = counts.get(t, 0) + 1
        if counts[t] > most:
            most, most_type = counts[t], t
    return _GUESSED_FILE_TYPE.get(most_type, 0) | FTYPE_GUESSED


def _output_metadata(
    model: ModelFile, ftype_id: int, overrides: Sequence[tuple[str, Value]], n_layers: int | None
) -> dict[str, Value]:
    """The model's metadata as llama-quantize writes it: split keys dropped; quantization version, file
    type, the overrides and (after pruning) the layer count set last, each by removing the key and
    appending it, as llama.cpp's gguf_set_val does."""
    metadata = dict(model.metadata.typed_items())
    for key in SPLIT_KEYS:
        metadata.pop(key, None)
    u32 = GGUFValueType.UINT32
    updates = [(KEY_QUANT_VERSION, Value(GGML_QNT_VERSION, u32)), (KEY_FILE_TYPE, Value(ftype_id, u32)), *overrides]
    if n_layers is not None:
        updates.append((f"{model.metadata.get(KEY_ARCHITECTURE, '')}.block_count", Value(n_layers, u32)))
    for key, value in updates:
        metadata.pop(key, None)
        metadata[key] = value
    return metadata


def _outputs(
    model: ModelFile,
    source: Mapping[str, str],
    dst: str | os.PathLike[str],
    metadata: dict,
    planned: list,
    keep_split: bool,
) -> list[tuple[Path, dict, list]]:
    """(path, metadata, tensors) of each file to write. One file, tensors in llama.cpp's order; or with
    `keep_split` llama-quantize's --keep-split: a shard per source shard, `<dst without .gguf>-0000i-of-
    0000n.gguf`, tensors in source order, the first shard with the metadata, each with the split keys."""
    if not keep_split:
        return [(Path(dst), metadata, planned)]
    infos = {new: model.tensors[old] for new, old in source.items()}
    shard_of = {name: info.shard for name, info in infos.items()}
    position = {name: (info.shard, info.offset) for name, info in infos.items()}
    planned = sorted(planned, key=lambda p: position[p.name])
    n = max(shard_of.values(), default=0) + 1
    prefix = os.fspath(dst)
    prefix = prefix[: -len(".gguf")] if prefix.endswith(".gguf") else prefix
    outputs = []
    for i in range(n):
        shard_metadata = dict(metadata) if i == 0 else {}
        if n > 1:
            shard_metadata |= split_keys(i, n, len(planned))
        outputs.append((split_path(prefix, i, n), shard_metadata, [p for p in planned if shard_of[p.name] == i]))
    return outputs


def _converted(model: ModelFile, name: str, new: GGMLType, weights: np.ndarray | None) -> Iterator[np.ndarray]:
    """The tensor's bytes as type `new`, a group of rows at a time (`row_groups`), each written before the next is
    made: the pool's tasks read (decode, or make) and encode rows of their own of a group, so the tensor is held
    whole neither in its own type nor in the new one (ggml quantizes every row by itself: the same bytes)."""
    info = model.tensors[name]
    row, n_rows = info.shape[-1], math.prod(info.shape[:-1])
    source = model.row_source(name)
    if new == info.dtype:
        for start, stop in row_groups(n_rows, row):
            yield source(start, stop)
        return
    old_t = ggml_type(info.dtype)

    def values(start: int, stop: int) -> np.ndarray:
        block = source(start, stop)
        if old_t.numpy is None:
            return quant.dequantize(block, old_t.type, (stop - start, row))
        return view_as(block.reshape(-1), old_t.numpy, model.byte_order).reshape(stop - start, row)

    for first, end, w in _imatrix_spans(name, info.shape, weights):
        for start, stop in row_groups(end - first, row):

            def rows(a: int, b: int, offset: int = first + start) -> np.ndarray:
                return values(offset + a, offset + b)

            yield quant.quantize_rows(rows, (stop - start, row), new, w)


def _imatrix_spans(
    name: str, shape: tuple[int, ...], weights: np.ndarray | None
) -> list[tuple[int, int, np.ndarray | None]]:
    """(first row, end row, importance weights) of the runs of rows quantized with one row of the imatrix: the
    whole tensor, or each of its matrices (experts) when the imatrix has a row for each."""
    row, per_matrix = shape[-1], shape[-2]
    n_rows = math.prod(shape[:-1])
    if weights is None:
        return [(0, n_rows, None)]
    weights = np.asarray(weights, np.float32).reshape(-1, row)
    n_matrices = n_rows // per_matrix
    if weights.shape[0] == 1:
        return [(0, n_rows, weights[0])]
    if weights.shape[0] != n_matrices:
        raise WeightkitError(
            f"the imatrix for {name!r} has {weights.shape[0]} rows; the tensor holds {n_matrices} matrices"
        )
    return [(m * per_matrix, (m + 1) * per_matrix, w) for m, w in enumerate(weights)]
