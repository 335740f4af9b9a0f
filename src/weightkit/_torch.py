"""The bridge to torch (an optional extra): dtype mapping both ways, and zero-copy tensors from numpy."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .errors import ArgumentError, ArgumentTypeError, UnsupportedError

_WIDTH_INT = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}
_FP4_X2 = "float4_e2m1fn_x2"  # two F4 values a byte, the first in the low nibble (newer torch releases only)


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
        raise ArgumentTypeError(f"no numpy dtype for {dtype}")
    return table[dtype]


def is_torch_tensor(data) -> bool:
    """Duck-typed, so torch is only imported when the caller already handed over one of its tensors."""
    return hasattr(data, "detach") and hasattr(data, "cpu")


def _dense_cpu(t, what: str):
    """`t` detached, on the CPU, contiguous, with its true values: conjugate and negative views resolved (their
    memory holds the values before the sign flip), non-contiguous ones copied. Sparse tensors are refused."""
    import torch

    if t.layout != torch.strided:
        raise ArgumentError(f"{what} is a sparse torch tensor ({t.layout}), which is not supported; .to_dense() it")
    if t.is_meta:
        raise ArgumentError(f"{what} is on torch's meta device, so it has no data")
    return t.detach().cpu().resolve_conj().resolve_neg().contiguous()


def torch_to_numpy(t, what: str = "a torch tensor") -> np.ndarray:
    """A torch tensor's values as numpy (bfloat16 and float8 through ml_dtypes); `what` names it in errors."""
    import torch

    t = _dense_cpu(t, what)
    try:
        target = numpy_dtype_of_torch(t.dtype)
    except ArgumentTypeError as e:
        raise ArgumentTypeError(f"{what}: {e}") from None
    if target.kind == "b":
        return t.numpy()
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(width).numpy().view(target)


def from_torch(data, what: str = "a torch tensor"):
    """`data` as numpy when it is a torch tensor (bfloat16 and float8 too), else `data` unchanged."""
    return torch_to_numpy(data, what) if is_torch_tensor(data) else data


def is_packed_fp4(data) -> bool:
    """Whether `data` is a torch float4_e2m1fn_x2 tensor: each element two F4 values."""
    return is_torch_tensor(data) and str(data.dtype) == f"torch.{_FP4_X2}"


def packed_fp4_bytes(t, what: str) -> np.ndarray:
    """The bytes of a float4_e2m1fn_x2 tensor, uint8 of its shape (each byte one element, two F4 values)."""
    import torch

    return _dense_cpu(t, what).view(torch.uint8).numpy()


def packed_fp4_to_torch(raw: np.ndarray, shape: tuple[int, ...], what: str):
    """F4 values of `shape` (packed two a byte in `raw`) as a float4_e2m1fn_x2 tensor sharing `raw`'s memory,
    its last dimension halved, as the reference's safe_open(framework="pt") gives them."""
    import torch

    if not hasattr(torch, _FP4_X2):
        raise UnsupportedError(f"{what}: F4 tensors need torch.{_FP4_X2} (torch 2.8 or newer)")
    if shape[-1] % 2:  # a valid file has no 0-dimensional F4 tensor: 4 bits are not a whole byte
        raise UnsupportedError(f"{what}: F4 {list(shape)} is not whole {_FP4_X2} pairs (its last dimension is odd)")
    return torch.from_numpy(raw.reshape(*shape[:-1], shape[-1] // 2)).view(getattr(torch, _FP4_X2))


def numpy_to_torch(arr: np.ndarray):
    """A torch tensor sharing `arr`'s memory (no copy); dtypes numpy lacks go through a same-width integer view."""
    import torch

    by_numpy = {v: k for k, v in _table().items()}
    dtype = arr.dtype.newbyteorder("=") if arr.dtype.byteorder == ">" else arr.dtype
    if dtype not in by_numpy:
        raise ArgumentTypeError(f"cannot hand out numpy {arr.dtype} as a torch tensor")
    if dtype.kind == "b" or dtype in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        return torch.from_numpy(arr)
    return torch.from_numpy(arr.view(_WIDTH_INT[dtype.itemsize])).view(by_numpy[dtype])
