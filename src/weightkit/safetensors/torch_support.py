"""The bridge to torch (an optional extra): dtype mapping, and zero-copy tensors from numpy views."""

from __future__ import annotations

import ml_dtypes
import numpy as np


def numpy_dtype_of_torch(dtype) -> np.dtype:
    import torch

    table = {
        torch.bool: np.bool_, torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
        torch.int32: np.int32, torch.int64: np.int64, torch.float16: np.float16, torch.bfloat16: ml_dtypes.bfloat16,
        torch.float32: np.float32, torch.float64: np.float64, torch.complex64: np.complex64,
        torch.float8_e4m3fn: ml_dtypes.float8_e4m3fn, torch.float8_e5m2: ml_dtypes.float8_e5m2,
    }  # fmt: skip
    for name, np_dtype in (("uint16", np.uint16), ("uint32", np.uint32), ("uint64", np.uint64)):
        if hasattr(torch, name):
            table[getattr(torch, name)] = np_dtype
    if dtype not in table:
        raise ValueError(f"no safetensors dtype for torch {dtype}")
    return np.dtype(table[dtype])
