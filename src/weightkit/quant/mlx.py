"""MLX's quantization modes (Ollama's safetensors "tensor blob" types), bit-exact with `mlx.core.quantize`.

Ollama's MLX runner stores a quantized weight as three safetensors entries: `{name}` (U32 packed codes),
`{name}.scale` and, for the affine modes, `{name}.bias`. Element k of a packed uint32 word sits at bits
`k * bits` and up; groups run along the last axis. The blob's `__metadata__` names the type (`quant_type`)
and the group size (`group_size`, a string).

| Ollama type | MLX mode | bits | group size       | scales                  | biases      |
|-------------|----------|------|------------------|-------------------------|-------------|
| int4        | affine   | 4    | 32 / 64* / 128   | input dtype             | input dtype |
| int8        | affine   | 8    | 32 / 64* / 128   | input dtype             | input dtype |
| nvfp4       | nvfp4    | 4    | 16               | uint8 E4M3 codes        | none        |
| mxfp4       | mxfp4    | 4    | 32               | uint8 E8M0 codes        | none        |
| mxfp8       | mxfp8    | 8    | 32               | uint8 E8M0 codes        | none        |

(*) Ollama's shared `x/quant` table writes 64 for both int4 and int8 (its older blob-format document says 32
for int4); a blob's own `group_size` metadata always wins, see `blob_quant_params`.

What MLX computes (CPU, mlx 0.32), reproduced here step by step in float32 with explicit rounding to the
working dtype wherever MLX rounds:

- affine (`fast::Quantize` CPU kernel, float32 throughout): per group `w_min`, `w_max`;
  `scale = max((w_max - w_min) / (2**bits - 1), 1e-7)`; the edge with the larger magnitude (`w_min` on a strict
  `>`, else `w_max`) becomes the bias and the scale takes the sign that makes codes non-negative
  (`-scale` when the edge is `w_max`). With `q0 = rint(edge / scale)`, a non-zero `q0` refines
  `scale = edge / q0` and sets `bias = edge`, so the edge (and zero, when it is in range) is exact; a zero `q0`
  keeps `bias = 0`. Codes are `clip(rint((w - bias) / scale), 0, 2**bits - 1)` with the float32 scale and bias;
  only afterwards are scale and bias rounded to the input dtype. Dequantization is `q * scale + bias`, each
  operation rounded to the scales' dtype.
- nvfp4 / mxfp4 / mxfp8 (op graph in `fp_quantize`): `s = max|w| / (6 or 448)` in the input dtype.
  nvfp4 stores `s` as E4M3 (round to nearest even, saturating at 448; NaN and inf saturate too) and divides
  by the decoded scale. The MX modes store the smallest power of two >= `s`, 2**e (e = 0 for an all-zero
  group), as the byte `e + 127` (wrapping below 2**-127, as MLX's does) and divide by `2**e` in the input dtype.
  (The mlx main-branch source we read still rounds log2 to nearest; the installed 0.32.4, our oracle, rounds up.)
  FP4 codes are the first index of the minimum `|w / scale - LUT[i]|` over MLX's 16-entry E2M1 table (so ties
  go to the smaller magnitude, negative values that round to zero get +0, and non-finite quotients get code 0);
  FP8 codes are the E4M3 conversion above. Decoding reads E4M3 0x7F / 0xFF as NaN and computes in the output
  dtype (bfloat16 unless asked otherwise).
- NaN payloads follow MLX's conversions: float16 NaNs become sign | 0x7D00, bfloat16 NaNs 0x7FC0.
- MLX itself refuses nvfp4 inputs whose element count is not a multiple of 32; we do not.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache, partial

import ml_dtypes
import numpy as np

from .._torch import from_torch
from ..dtypes import MLXQuantType
from ..errors import ArgumentError, ArgumentTypeError
from . import CHUNK_ELEMENTS, MIN_TASK_ELEMENTS, _step
from ._gather import gather
from ._parallel import map_chunks, readonly

__all__ = [
    "MLX_MODES",
    "blob_quant_params",
    "canonical_quant_type",
    "check_layout",
    "mlx_dequantize",
    "mlx_quantize",
    "packed_shape",
]

# Ollama quant type -> (MLX mode, bits, group size Ollama writes by default), from the dtype table.
MLX_MODES: dict[str, tuple[str, int, int]] = {q.value: (q.mode, q.bits, q.group_size) for q in MLXQuantType}

# Ollama's `quant.Canonical` aliases (case-insensitive).
_ALIASES = {"fp4": "int4", "q4": "int4", "fp8": "int8", "q8": "int8"}
_AFFINE_GROUP_SIZES = (32, 64, 128)
_BF16 = np.dtype(ml_dtypes.bfloat16)
_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), _BF16)

# MLX's E2M1 table, in code order: codes 8-15 are the negatives, 8 being -0.
_FP4_LUT = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)


def _fp8_decode_table() -> np.ndarray:
    """MLX's `from_fp8` as float32: E4M3, with 0x7F / 0xFF (E4M3's NaN) as the NaNs 0x7FF00000 / 0xFFF00000."""
    codes = np.arange(256, dtype=np.uint16)
    mag = ((codes & 0x7F) << 7).view(np.float16).astype(np.float32) * np.float32(256)
    out = np.where(codes & 0x80, -mag, mag).astype(np.float32)
    out.view(np.uint32)[[0x7F, 0xFF]] = [0x7FF00000, 0xFFF00000]
    return out


_FP8_DECODE = _fp8_decode_table()


def _e8m0_decode_table() -> np.ndarray:
    """2**(e - 127) as float32 for every E8M0 byte (255 overflows to inf), built with the exact ldexp:
    numpy's float32 exp2 is off by an ulp at 2**127 on AVX-512 machines."""
    with np.errstate(over="ignore"):
        return np.ldexp(1.0, np.arange(256) - 127).astype(np.float32)


_E8M0_DECODE = _e8m0_decode_table()
_E4M3_MAX = np.float32(448)


def canonical_quant_type(quant_type: str) -> str:
    """Ollama's canonical name for a quant type (`int4`, `int8`, `nvfp4`, `mxfp4`, `mxfp8`); accepts its aliases."""
    name = str(quant_type).strip().lower()
    name = _ALIASES.get(name, name)
    if name not in MLX_MODES:
        raise ArgumentError(f"unknown MLX quant type {quant_type!r}; expected one of {', '.join(MLX_MODES)}")
    return name


def is_mlx_mode(quant_type: str) -> bool:
    """Is this one of Ollama's MLX quant types (or an alias of one), as against a GGML or llama.cpp type?"""
    try:
        canonical_quant_type(quant_type)
    except ArgumentError:
        return False
    return True


def _params(quant_type: str, group_size: int | None) -> tuple[str, str, int, int]:
    name = canonical_quant_type(quant_type)
    mode, bits, default = MLX_MODES[name]
    gs = default if group_size is None else int(group_size)
    allowed = _AFFINE_GROUP_SIZES if mode == "affine" else (default,)
    if gs not in allowed:
        raise ArgumentError(
            f"group_size: {name} ({mode}) supports group sizes {', '.join(map(str, allowed))}, not {gs}"
        )
    return name, mode, bits, gs


def blob_quant_params(metadata: Mapping[str, str]) -> tuple[str, str, int, int]:
    """(quant type, MLX mode, bits, group size) from a tensor blob's `__metadata__`.

    The group size comes from the metadata's `group_size` when present (Ollama wrote 32 for int4 once and
    writes 64 now), else Ollama's current default for the type.
    """
    if "quant_type" not in metadata:
        raise ArgumentError("the blob metadata names no quant_type")
    raw = metadata.get("group_size")
    try:
        group_size = int(str(raw).strip()) if raw not in (None, "") else None
    except ValueError:
        raise ArgumentError(f"the blob metadata's group_size {raw!r} is not an integer") from None
    return _params(metadata["quant_type"], group_size)


def packed_shape(shape: tuple[int, ...], quant_type: str, group_size: int | None = None):
    """Shapes of (packed words, scales) for a weight of `shape` (rows along the last axis)."""
    _, _, bits, gs = _params(quant_type, group_size)
    *lead, cols = shape
    return (*lead, cols * bits // 32), (*lead, cols // gs)


def _cast(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """MLX's conversion of float32 `x` to `dtype`: nearest even; NaN becomes sign | 0x7D00 in float16 and
    0x7FC0 (sign dropped) in bfloat16, where numpy would keep the payload."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == np.float32:
        return x
    with np.errstate(over="ignore"):  # overflow to inf is MLX's result too
        out = x.astype(dtype)
    nan = np.isnan(x)
    if nan.any():
        if dtype == np.float16:
            sign = (x.view(np.uint32) >> 16).astype(np.uint16) & np.uint16(0x8000)
            out.view(np.uint16)[nan] = (sign | np.uint16(0x7D00))[nan]
        else:
            out.view(np.uint16)[nan] = 0x7FC0
    return out


def _widen(x: np.ndarray) -> np.ndarray:
    """float32 view of float16 / bfloat16 / float32 `x` as MLX converts it (float16 NaNs come back quiet)."""
    out = np.asarray(x).astype(np.float32)
    if x.dtype == np.float16:
        nan = np.isnan(out)
        if nan.any():
            out.view(np.uint32)[nan] |= np.uint32(0x00400000)
    return out


def _round_to(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round float32 `x` to `dtype` the way MLX stores it, back in float32."""
    if dtype == np.float32:
        return x
    return _widen(_cast(x, dtype))


def _check_input(w: np.ndarray, gs: int) -> np.ndarray:
    w = np.asarray(w)
    if w.dtype not in _FLOAT_DTYPES:
        raise ArgumentTypeError(f"w: MLX quantizes float32, float16 or bfloat16 weights, not {w.dtype}")
    if w.ndim == 0 or w.shape[-1] % gs:
        raise ArgumentError(f"w: the last axis of shape {w.shape} is not a multiple of the group size {gs}")
    return w


def _pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack integer codes (..., n) in [0, 2**bits) into uint32 words, element k of a word at bits k * bits.

    8-bit codes are their bytes read as little-endian words. 4-bit codes are merged by shifts and masks on
    uint64 words (eight codes each) in long loops: numpy is slow on many short rows.
    """
    b = np.ascontiguousarray(codes, dtype=np.uint8)
    if bits == 8:
        return b.view(np.uint32)
    v = b.reshape(-1).view(np.uint64)
    v = v | (v >> np.uint64(4))  # byte 2i: codes 2i, 2i+1
    v &= np.uint64(0x00FF00FF00FF00FF)
    v |= v >> np.uint64(8)  # 16 bits at 4j: codes 4j..4j+3
    v &= np.uint64(0x0000FFFF0000FFFF)
    v |= v >> np.uint64(16)
    return v.astype(np.uint32).reshape(*codes.shape[:-1], -1)


def _unpack(words: np.ndarray, bits: int) -> np.ndarray:
    """The inverse of `_pack`: uint8 codes (n, codes per row) from uint32 words (n, words per row).

    8-bit codes are the words' bytes. 4-bit codes spread each byte's two nibbles over the two bytes of a
    uint16 (low nibble first), so every step is a long loop over the whole chunk.
    """
    b = np.ascontiguousarray(words).view(np.uint8)
    if bits == 8:
        return b
    spread = b.astype(np.uint16)
    spread |= spread << np.uint16(4)
    spread &= np.uint16(0x0F0F)
    return spread.view(np.uint8)


# ---------------------------------------------------------------------------------------------- affine


def _affine_quantize(w: np.ndarray, bits: int, gs: int):
    n_bins = np.float32((1 << bits) - 1)
    x = _widen(w).reshape(*w.shape[:-1], -1, gs)
    has_nan = bool(np.isnan(x).any())
    if has_nan:  # the C++ loop's std::max / std::min skip NaN; an all-NaN group keeps the initial -inf / +inf
        w_max = np.where(np.isnan(x), np.float32(-np.inf), x).max(axis=-1, keepdims=True)
        w_min = np.where(np.isnan(x), np.float32(np.inf), x).min(axis=-1, keepdims=True)
    else:
        w_max = x.max(axis=-1, keepdims=True)
        w_min = x.min(axis=-1, keepdims=True)
    with np.errstate(all="ignore"):
        mask = np.abs(w_min) > np.abs(w_max)
        scale = (w_max - w_min) / n_bins
        eps = np.float32(1e-7)
        scale = np.where(scale < eps, eps, scale)  # std::max(scale, eps): NaN stays NaN
        scale = np.where(mask, scale, -scale)
        edge = np.where(mask, w_min, w_max)
        q0 = np.rint(edge / scale)
        nonzero = q0 != 0  # true for NaN, as in C++
        scale = np.where(nonzero, edge / q0, scale).astype(np.float32)
        bias = np.where(nonzero, edge, np.float32(0)).astype(np.float32)
        q = np.subtract(x, bias)
        np.divide(q, scale, out=q)
        np.rint(q, out=q)
        # std::min(std::max(q, 0), n_bins) keeps a NaN, whose integer cast yields 0 on x86
        if has_nan or not (np.isfinite(scale).all() and np.isfinite(bias).all()):
            q[np.isnan(q)] = 0
        np.clip(q, 0, n_bins, out=q)
    packed = _pack(q.reshape(w.shape), bits)
    scales = _cast(scale[..., 0], w.dtype)
    biases = _cast(bias[..., 0], w.dtype)
    return packed, scales, biases


def _affine_groups(words, scales, biases, *, bits: int, work: np.dtype, out_t: np.dtype) -> np.ndarray:
    """Groups of affine codes (one group a row) times their scales plus their biases, each operation rounded
    as MLX rounds it: the product to the scales' dtype, the sum to `work`."""
    q = _unpack(words, bits).astype(np.float32)
    with np.errstate(all="ignore"):
        q *= _widen(scales)[:, None]
        q = _round_to(q, scales.dtype)
        q += _widen(biases)[:, None]
        return _cast(q if out_t == work else _round_to(q, work), out_t)


# ---------------------------------------------------------------------------------------------- fp modes


def _to_fp8(x: np.ndarray) -> np.ndarray:
    """MLX's `ToFP8` on float32 `x`: E4M3 codes, nearest even, saturating to 0x7E (448) from 464 up and for
    inf and NaN, keeping the sign bit."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    sign = ((bits >> 24) & 0x80).astype(np.uint8)
    mag = (bits & np.uint32(0x7FFFFFFF)).view(np.float32)
    sat = (bits & np.uint32(0x7FFFFFFF)) >= np.uint32(543 << 21)  # 464.0, inf and NaN
    mag = np.where(sat, np.float32(0), mag)
    codes = mag.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    codes = np.where(sat, np.uint8(0x7E), codes)
    return codes | sign


def _mx_exponent(s: np.ndarray) -> np.ndarray:
    """The exponent of the smallest power of two >= `s` (> 0), 0 where `s` is 0: MLX's E8M0 rounds up."""
    mant, exp = np.frexp(s.astype(np.float64))  # s = mant * 2**exp, mant in [0.5, 1)
    e = np.where(mant == 0.5, exp - 1, exp)
    return np.where(s == 0, 0, e).astype(np.int32)


def _fp4_codes(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """First index of the minimum of `|v - LUT[i]|`, each difference rounded to `dtype` as MLX does it.

    A NaN distance counts as the minimum (numpy's and MLX's argmin agree); such a quotient makes all 16
    distances NaN, so it gets code 0, as do infinities (all distances infinite). Huge quotients round every
    distance to the same value and get code 0 as well.
    """
    lut = _round_to(_FP4_LUT, dtype)
    flat = v.reshape(-1)
    code = np.zeros(flat.shape, dtype=np.uint8)
    with np.errstate(all="ignore"):
        for start in range(0, flat.size, _FP4_CHUNK):  # cache-sized pieces: 16 passes over each
            x = flat[start : start + _FP4_CHUNK]
            out = code[start : start + _FP4_CHUNK]
            best = np.full(x.shape, np.inf, dtype=np.float32)
            for i, level in enumerate(lut):
                d = np.abs(_round_to(x - level, dtype))
                better = d < best
                np.copyto(best, d, where=better)
                np.copyto(out, np.uint8(i), where=better)
    return code.reshape(v.shape)


_FP4_CHUNK = 1 << 15


@cache
def _code_table(t: np.dtype, work: np.dtype, bits: int) -> np.ndarray:
    """The FP4 (`_fp4_codes`) or FP8 (`_to_fp8`) code of every value of a 16-bit dtype `t`, indexed by its
    bits: one lookup per value instead of sixteen distance passes or a float8 conversion. Exact by
    construction, NaNs and rounding ties included."""
    every = _widen(np.arange(1 << 16, dtype=np.uint16).view(t))
    return readonly(_fp4_codes(every, work) if bits == 4 else _to_fp8(every))


def _fp_codes(q: np.ndarray, t: np.dtype, work: np.dtype, bits: int) -> np.ndarray:
    """FP4 or FP8 codes of float32 quotients `q` once rounded to the input dtype `t`."""
    if t.itemsize == 2:
        return _code_table(t, work, bits)[_cast(q, t).view(np.uint16)]
    return _fp4_codes(q, work) if bits == 4 else _to_fp8(q)


def _fp_quantize(w: np.ndarray, mode: str, bits: int, gs: int):
    t = w.dtype
    x = _widen(w).reshape(*w.shape[:-1], -1, gs)
    maxval = np.float32(6 if bits == 4 else 448)
    with np.errstate(all="ignore"):
        s = _round_to(np.abs(x).max(axis=-1, keepdims=True) / maxval, t)
        if mode == "nvfp4":
            scale_codes = _to_fp8(s)
            decoded = _FP8_DECODE[scale_codes]  # exact in every input dtype
            q = x / decoded  # rounded to t, then times float32 1.0: float32 from there on
            work = np.dtype(np.float32)
        else:
            # MLX derives the exponent with a float graph (log2, rint, a bump when 2**e < s); for finite s that
            # is exactly the ceiling. Its int32 cast of a non-finite s gives INT_MIN: the divisor 2**e is
            # then 0 and the stored byte is what x86 makes of float(INT_MIN + 127) (0 in 16-bit types).
            finite = np.isfinite(s)
            e_int = _mx_exponent(np.where(finite, s, np.float32(0)))
            p = np.where(finite, _round_to(np.ldexp(np.float32(1), e_int).astype(np.float32), t), np.float32(0))
            q = x / p  # rounded to t, which stays the working dtype
            bad_code = np.uint8(128 if t == np.float32 else 0)
            scale_codes = np.where(finite, (e_int.astype(np.int64) + 127).astype(np.uint8), bad_code)
            work = t
        codes = _fp_codes(q, t, work, bits)
    packed = _pack(codes.reshape(w.shape), bits)
    return packed, scale_codes[..., 0].astype(np.uint8)


def _fp_groups(words, scales, *, mode: str, bits: int, out_t: np.dtype) -> np.ndarray:
    """Groups of FP4 / FP8 codes (one group a row) times their decoded E4M3 or E8M0 scales, in `out_t`."""
    vals = gather(_round_to(_FP4_LUT if bits == 4 else _FP8_DECODE, out_t), _unpack(words, bits))
    with np.errstate(all="ignore"):
        sc = gather(_round_to(_FP8_DECODE if mode == "nvfp4" else _E8M0_DECODE, out_t), scales)
        return _cast(vals * sc[:, None], out_t)


# ---------------------------------------------------------------------------------------------- public


def mlx_quantize(
    w: np.ndarray, quant_type: str, group_size: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Quantize `w` (float32, float16 or bfloat16; groups along the last axis) as MLX does.

    Returns `(packed, scales, biases)`: uint32 words of shape `(..., cols * bits / 32)`; scales of shape
    `(..., cols / group_size)`, in `w`'s dtype for the affine types (int4, int8) and uint8 E4M3 (nvfp4) or
    E8M0 (mxfp4, mxfp8) codes otherwise; biases in `w`'s dtype for affine, else None. Bit-identical to
    `mlx.core.quantize(w, group_size, bits, mode)`.
    """
    _, mode, bits, gs = _params(quant_type, group_size)
    w = _check_input(from_torch(w), gs)
    rows = w.reshape(int(np.prod(w.shape[:-1])), w.shape[-1])
    n, cols = rows.shape
    packed = np.empty((n, cols * bits // 32), np.uint32)
    scales = np.empty((n, cols // gs), w.dtype if mode == "affine" else np.uint8)
    biases = np.empty_like(scales) if mode == "affine" else None
    step = _step(n, CHUNK_ELEMENTS // max(cols, 1), MIN_TASK_ELEMENTS // max(cols, 1))

    def run(start: int) -> None:
        """Groups never straddle rows, so blocks of rows are quantized independently, on the thread pool."""
        part = slice(start, start + step)
        if mode == "affine":
            packed[part], scales[part], biases[part] = _affine_quantize(rows[part], bits, gs)
        else:
            packed[part], scales[part] = _fp_quantize(rows[part], mode, bits, gs)

    map_chunks(run, range(0, n, step))
    lead = w.shape[:-1]
    if biases is not None:
        biases = biases.reshape(*lead, -1)
    return packed.reshape(*lead, -1), scales.reshape(*lead, -1), biases


Layout = tuple[tuple[int, ...], np.dtype]  # (shape, dtype) of an array, or of a stored tensor before it is read


def check_layout(
    quant_type: str, group_size: int | None, packed: Layout, scales: Layout, biases: Layout | None
) -> np.dtype:
    """Do packed words, scales and biases of these shapes and dtypes make one quantized weight? Raises
    ArgumentError (ArgumentTypeError for a wrong dtype) saying what does not fit; returns MLX's default
    output dtype for them (the scales' dtype for affine types, or float32 when the biases' differs; bfloat16
    for the fp types). Works on shapes alone, so a loader can check a stored weight before reading a byte
    of it."""
    _, mode, bits, gs = _params(quant_type, group_size)
    (p_shape, p_dtype), (s_shape, s_dtype) = packed, scales
    if p_dtype != np.uint32:
        raise ArgumentTypeError(f"packed MLX weights are uint32 words, not {p_dtype}")
    if not p_shape:
        raise ArgumentError("packed MLX weights need at least one axis")
    if (
        len(s_shape) != len(p_shape)
        or tuple(s_shape[:-1]) != tuple(p_shape[:-1])
        or s_shape[-1] * gs * bits != p_shape[-1] * 32
    ):
        raise ArgumentError(
            f"scales of shape {tuple(s_shape)} do not fit packed words of shape {tuple(p_shape)} "
            f"with {bits} bits and group size {gs}"
        )
    if mode != "affine":
        if biases is not None:
            raise ArgumentError(f"biases were given, but {mode} quantization has none")
        if s_dtype != np.uint8:
            raise ArgumentTypeError(f"{mode} scales are uint8 codes, not {s_dtype}")
        return _BF16
    if biases is None:
        raise ArgumentError("affine quantization needs biases")
    b_shape, b_dtype = biases
    if tuple(b_shape) != tuple(s_shape):
        raise ArgumentError(f"biases of shape {tuple(b_shape)} do not match scales of shape {tuple(s_shape)}")
    for what, dt in (("scales", s_dtype), ("biases", b_dtype)):
        if dt not in _FLOAT_DTYPES:
            raise ArgumentTypeError(f"affine {what} must be float32, float16 or bfloat16, not {dt}")
    # MLX multiplies in the scales' dtype, then adds in the promotion of that and the biases' dtype
    return np.dtype(s_dtype) if s_dtype == b_dtype else np.dtype(np.float32)


def mlx_dequantize(
    packed: np.ndarray,
    scales: np.ndarray,
    biases: np.ndarray | None,
    quant_type: str,
    group_size: int | None = None,
    dtype=None,
) -> np.ndarray:
    """Decode MLX-quantized weights; bit-identical to `mlx.core.dequantize(..., dtype=dtype)`.

    The default output dtype follows MLX (see `check_layout`). Affine results are computed in the scales'
    dtype and then cast to `dtype`. Groups are decoded in chunks on every core, so the working set beside
    the output stays bounded.
    """
    _, mode, bits, gs = _params(quant_type, group_size)
    packed, scales = np.asarray(from_torch(packed)), np.asarray(from_torch(scales))
    biases = None if biases is None else np.asarray(from_torch(biases))
    default = check_layout(
        quant_type,
        group_size,
        (packed.shape, packed.dtype),
        (scales.shape, scales.dtype),
        None if biases is None else (biases.shape, biases.dtype),
    )
    out_t = default if dtype is None else np.dtype(dtype)
    if out_t not in _FLOAT_DTYPES:
        raise ArgumentTypeError(f"dtype: MLX dequantizes to float32, float16 or bfloat16, not {out_t}")
    if mode == "affine":
        sides, decode = (scales, biases), partial(_affine_groups, bits=bits, work=default)
    else:
        sides, decode = (scales,), partial(_fp_groups, mode=mode, bits=bits)

    n_groups = scales.size
    words = packed.reshape(n_groups, gs * bits // 32)
    sides = tuple(a.reshape(n_groups) for a in sides)
    out = np.empty((n_groups, gs), out_t)
    step = _step(n_groups, CHUNK_ELEMENTS // gs, MIN_TASK_ELEMENTS // gs)

    def run(start: int) -> None:
        part = slice(start, start + step)
        out[part] = decode(words[part], *(a[part] for a in sides), out_t=out_t)

    map_chunks(run, range(0, n_groups, step))
    return out.reshape(*packed.shape[:-1], packed.shape[-1] * 32 // bits)
