"""The tables of tensor types: every GGML type ggml has ever assigned an id to, and how each maps to numpy.

Sizes follow ggml's `type_traits` (src/ggml.c), which is what files are written with. Where the GGUF
spec's tables disagree (Q8_0 is 34 bytes per block, Q8_K 292, IQ4_NL has 32-element blocks), ggml wins.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .errors import ArgumentError, ArgumentTypeError


class GGMLType(enum.IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q4_2 = 4  # removed from ggml
    Q4_3 = 5  # removed from ggml
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    IQ1_M = 29
    BF16 = 30
    Q4_0_4_4 = 31  # removed: Q4_0 with runtime repacking
    Q4_0_4_8 = 32  # removed
    Q4_0_8_8 = 33  # removed
    TQ1_0 = 34
    TQ2_0 = 35
    IQ4_NL_4_4 = 36  # removed: IQ4_NL with runtime repacking
    IQ4_NL_4_8 = 37  # removed
    IQ4_NL_8_8 = 38  # removed
    MXFP4 = 39
    NVFP4 = 40
    Q1_0 = 41
    Q2_0 = 42


@dataclass(frozen=True)
class GGMLTypeInfo:
    """What a tensor of one GGML type looks like in memory."""

    type: GGMLType
    block_size: int  # elements per block (1 for plain types); 0 for removed types
    type_size: int  # bytes per block; 0 for removed types
    numpy: np.dtype | None = None  # the numpy dtype of plain (unquantized) types

    @property
    def name(self) -> str:
        return self.type.name

    @property
    def removed(self) -> bool:
        return self.block_size == 0

    @property
    def quantized(self) -> bool:
        return self.numpy is None and not self.removed

    @property
    def bits_per_weight(self) -> float:
        return 8.0 * self.type_size / self.block_size

    def nbytes(self, n_elements: int) -> int:
        """Bytes taken by `n_elements` (a whole number of blocks)."""
        return n_elements // self.block_size * self.type_size


_T = GGMLType
_K = 256  # QK_K
_PLAIN = {
    _T.F32: np.dtype(np.float32),
    _T.F16: np.dtype(np.float16),
    _T.BF16: np.dtype(ml_dtypes.bfloat16),
    _T.F64: np.dtype(np.float64),
    _T.I8: np.dtype(np.int8),
    _T.I16: np.dtype(np.int16),
    _T.I32: np.dtype(np.int32),
    _T.I64: np.dtype(np.int64),
}
# (block size, bytes per block) of the quantized types, as ggml's block structs define them.
_BLOCKS = {
    _T.Q4_0: (32, 18), _T.Q4_1: (32, 20), _T.Q5_0: (32, 22), _T.Q5_1: (32, 24),
    _T.Q8_0: (32, 34), _T.Q8_1: (32, 36),
    _T.Q2_K: (_K, 84), _T.Q3_K: (_K, 110), _T.Q4_K: (_K, 144), _T.Q5_K: (_K, 176), _T.Q6_K: (_K, 210),
    _T.Q8_K: (_K, 292),
    _T.IQ2_XXS: (_K, 66), _T.IQ2_XS: (_K, 74), _T.IQ3_XXS: (_K, 98), _T.IQ1_S: (_K, 50),
    _T.IQ4_NL: (32, 18), _T.IQ3_S: (_K, 110), _T.IQ2_S: (_K, 82), _T.IQ4_XS: (_K, 136), _T.IQ1_M: (_K, 56),
    _T.TQ1_0: (_K, 54), _T.TQ2_0: (_K, 66),
    _T.MXFP4: (32, 17), _T.NVFP4: (64, 36), _T.Q1_0: (128, 18), _T.Q2_0: (64, 18),
}  # fmt: skip

GGML_TYPES: dict[GGMLType, GGMLTypeInfo] = {}
for _t in GGMLType:
    if _t in _PLAIN:
        _dt = _PLAIN[_t]
        GGML_TYPES[_t] = GGMLTypeInfo(_t, 1, _dt.itemsize, _dt)
    elif _t in _BLOCKS:
        GGML_TYPES[_t] = GGMLTypeInfo(_t, *_BLOCKS[_t])
    else:
        GGML_TYPES[_t] = GGMLTypeInfo(_t, 0, 0)


def ggml_type(spec: GGMLType | int | str) -> GGMLTypeInfo:
    """Look a GGML type up by enum, id, or name (case-insensitive: "q4_k", "Q4_K")."""
    if type(spec) is GGMLType:  # the common case first: planning a model looks up every tensor's type
        return GGML_TYPES[spec]
    if isinstance(spec, str):
        try:
            return GGML_TYPES[GGMLType[spec.upper()]]
        except KeyError:
            raise ArgumentError(f"unknown GGML type name {spec!r}") from None
    try:
        return GGML_TYPES[GGMLType(int(spec))]
    except ValueError:
        raise ArgumentError(f"unknown GGML type id {spec!r}") from None
    except TypeError:
        raise ArgumentTypeError(f"a GGML type is a GGMLType, an id or a name, not {type(spec).__name__}") from None


def ggml_type_of_numpy(dtype: np.dtype) -> GGMLType:
    """The plain GGML type that stores numpy `dtype` as is (byte order aside)."""
    dtype = np.dtype(dtype).newbyteorder("=")
    for t, dt in _PLAIN.items():
        if dt == dtype:
            return t
    raise ArgumentTypeError(f"no GGML type stores numpy dtype {dtype}")


NATIVE_ORDER = "<" if sys.byteorder == "little" else ">"


def view_as(raw: np.ndarray, dtype: np.dtype, order: str = "<") -> np.ndarray:
    """Bytes stored in byte order `order` as values of `dtype`: a zero-copy view when the order is
    native, else a byte-swapped copy (numpy cannot express a swapped bfloat16)."""
    dtype = np.dtype(dtype)
    if order == NATIVE_ORDER or dtype.itemsize == 1:
        return raw.view(dtype)
    return raw.view(f"u{dtype.itemsize}").byteswap().view(dtype)


def as_bytes(values: np.ndarray, order: str = "<") -> np.ndarray:
    """The uint8 bytes of `values` in byte order `order` (no copy when contiguous and native)."""
    values = np.ascontiguousarray(values)
    if order != NATIVE_ORDER and values.dtype.itemsize > 1:
        values = values.view(f"u{values.dtype.itemsize}").byteswap()
    return values.reshape(-1).view(np.uint8)


# What the writers take as a tensor's data: an array or a buffer now, or a callable giving one when the
# tensor's turn to be written comes (so a whole model need not be in memory at once), or giving an iterator
# of consecutive pieces of its bytes (so not even one tensor need be: `GGUFWriter` writes each as it comes).
TensorData = np.ndarray | bytes | bytearray | memoryview
DataSource = TensorData | Callable[[], TensorData | Iterator[TensorData]]


def exact_bytes(data: TensorData, nbytes: int, what: str) -> memoryview:
    """`data` as flat bytes, which must be exactly the `nbytes` that `what` (a tensor) takes."""
    try:
        view = memoryview(as_bytes(data) if isinstance(data, np.ndarray) else data).cast("B")
    except TypeError as e:  # not bytes-like, or a view with gaps
        raise ArgumentTypeError(
            f"{what}: data must be contiguous bytes or an array ({type(data).__name__}: {e})"
        ) from None
    if view.nbytes != nbytes:
        raise ArgumentError(f"{what} takes {nbytes} bytes, {view.nbytes} given")
    return view


class SafetensorsDType(enum.Enum):
    """The dtypes of safetensors, in the order of the reference's `Dtype` enum (its writer sorts by it)."""

    BOOL = "BOOL"
    F4 = "F4"
    F6_E2M3 = "F6_E2M3"
    F6_E3M2 = "F6_E3M2"
    U8 = "U8"
    I8 = "I8"
    F8_E5M2 = "F8_E5M2"
    F8_E4M3 = "F8_E4M3"
    F8_E8M0 = "F8_E8M0"
    F8_E4M3FNUZ = "F8_E4M3FNUZ"
    F8_E5M2FNUZ = "F8_E5M2FNUZ"
    I16 = "I16"
    U16 = "U16"
    F16 = "F16"
    BF16 = "BF16"
    I32 = "I32"
    U32 = "U32"
    F32 = "F32"
    C64 = "C64"
    F64 = "F64"
    I64 = "I64"
    U64 = "U64"

    @property
    def bits(self) -> int:
        return _ST_BITS.get(self, 0) or np.dtype(_ST_NUMPY[self]).itemsize * 8

    @property
    def numpy(self) -> np.dtype | None:
        """The numpy dtype of one element; None for the sub-byte types, which stay packed bytes."""
        return None if self in _ST_BITS else np.dtype(_ST_NUMPY[self])

    @property
    def rank(self) -> int:
        """Position in the reference's enum: its writer orders tensors by descending rank."""
        return _ST_ORDER[self]


_S = SafetensorsDType
_ST_BITS = {_S.F4: 4, _S.F6_E2M3: 6, _S.F6_E3M2: 6}
_ST_NUMPY = {
    _S.BOOL: np.bool_, _S.U8: np.uint8, _S.I8: np.int8, _S.F8_E5M2: ml_dtypes.float8_e5m2,
    _S.F8_E4M3: ml_dtypes.float8_e4m3fn, _S.F8_E8M0: ml_dtypes.float8_e8m0fnu,
    _S.F8_E4M3FNUZ: ml_dtypes.float8_e4m3fnuz, _S.F8_E5M2FNUZ: ml_dtypes.float8_e5m2fnuz, _S.I16: np.int16,
    _S.U16: np.uint16, _S.F16: np.float16, _S.BF16: ml_dtypes.bfloat16, _S.I32: np.int32, _S.U32: np.uint32,
    _S.F32: np.float32, _S.C64: np.complex64, _S.F64: np.float64, _S.I64: np.int64, _S.U64: np.uint64,
}  # fmt: skip
_ST_ORDER = {t: i for i, t in enumerate(SafetensorsDType)}


def safetensors_dtype_of_numpy(dtype: np.dtype) -> SafetensorsDType:
    """The safetensors dtype that stores numpy `dtype`."""
    dtype = np.dtype(dtype).newbyteorder("=") if np.dtype(dtype).byteorder not in "|" else np.dtype(dtype)
    for t, code in _ST_NUMPY.items():
        if np.dtype(code) == dtype:
            return t
    raise ArgumentTypeError(f"safetensors has no dtype for numpy {dtype}")


class MLXQuantType(enum.Enum):
    """The MLX quantization modes of Ollama's tensor blobs, by Ollama's names: (mode, bits, group size)."""

    INT4 = "int4"
    INT8 = "int8"
    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"
    MXFP8 = "mxfp8"

    @property
    def mode(self) -> str:
        return _MLX[self][0]

    @property
    def bits(self) -> int:
        return _MLX[self][1]

    @property
    def group_size(self) -> int:
        """The group size Ollama writes (x/quant/quant.go); blobs say theirs in their metadata."""
        return _MLX[self][2]


_MLX = {
    MLXQuantType.INT4: ("affine", 4, 64),
    MLXQuantType.INT8: ("affine", 8, 64),
    MLXQuantType.NVFP4: ("nvfp4", 4, 16),
    MLXQuantType.MXFP4: ("mxfp4", 4, 32),
    MLXQuantType.MXFP8: ("mxfp8", 8, 32),
}

TensorDType = GGMLType | SafetensorsDType | MLXQuantType


def numpy_dtype(dtype: TensorDType) -> np.dtype | None:
    """The numpy dtype a tensor type's elements load as directly; None for quantized and packed types."""
    if isinstance(dtype, SafetensorsDType):
        return dtype.numpy
    if isinstance(dtype, MLXQuantType):
        return None
    return GGML_TYPES[GGMLType(dtype)].numpy
