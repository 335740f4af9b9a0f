"""Mixture-of-experts tensors as llama.cpp's converter writes them: one GGUF tensor per layer and kind.

Most checkpoints store each expert's projections apart (Qwen's `mlp.experts.{x}.gate_proj.weight`, Mixtral's
`block_sparse_moe.experts.{x}.w1.weight`: an `ExpertLayout`); the converter stacks a layer's experts into
`[n_experts, rows, columns]` once it has seen all of them, so the stacked tensors sit where the layer's last
expert tensor is in the sorted order.

Each function here is a `Conversion.rewrites` step: it takes the checkpoint's tensors (after the name
filters) and gives the tensors the converter goes on with, reading nothing until the writer asks; a stacked
tensor (or half of a fused one) is made a group of rows at a time from the mapped files (`joined_tensor`), so
that not even one layer's experts of one kind are held whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ...errors import FormatError
from .config import HFConfig
from .tensors import SourceTensor

Tensors = list[tuple[str, SourceTensor]]


def block_id(name: str) -> int | None:
    """The converter's block number: the first part of the name that is all digits."""
    return next((int(part) for part in name.split(".") if part.isdecimal()), None)


def derived_tensor(t: SourceTensor, name: str, shape: tuple[int, ...], read: Callable[[], np.ndarray]) -> SourceTensor:
    """A tensor made from `t` by `read`: none of `t`'s stored bytes stand for it."""
    return replace(t, name=name, shape=tuple(int(n) for n in shape), read=read, stored=None, rows=None)


#: A run of rows of a joined tensor: `count` rows of a tensor (rows along its last axis) from row `first`, or,
#: with no tensor, `count` rows of zeros.
Run = tuple[SourceTensor | None, int, int]


def joined_tensor(t: SourceTensor, name: str, shape: tuple[int, ...], runs: list[Run]) -> SourceTensor:
    """A tensor whose rows are `runs` one after another (stacked experts, the halves of fused ones, zero padding),
    made from `t`'s file. When every run's tensor is read by rows from the mapped file, so is it (`rows`): the
    writer and the quantizer take a group of rows at a time, and neither it nor its parts are held whole."""
    width, n_rows = shape[-1], int(np.prod(shape[:-1], dtype=np.int64))
    by_rows = [(None if p is None else p.stored_rows(), first, count) for p, first, count in runs]
    whole = [(None if p is None else _whole_rows(p, width), first, count) for p, first, count in runs]

    def read() -> np.ndarray:
        values = _joined_rows(whole, width)(0, n_rows)
        return (values if values.dtype in (np.float16, np.float32) else values.astype(np.float32)).reshape(shape)

    tensor = derived_tensor(t, name, shape, read)
    if any(p is not None and rows is None for (p, _, _), (rows, _, _) in zip(runs, by_rows, strict=True)):
        return tensor
    return replace(tensor, rows=_joined_rows(by_rows, width))


def stacked_tensor(parts: list[SourceTensor], name: str) -> SourceTensor:
    """Tensors of one shape stacked along a new first axis (`np.stack`), made by rows as `joined_tensor` is."""
    count = int(np.prod(parts[0].shape[:-1], dtype=np.int64))
    return joined_tensor(parts[0], name, (len(parts), *parts[0].shape), [(p, 0, count) for p in parts])


def _whole_rows(t: SourceTensor, width: int) -> Callable[[int, int], np.ndarray]:
    return lambda start, stop: t.read().reshape(-1, width)[start:stop]


def _joined_rows(runs: list[tuple[Callable[[int, int], np.ndarray] | None, int, int]],
                 width: int) -> Callable[[int, int], np.ndarray]:  # fmt: skip
    """Rows start:stop of the rows of `runs` one after another, made from the runs they overlap only; zero rows
    in the type of the others."""

    def rows(start: int, stop: int) -> np.ndarray:
        parts: list[np.ndarray | int] = []
        at = 0
        for source, first, count in runs:
            lo, hi = max(start, at), min(stop, at + count)
            if lo < hi:
                parts.append(hi - lo if source is None else source(first + lo - at, first + hi - at).reshape(-1, width))
            at += count
            if at >= stop:
                break
        real = next((p for p in parts if not isinstance(p, int)), None)
        if real is None:  # only zeros: in the first tensor's type
            source, first, _ = next(r for r in runs if r[0] is not None)
            real = source(first, first)
        parts = [np.zeros((p, width), real.dtype) if isinstance(p, int) else p for p in parts]
        return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else real[:0].reshape(0, width)

    return rows


# --- per-expert tensors stacked ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpertLayout:
    """Where a checkpoint keeps each expert's projections apart, and the name the converter gives each stack."""

    marker: str  # a tensor is an expert's when its name contains this
    count: tuple[str, ...]  # config.json's expert count: the first of these keys present
    kinds: tuple[str, ...]  # the projections, in the order the converter emits a layer's stacks
    source: str  # one expert's tensor: {bid}, {x} (the expert) and {kind}
    merged: str  # the stack: {bid} and {kind}
    # experts already stacked as transformers 5 saves them (`mlp.experts.gate_up_proj` [experts, 2 * ff, hidden]
    # and `mlp.experts.down_proj`) are taken where they are, gate_up_proj split into its gate and up halves
    fused: bool = False
    # ... stored transposed instead (`gate_up_proj` [experts, hidden, 2 * ff], `down_proj` [experts, ff, hidden]:
    # Qwen3-VL-MoE as published), each half and `down_proj` transposed back; the converter takes any fused tensor
    # of such a class this way, whatever its shape says
    transposed: bool = False


#: Qwen2-MoE's and Qwen3-MoE's (`Qwen2MoeModel.modify_tensors`, which takes any name with "experts" in it)
QWEN_EXPERTS = ExpertLayout("experts", ("num_local_experts", "num_experts"), ("down_proj", "gate_proj", "up_proj"),
                            "model.layers.{bid}.mlp.experts.{x}.{kind}.weight",
                            "model.layers.{bid}.mlp.experts.{kind}.weight", fused=True)  # fmt: skip


def expert_stacker(layout: ExpertLayout) -> Callable[[Tensors, HFConfig], Tensors]:
    """The `Conversion.rewrites` step stacking `layout`'s experts: every expert tensor waits for the rest of its
    layer's; when the layer has one per expert and kind, its stacks follow in the layout's order."""

    def stack(tensors: Tensors, h: HFConfig) -> Tensors:
        n_experts = h.find(layout.count)
        waiting: dict[int, dict[str, SourceTensor]] = {}
        out: Tensors = []
        for name, t in tensors:
            base = name.removesuffix(".weight")
            if layout.fused and base.endswith("mlp.experts.down_proj"):
                out.append((base + ".weight", transposed_tensor(t, base + ".weight") if layout.transposed else t))
                continue
            if layout.fused and base.endswith("mlp.experts.gate_up_proj"):
                prefix = base.removesuffix("gate_up_proj")
                split = _transposed_gate_and_up if layout.transposed else gate_and_up
                out.extend(split(t, prefix + "gate_proj.weight", prefix + "up_proj.weight"))
                continue
            if layout.marker not in name:
                out.append((name, t))
                continue
            bid = block_id(name)
            if bid is None:
                raise FormatError(t.file, None, f"expert tensor {name!r} has no layer number")
            layer = waiting.setdefault(bid, {})
            layer[name] = t
            if len(layer) >= n_experts * len(layout.kinds):
                out.extend(_stacks(layout, layer, bid, n_experts))
        leftover = [(name, t) for layer in waiting.values() for name, t in layer.items()]  # by layer, as they came
        if leftover:
            names = [name for name, _ in leftover]
            why = (f"Unprocessed experts: {names} (as the converter says): they do not make up whole layers of "
                   f"{n_experts} experts (config.json) with {', '.join(layout.kinds)} projections")  # fmt: skip
            raise FormatError(leftover[0][1].file, None, why)
        return out

    return stack


stack_experts = expert_stacker(QWEN_EXPERTS)


def gate_and_up(t: SourceTensor, gate: str, up: str) -> Tensors:
    """Fused gate and up projections ([2 * ff, hidden], or stacked experts' [experts, 2 * ff, hidden]) as the gate
    (the first half of the rows, named `gate`) and the up projection (named `up`)."""
    if len(t.shape) < 2 or t.shape[-2] % 2:
        raise FormatError(t.file, None, f"{t.name!r} {list(t.shape)} is not [(experts,) 2 * ff, hidden]")
    half, shape = t.shape[-2] // 2, t.shape
    stacks = range(int(np.prod(shape[:-2], dtype=np.int64)))
    return [(name, joined_tensor(t, name, (*shape[:-2], half, shape[-1]),
                                 [(t, 2 * half * e + at, half) for e in stacks]))
            for name, at in ((gate, 0), (up, half))]  # fmt: skip


def transposed_tensor(t: SourceTensor, name: str, columns: slice = slice(None)) -> SourceTensor:
    """`t` [..., a, b] with its last two axes swapped, of columns `columns` of b only ([..., columns, a]: stacked
    experts stored transposed, or a half of them), as tensor `name`; made by rows from the mapped file (each
    group a strided read of its columns) when `t` is stored so, so that `t` is never read whole."""
    *lead, a, b = t.shape
    first, stop, _ = columns.indices(b)
    n = max(0, stop - first)
    tensor = derived_tensor(t, name, (*lead, n, a),
                            lambda: np.ascontiguousarray(t.read().swapaxes(-1, -2)[..., first:stop, :]))  # fmt: skip
    if t.stored is None or not n:
        return tensor

    def rows(start: int, stop: int) -> np.ndarray:
        matrices = t.stored().reshape(-1, a, b)
        parts = [matrices[m, :, first + max(start - m * n, 0) : first + min(stop - m * n, n)].T
                 for m in range(start // n, -(-stop // n))]  # fmt: skip
        return np.ascontiguousarray(np.concatenate(parts) if len(parts) > 1 else parts[0])  # the parts are F-ordered

    return replace(tensor, rows=rows)


def _transposed_gate_and_up(t: SourceTensor, gate: str, up: str) -> Tensors:
    """A stacked `gate_up_proj` stored transposed [experts, hidden, 2 * ff] as its gate (first half of the
    columns, named `gate`) and up (named `up`), each transposed to [experts, ff, hidden]."""
    if len(t.shape) < 3 or t.shape[-1] % 2:
        raise FormatError(t.file, None, f"{t.name!r} {list(t.shape)} is not [experts, hidden, 2 * ff]")
    half = t.shape[-1] // 2
    return [
        (name, transposed_tensor(t, name, cols)) for name, cols in ((gate, slice(0, half)), (up, slice(half, None)))
    ]


def _stacks(layout: ExpertLayout, layer: dict[str, SourceTensor], bid: int, n_experts: int) -> Tensors:
    """The layer's stacked tensors, taking their experts out of `layer`."""
    out: Tensors = []
    for kind in layout.kinds:
        names = [layout.source.format(bid=bid, x=x, kind=kind) for x in range(n_experts)]
        missing = [n for n in names if n not in layer]
        if missing:
            extra = sorted(set(layer) - set(names))
            raise FormatError(next(iter(layer.values())).file, None, f"layer {bid} has no {missing[0]} (but has "
                                                                     f"{extra[:2]})")  # fmt: skip
        parts = [layer.pop(n) for n in names]
        for n, p in zip(names, parts, strict=True):
            if p.shape != parts[0].shape:
                raise FormatError(p.file, None, f"expert tensor {n!r} has shape {list(p.shape)}, but expert 0's "
                                                f"is {list(parts[0].shape)}")  # fmt: skip
        merged = layout.merged.format(bid=bid, kind=kind)
        out.append((merged, stacked_tensor(parts, merged)))
    return out
