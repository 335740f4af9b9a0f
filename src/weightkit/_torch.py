"""The bridge to torch (an optional extra): dtype mapping both ways, and zero-copy tensors from numpy."""

from __future__ import annotations

import ml_dtypes
import numpy as np

_WIDTH_INT = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}


def _table() -> dict:
    import torch

    table = {
        torch.bool: np.bool_, torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
        torch.int32: np.int32, torch.int64: np.int64, torch.float16: np.float16, torch.bfloat16: ml_dtypes.bfloat16,
        torch.float32: np.float32, torch.float64: np.float64, torch.complex64: np.complex64,
        torch.float8_e4m3fn: ml_dtypes.float8_e4m3fn, torch.float8_e5m2: ml_dtypes.float8_e5m2,
    }  # fmt: skip
    for name, np_dtype in (
        ("uint16", np.uint16), ("uint32", np.uint32), ("uint64", np.uint64),
        ("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz), ("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz),
        ("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu),
    ):  # fmt: skip
        if hasattr(torch, name):  # newer torch releases only
            table[getattr(torch, name)] = np_dtype
    return {k: np.dtype(v) for k, v in table.items()}


def numpy_dtype_of_torch(dtype) -> np.dtype:
    table = _table()
    if dtype not in table:
        raise ValueError(f"no numpy dtype for torch {dtype}")
    return table[dtype]


def torch_to_numpy(t) -> np.ndarray:
    """A CPU torch tensor's values as numpy (bfloat16 and float8 through ml_dtypes)."""
    import torch

    t = t.detach().cpu().contiguous()
    target = numpy_dtype_of_torch(t.dtype)
    if target.kind == "b":
        return t.numpy()
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(width).numpy().view(target)


def from_torch(data):
    """`data` as numpy when it is a torch tensor (bfloat16 and float8 too), else `data` unchanged. Duck-typed,
    so torch is only imported when the caller already handed over one of its tensors."""
    if hasattr(data, "detach") and hasattr(data, "cpu"):
        return torch_to_numpy(data)
    return data


def numpy_to_torch(arr: np.ndarray):
    """A torch tensor sharing `arr`'s memory (no copy); dtypes numpy lacks go through a same-width integer view."""
    import torch

    by_numpy = {v: k for k, v in _table().items()}
    dtype = arr.dtype.newbyteorder("=") if arr.dtype.byteorder == ">" else arr.dtype
    if dtype not in by_numpy:
        raise ValueError(f"torch has no dtype for numpy {arr.dtype}")
    if dtype.kind == "b" or dtype in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        return torch.from_numpy(arr)
    return torch.from_numpy(arr.view(_WIDTH_INT[dtype.itemsize])).view(by_numpy[dtype])
