"""Mixture-of-experts tensors as llama.cpp's converter writes them: one GGUF tensor per layer and kind.

Qwen-style checkpoints store each expert's projections apart (`mlp.experts.{x}.gate_proj.weight`); the
converter stacks a layer's experts into `[n_experts, rows, columns]` once it has seen all of them, so the
stacked tensors sit where the layer's last expert tensor is in the sorted order. GPT-OSS stores them already
stacked: as MXFP4 blocks and scales (written first, repacked into GGML's MXFP4 layout, as the quantized data
it is), or as dense `gate_up_proj` `[n_experts, hidden, 2 * ff]` with gate and up interleaved column by column.

Each function here is a `Conversion.rewrites` step: it takes the checkpoint's tensors (after the name
filters) and gives the tensors the converter goes on with, reading nothing until the writer asks; a stacked
tensor holds one layer's experts of one kind in memory while it is written, and nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ...errors import FormatError
from .config import HFConfig
from .tensors import SourceTensor

Tensors = list[tuple[str, SourceTensor]]
EXPERT_COUNT = ("num_local_experts", "num_experts")
_PROJECTIONS = ("down_proj", "gate_proj", "up_proj")  # the order the converter emits a layer's stacks in


def block_id(name: str) -> int | None:
    """The converter's block number: the first part of the name that is all digits."""
    return next((int(part) for part in name.split(".") if part.isdecimal()), None)


def _derived(t: SourceTensor, name: str, shape: tuple[int, ...], read: Callable[[], np.ndarray]) -> SourceTensor:
    """A tensor made from `t` by `read`: none of `t`'s stored bytes stand for it."""
    return replace(t, name=name, shape=tuple(int(n) for n in shape), read=read, stored=None)


# --- Qwen2-MoE / Qwen3-MoE: per-expert tensors stacked --------------------------------------------------------------


def stack_experts(tensors: Tensors, h: HFConfig) -> Tensors:
    """`Qwen2MoeModel.modify_tensors`: every tensor with "experts" in its name waits for the rest of its
    layer's; when the layer has 3 * n_experts of them, the down, gate and up stacks follow in that order."""
    n_experts = h.find(EXPERT_COUNT)
    waiting: dict[int, dict[str, SourceTensor]] = {}
    out: Tensors = []
    for name, t in tensors:
        if "experts" not in name:
            out.append((name, t))
            continue
        bid = block_id(name)
        if bid is None:
            raise FormatError(t.file, None, f"expert tensor {name!r} has no layer number")
        layer = waiting.setdefault(bid, {})
        layer[name] = t
        if len(layer) >= n_experts * 3:
            out.extend(_stacks(layer, bid, n_experts))
    leftover = [t for layer in waiting.values() for t in layer.values()]
    if leftover:
        names = sorted(t.name for t in leftover)[:4]
        raise FormatError(leftover[0].file, None, f"expert tensors {names} do not make up whole layers of "
                                                  f"{n_experts} experts (config.json) with down, gate and up "
                                                  "projections")  # fmt: skip
    return out


def _stacks(layer: dict[str, SourceTensor], bid: int, n_experts: int) -> Tensors:
    """The layer's three stacked tensors, taking their experts out of `layer`."""
    out: Tensors = []
    for kind in _PROJECTIONS:
        names = [f"model.layers.{bid}.mlp.experts.{x}.{kind}.weight" for x in range(n_experts)]
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

        def read(parts: list[SourceTensor] = parts) -> np.ndarray:
            return np.stack([p.read() for p in parts])

        merged = f"model.layers.{bid}.mlp.experts.{kind}.weight"
        out.append((merged, _derived(parts[0], merged, (n_experts, *parts[0].shape), read)))
    return out


# --- GPT-OSS ---------------------------------------------------------------------------------------------------------


def repack_mxfp4(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Hugging Face MXFP4 (per 32 values: 16 bytes with values 2i and 2i+1 in byte i's low and high nibbles,
    and an E8M0 scale byte apart) as GGML's `block_mxfp4` rows: the scale byte, then byte j holding values j
    (low nibble) and j + 16 (high). Only bits move; both index the same E2M1 value table."""
    values = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    packed = values[..., :16] | (values[..., 16:] << 4)
    out = np.concatenate([scales[..., None], packed], axis=-1)
    return np.ascontiguousarray(out.reshape(*blocks.shape[:-2], blocks.shape[-2] * 17))


def _mxfp4_tensor(name: str, blocks: SourceTensor, scales: SourceTensor, rows: slice) -> tuple[str, SourceTensor]:
    """One GGML MXFP4 tensor of logical shape [experts, rows, columns] from the rows `rows` of a checkpoint's
    blocks `[experts, rows, columns / 32, 16]` and scales `[experts, rows, columns / 32]`."""

    def read() -> np.ndarray:
        u8 = np.uint8  # the readers give float32; 0..255 come back exactly
        return repack_mxfp4(blocks.read()[:, rows].astype(u8), scales.read()[:, rows].astype(u8))

    n_experts, n_rows, n_blocks, _ = blocks.shape
    shape = (n_experts, len(range(n_rows)[rows]), n_blocks * 32)
    return name, replace(_derived(blocks, name, shape, read), dtype="U8", ggml="MXFP4")


def _check_mxfp4_pair(prefix: str, blocks: SourceTensor | None, scales: SourceTensor | None) -> None:
    some = blocks or scales
    assert some is not None
    if blocks is None or scales is None:
        have, lack = ("blocks", "scales") if scales is None else ("scales", "blocks")
        raise FormatError(some.file, None, f"{prefix}_{have} has no {prefix}_{lack}: MXFP4 experts need both")
    for t in (blocks, scales):
        if t.dtype not in ("U8", "uint8"):
            raise FormatError(t.file, None, f"{t.name!r} is {t.dtype}; MXFP4 blocks and scales are U8")
    if len(blocks.shape) != 4 or blocks.shape[-1] != 16 or blocks.shape[:-1] != scales.shape:
        raise FormatError(blocks.file, None, f"{blocks.name!r} {list(blocks.shape)} and {scales.name!r} "
                                             f"{list(scales.shape)} are not MXFP4 blocks [experts, rows, columns/32, "
                                             "16] and their scales [experts, rows, columns/32]")  # fmt: skip
    if prefix.endswith("gate_up_proj") and blocks.shape[1] % 2:
        raise FormatError(blocks.file, None, f"{blocks.name!r} has {blocks.shape[1]} rows: not gate and up pairs")


def gpt_oss_mxfp4(tensors: Tensors, h: HFConfig) -> Tensors:
    """`GptOssModel.generate_extra_tensors`: the MXFP4 experts, before every other tensor, each where its
    scales are in the checkpoint's order; gate and up are the even and odd rows of `gate_up_proj`."""
    by_name = dict(tensors)
    quantized: Tensors = []
    for name, t in tensors:
        stem, _, part = name.rpartition("_")
        if part not in ("blocks", "scales") or "mlp.experts." not in name:
            continue
        blocks, scales = by_name.get(stem + "_blocks"), by_name.get(stem + "_scales")
        _check_mxfp4_pair(stem, blocks, scales)
        if part == "blocks":
            continue
        assert blocks is not None and scales is not None
        if stem.endswith("down_proj"):
            quantized.append(_mxfp4_tensor(stem + ".weight", blocks, scales, slice(None)))
        elif stem.endswith("gate_up_proj"):
            base = stem.removesuffix("gate_up_proj")
            quantized.append(_mxfp4_tensor(base + "gate_proj.weight", blocks, scales, slice(0, None, 2)))
            quantized.append(_mxfp4_tensor(base + "up_proj.weight", blocks, scales, slice(1, None, 2)))
        else:
            raise FormatError(t.file, None, f"MXFP4 tensor {name!r} is neither down_proj nor gate_up_proj")
    rest = [(n, t) for n, t in tensors if not ("mlp.experts." in n and n.endswith(("_blocks", "_scales")))]
    return quantized + rest


def _columns(t: SourceTensor, name: str, start: int, transpose: bool) -> tuple[str, SourceTensor]:
    """Every other entry of the last axis from `start` (of the transposed matrices when `transpose`)."""

    def read() -> np.ndarray:
        values = t.read()
        return np.swapaxes(values, -1, -2)[..., start::2, :] if transpose else values[..., start::2]

    shape = (*t.shape[:-2], t.shape[-1] // 2, t.shape[-2]) if transpose else (*t.shape[:-1], t.shape[-1] // 2)
    return name, _derived(t, name, shape, read)


def _transposed(t: SourceTensor, name: str) -> tuple[str, SourceTensor]:
    shape = (*t.shape[:-2], t.shape[-1], t.shape[-2])
    return name, _derived(t, name, shape, lambda: np.swapaxes(t.read(), -1, -2))


def gpt_oss_experts(tensors: Tensors, h: HFConfig) -> Tensors:
    """`GptOssModel.modify_tensors`: the expert biases (`gate_up_proj_bias` split into its even and odd
    entries) and, in a dequantized checkpoint, the expert matrices, stored `[experts, in, out]` and written
    transposed (`gate_up_proj` split into its even and odd output columns)."""
    out: Tensors = []
    for name, t in tensors:
        dense = "mlp.experts." in name and name.endswith(("down_proj", "gate_up_proj"))
        if dense and (len(t.shape) != 3 or (name.endswith("gate_up_proj") and t.shape[-1] % 2)):
            raise FormatError(t.file, None, f"expert tensor {name!r} {list(t.shape)} is not [experts, in, out]"
                                            " (with an even out for gate_up_proj)")  # fmt: skip
        if name.endswith("down_proj_bias"):
            out.append((name.replace("down_proj_bias", "down_proj.bias"), t))
        elif name.endswith("gate_up_proj_bias"):
            if len(t.shape) < 1 or t.shape[-1] % 2:
                raise FormatError(t.file, None, f"{name!r} {list(t.shape)}: not gate and up pairs")
            out.append(_columns(t, name.replace("gate_up_proj_bias", "gate_proj.bias"), 0, transpose=False))
            out.append(_columns(t, name.replace("gate_up_proj_bias", "up_proj.bias"), 1, transpose=False))
        elif dense and name.endswith("down_proj"):
            out.append(_transposed(t, name + ".weight"))
        elif dense:
            base = name.removesuffix("gate_up_proj")
            out.append(_columns(t, base + "gate_proj.weight", 0, transpose=True))
            out.append(_columns(t, base + "up_proj.weight", 1, transpose=True))
        else:
            out.append((name, t))
    return out


def gpt_oss_filter(name: str) -> str:
    """`GptOssModel.filter_tensors`: the attention sinks get a `.weight` suffix."""
    return name + ".weight" if "sinks" in name else name
