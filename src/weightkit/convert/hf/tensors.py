"""A checkpoint's tensors in the order llama.cpp's converter visits them, read one at a time.

The order decides the GGUF's tensor order: the part files (`model*.safetensors`, or the files the index
names) in sorted order, and within each safetensors file the tensor names sorted (so `layers.10` comes
before `layers.2`); a PyTorch `.bin` keeps its pickle's order. Nothing is read until a tensor's turn: each
safetensors part is memory-mapped, and a tensor's values are made when asked for, as float16 (when stored
so) or float32, the two types the converter computes in.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from ...dtypes import SafetensorsDType, numpy_dtype, view_as
from ...errors import FormatError, UnsupportedError
from ...safetensors import SafetensorsFile
from ...safetensors.checkpoint import read_index

SAFETENSORS_INDEX = "model.safetensors.index.json"
BIN_INDEX = "pytorch_model.bin.index.json"


@dataclass(frozen=True)
class SourceTensor:
    """One checkpoint tensor: its dtype name as stored ("BF16", "F32", ...), shape, and a reader of its
    values (float16 or float32); for a float tensor of a safetensors file also `stored`, its values as they
    are stored (a zero-copy view of the mapped file, float16, float32 or bfloat16), which the conversions
    read a chunk at a time; for a tensor made from others row by row (a padded one), `rows(start, stop)`, its
    rows start:stop in the type they are stored in; or, with `ggml` set, its already-quantized GGML data (raw
    bytes)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    read: Callable[[], np.ndarray]
    file: Path
    stored: Callable[[], np.ndarray] | None = None
    ggml: str | None = None
    rows: Callable[[int, int], np.ndarray] | None = None

    def stored_rows(self) -> Callable[[int, int], np.ndarray] | None:
        """Rows start:stop (along the last axis) of the values as stored, made when asked for: from `rows`, or
        from the view of the mapped file; None for a tensor made whole (by `read`) or quantized already."""
        if self.rows is not None:
            return self.rows
        if self.stored is None or len(self.shape) < 2:
            return None
        return lambda start, stop: self.stored().reshape(-1, self.shape[-1])[start:stop]


def _part_names(folder: Path, prefix: str, suffix: str) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.startswith(prefix) and f.endswith(suffix))


def read_checkpoint(folder: Path, *, mistral_format: bool = False) -> tuple[dict[str, SourceTensor], list[Any]]:
    """Every tensor by name, in the converter's order, and the opened files (to close when done).
    `mistral_format`: Mistral's own `consolidated*.safetensors`, with no index read."""
    parts = _part_names(folder, "consolidated" if mistral_format else "model", ".safetensors")
    safetensors = bool(parts) or (not mistral_format and (folder / SAFETENSORS_INDEX).is_file())
    if not safetensors:
        parts = _part_names(folder, "pytorch_model", ".bin")
    index = folder / (SAFETENSORS_INDEX if safetensors else BIN_INDEX)
    weight_map: dict[str, str] = {}
    if index.is_file() and not mistral_format:
        weight_map, _ = read_index(index)
        parts = sorted(set(weight_map.values()))
    if not parts:
        first = "consolidated" if mistral_format else "model"
        raise FormatError(folder, None, f"no {first}*.safetensors and no pytorch_model*.bin: no weights to convert")
    tensors: dict[str, SourceTensor] = {}
    opened: list[Any] = []
    try:
        for part in parts:
            path = folder / part
            if not path.is_file():
                raise FormatError(index, None, f"names {part}, which is not in the folder")
            found = safetensors_part(path, opened) if safetensors else bin_part(path)
            for t in found:
                tensors[t.name] = t  # a name seen again keeps its first position, as a dict does
    except BaseException:
        close_all(opened)
        raise
    if weight_map and set(weight_map) != set(tensors):
        close_all(opened)
        missing, extra = sorted(set(weight_map) - set(tensors)), sorted(set(tensors) - set(weight_map))
        raise FormatError(index, None, f"the index and the files disagree: missing {missing[:5]}, extra {extra[:5]}")
    return tensors, opened


def close_all(opened: list[Any]) -> None:
    for f in opened:
        f.close()


def safetensors_part(path: Path, opened: list[Any]) -> list[SourceTensor]:
    f = SafetensorsFile(path)
    opened.append(f)
    out = []
    for name in sorted(f.tensors):
        info = f.tensors[name]
        read = _reader(f, name, info.dtype, info.shape)
        out.append(SourceTensor(name, info.dtype.value, info.shape, read, path, _stored(f, name, info)))
    return out


_STORED = {
    SafetensorsDType.F16: np.dtype(np.float16),
    SafetensorsDType.F32: np.dtype(np.float32),
    SafetensorsDType.BF16: np.dtype(ml_dtypes.bfloat16),
}


def _stored(f: SafetensorsFile, name: str, info: Any) -> Callable[[], np.ndarray] | None:
    """The tensor's values as stored, a view of the mapped file (float types only)."""
    dtype = _STORED.get(info.dtype)
    if dtype is None:
        return None
    return lambda: view_as(f.raw(name), dtype).reshape(info.shape)


def _reader(f: SafetensorsFile, name: str, dtype: SafetensorsDType, shape: tuple[int, ...]) -> Callable[[], np.ndarray]:
    """Values as the converter computes with them: F16 and F32 as stored, everything else as float32
    (bfloat16 exactly, through its bits)."""

    def read() -> np.ndarray:
        raw = f.raw(name)
        if dtype is SafetensorsDType.F16:
            return view_as(raw, np.dtype(np.float16)).reshape(shape)
        if dtype is SafetensorsDType.F32:
            return view_as(raw, np.dtype(np.float32)).reshape(shape)
        if dtype is SafetensorsDType.BF16:
            return (view_as(raw, np.dtype(np.uint16)).astype(np.uint32) << 16).view(np.float32).reshape(shape)
        plain = numpy_dtype(dtype)
        if plain is None:
            raise UnsupportedError(f"{f.path}: tensor {name!r} is {dtype.value}, which has no float32 conversion")
        return view_as(raw, plain).reshape(shape).astype(np.float32)

    return read


def bin_part(path: Path) -> list[SourceTensor]:
    """A PyTorch checkpoint part, read as the converter reads it: torch.load(weights_only=True), in its order."""
    try:
        import torch
    except ImportError:
        raise UnsupportedError(
            f"{path}: a PyTorch checkpoint (.bin) needs torch installed (pip install torch)"
        ) from None
    try:
        state = torch.load(str(path), map_location="cpu", mmap=True, weights_only=True)
    except Exception as e:  # torch raises many kinds for a bad file
        raise FormatError(path, None, f"torch.load(weights_only=True) refused it ({e})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise FormatError(path, None, "not a dictionary of tensors")
    out = []
    for name, tensor in state.items():
        dtype = str(tensor.dtype).removeprefix("torch.")

        def read(t=tensor) -> np.ndarray:
            if t.dtype not in (torch.float16, torch.float32):
                t = t.to(torch.float32)
            return t.contiguous().numpy()

        out.append(SourceTensor(name, dtype, tuple(tensor.shape), read, path))
    return out


def is_16bit(t: SourceTensor) -> str | None:
    """ "bf16" or "f16" for a tensor stored so (`--outtype auto` looks for the first such matrix)."""
    return {"BF16": "bf16", "bfloat16": "bf16", "F16": "f16", "float16": "f16"}.get(t.dtype)
