"""llama.cpp's own ggml, through ctypes, as the reference for every GGML tensor type.

The library is the `libggml-base.so` inside an installed `llama-cpp-python` (its build compiles llama.cpp;
about 10 minutes on 2 cores). The scripts that record reference vectors import this module; the tests
never do: they read what the scripts wrote.

    import ggml_oracle
    raw = ggml_oracle.quantize(8, x)              # Q8_0 bytes of a float32 [rows, n_per_row] array
    y = ggml_oracle.dequantize(8, raw, x.size)    # ggml's to_float of them
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

#: Q8_1: ggml_quantize_chunk aborts on it, so its reference row quantizer is called instead
ROW_QUANTIZED = frozenset({9})


class TypeTraits(ctypes.Structure):
    """The leading fields of ggml's `struct ggml_type_traits` (ggml.h), the ones read here."""

    _fields_ = [
        ("type_name", ctypes.c_char_p),
        ("blck_size", ctypes.c_int64),
        ("blck_size_interleave", ctypes.c_int64),
        ("type_size", ctypes.c_size_t),
        ("is_quantized", ctypes.c_bool),
        ("to_float", ctypes.c_void_p),
        ("from_float_ref", ctypes.c_void_p),
    ]


_ROW_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def _load() -> ctypes.CDLL:
    import llama_cpp  # the wheel carries the shared libraries in llama_cpp/lib

    path = Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]  # fmt: skip
    lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
    lib.ggml_quantize_requires_imatrix.argtypes = [ctypes.c_int]
    lib.ggml_quantize_init.argtypes = [ctypes.c_int]
    return lib


lib = _load()


def traits(ggml_type: int) -> TypeTraits:
    """ggml's table entry for a type id."""
    return lib.ggml_get_type_traits(int(ggml_type)).contents


def requires_imatrix(ggml_type: int) -> bool:
    return bool(lib.ggml_quantize_requires_imatrix(int(ggml_type)))


def dequantize(ggml_type: int, raw: np.ndarray, n: int) -> np.ndarray:
    """ggml's `to_float` of `raw` (bytes holding `n` values) as float32."""
    t = traits(ggml_type)
    if not t.to_float:
        raise ValueError(f"ggml has no to_float for type {ggml_type}")
    raw = np.ascontiguousarray(raw)
    out = np.empty(n, np.float32)
    _ROW_FN(t.to_float)(raw.ctypes.data, out.ctypes.data, n)
    return out


def quantize(ggml_type: int, x: np.ndarray, imatrix: np.ndarray | None = None) -> np.ndarray:
    """`ggml_quantize_chunk` of the rows of a float32 [rows, n_per_row] array, with optional importance weights."""
    x = np.ascontiguousarray(x, np.float32)
    t = traits(ggml_type)
    rows, per_row = x.shape
    out = np.zeros(rows * (per_row // t.blck_size) * t.type_size, np.uint8)
    if int(ggml_type) in ROW_QUANTIZED:
        _ROW_FN(t.from_float_ref)(x.ctypes.data, out.ctypes.data, x.size)
        return out
    lib.ggml_quantize_init(int(ggml_type))
    weights = None if imatrix is None else np.ascontiguousarray(imatrix, np.float32)
    written = lib.ggml_quantize_chunk(int(ggml_type), x.ctypes.data, out.ctypes.data, 0, rows, per_row,
                                      None if weights is None else weights.ctypes.data)  # fmt: skip
    if written != out.size:
        raise RuntimeError(f"ggml wrote {written} bytes for type {ggml_type}, expected {out.size}")
    return out
