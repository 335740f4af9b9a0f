"""MLX quantization modes (Ollama tensor blobs) against mlx.core itself, bit for bit."""

from __future__ import annotations

import tracemalloc
import warnings
import zlib

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from weightkit.errors import ArgumentError, ArgumentTypeError
from weightkit.quant import mlx as mlx_module
from weightkit.quant.mlx import (
    MLX_MODES,
    blob_quant_params,
    canonical_quant_type,
    mlx_dequantize,
    mlx_quantize,
    packed_shape,
)

from ..extras import need

pytestmark = pytest.mark.needs_mlx
mx = need("needs_mlx")

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = (np.dtype(np.float32), np.dtype(np.float16), BF16)
MX_DTYPES = {np.dtype(np.float32): mx.float32, np.dtype(np.float16): mx.float16, BF16: mx.bfloat16}
COMBOS = [
    (qt, gs)
    for qt, (mode, _, default) in MLX_MODES.items()
    for gs in ((32, 64, 128) if mode == "affine" else (default,))
]
LARGEST = {np.dtype(np.float32): 3.4028235e38, np.dtype(np.float16): 65504.0, BF16: 3.3895314e38}
SMALLEST = {np.dtype(np.float32): 1.4e-45, np.dtype(np.float16): 6e-8, BF16: 9.2e-41}


def to_mx(a: np.ndarray) -> mx.array:
    if a.dtype == BF16:
        return mx.array(a.view(np.uint16)).view(mx.bfloat16)
    return mx.array(a)


def from_mx(a: mx.array) -> np.ndarray:
    if a.dtype == mx.bfloat16:
        return np.array(a.view(mx.uint16)).view(BF16)
    return np.array(a)


def raw_bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def assert_same(ours: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert ours.dtype == ref.dtype, f"{what}: dtype {ours.dtype} != {ref.dtype}"
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} != {ref.shape}"
    diff = raw_bits(ours) != raw_bits(ref)
    if diff.any():
        i = tuple(np.argwhere(diff)[0])
        raise AssertionError(f"{what}: {diff.sum()} of {diff.size} differ, first at {i}: {ours[i]!r} != {ref[i]!r}")


def mlx_reference(w: np.ndarray, qt: str, gs: int):
    mode, bits, _ = MLX_MODES[qt]
    out = mx.quantize(to_mx(w), group_size=gs, bits=bits, mode=mode)
    return [from_mx(a) for a in out] + ([None] if len(out) == 2 else [])


def mlx_dequant_reference(packed, scales, biases, qt: str, gs: int, dtype=None) -> np.ndarray:
    mode, bits, _ = MLX_MODES[qt]
    kw = {} if dtype is None else {"dtype": MX_DTYPES[np.dtype(dtype)]}
    b = None if biases is None else to_mx(biases)
    return from_mx(mx.dequantize(to_mx(packed), to_mx(scales), b, group_size=gs, bits=bits, mode=mode, **kw))


def quiet(fn, *args, **kwargs):
    """Call with numpy warnings as errors: the kernels must not leak overflow or invalid-value chatter."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kwargs)


def check_against_mlx(w: np.ndarray, qt: str, gs: int) -> None:
    ref = mlx_reference(w, qt, gs)
    ours = quiet(mlx_quantize, w, qt, gs)
    for name, a, b in zip(("packed", "scales", "biases"), ours, ref, strict=True):
        if b is None:
            assert a is None
        else:
            assert_same(a, b, f"{qt}/{gs}/{w.dtype} {name}")
    for dtype in (None, *DTYPES):
        got = quiet(mlx_dequantize, *ours, qt, gs, dtype=dtype)
        assert_same(got, mlx_dequant_reference(*ref, qt, gs, dtype), f"{qt}/{gs}/{w.dtype} dequantize to {dtype}")


def edge_case(name: str, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    shape = (4, 256)
    big, tiny = LARGEST[dtype], SMALLEST[dtype]
    normal = rng.standard_normal(shape)
    if name == "normal":
        w = normal
    elif name == "uniform":
        w = rng.uniform(-3, 5, shape)
    elif name == "zeros":
        w = np.zeros(shape)
    elif name == "negative_zeros":
        w = -np.zeros(shape)
    elif name == "constant":
        w = np.repeat(rng.standard_normal((shape[0], 1)) * 3, shape[1], axis=1)
    elif name == "one_huge":
        w = normal * 0.01
        w[:, 5], w[:, 77], w[:, 130] = 1e4, -3e4, 250.0
    elif name == "large":
        w = normal * big / 4
    elif name == "max_finite":
        w = normal.copy()
        w[:, ::3], w[:, 1::7] = big, -big
    elif name == "negative_only":
        w = -np.abs(normal) - 1
    elif name == "positive_only":
        w = np.abs(normal) + 0.5
    elif name == "tiny":
        w = normal * tiny * 50
    elif name == "subnormal":
        w = normal * tiny * 3
    elif name == "ties":  # exact half steps and E2M1 midpoints
        w = rng.integers(-24, 25, shape) / 4.0
    elif name == "powers_of_two":
        w = 2.0 ** rng.integers(-12, 12, shape) * rng.choice([-1, 1], shape)
    elif name == "mixed_magnitudes":
        w = normal * 10.0 ** rng.integers(-30, 30, (shape[0], 1))
    elif name == "sparse":
        w = np.zeros(shape)
        w[:, ::37] = normal[:, ::37]
    elif name == "non_finite":
        w = normal.copy()
        w[0, 3], w[1, 40], w[2, 70], w[3, :32] = np.inf, -np.inf, np.nan, np.nan
    else:
        raise AssertionError(name)
    with np.errstate(over="ignore"):
        return np.asarray(w, dtype=np.float32).astype(dtype)


CASES = [
    "normal", "uniform", "zeros", "negative_zeros", "constant", "one_huge", "large", "max_finite", "negative_only",
    "positive_only", "tiny", "subnormal", "ties", "powers_of_two", "mixed_magnitudes", "sparse", "non_finite",
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("qt", "gs"), COMBOS)
def test_matches_mlx(qt: str, gs: int, dtype: np.dtype, case: str) -> None:
    seed = zlib.crc32(f"{qt}/{gs}/{dtype}/{case}".encode())
    check_against_mlx(edge_case(case, dtype, np.random.default_rng(seed)), qt, gs)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("qt", "gs"), COMBOS)
def test_matches_mlx_higher_rank(qt: str, gs: int, dtype: np.dtype) -> None:
    w = np.random.default_rng(3).standard_normal((2, 3, 2 * gs if gs > 16 else 64)).astype(np.float32).astype(dtype)
    check_against_mlx(w, qt, gs)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nvfp4_scale_rounding(dtype: np.dtype) -> None:
    """Group maxima that put max / 6 on and around every E4M3 value: the scale's RNE and saturation."""
    e4m3 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    e4m3 = np.unique(e4m3[np.isfinite(e4m3) & (e4m3 >= 0)])
    mids = (e4m3[1:] + e4m3[:-1]) / 2
    targets = np.concatenate([e4m3, mids, np.nextafter(mids, 0), np.nextafter(mids, 1), [460, 464, 470, 1e4]])
    targets = targets[: targets.size // 2 * 2]  # MLX's nvfp4 packs 32 elements at a time
    amax = (targets * 6).astype(np.float32).astype(dtype)
    w = np.zeros((amax.size, 16), dtype=np.float32)
    w[:, 0] = amax.astype(np.float32)
    w[:, 1:] = amax.astype(np.float32)[:, None] * np.linspace(-1, 1, 15, dtype=np.float32)
    check_against_mlx(w.astype(dtype), "nvfp4", 16)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("qt", ["mxfp4", "mxfp8"])
def test_mx_scale_exponent(qt: str, dtype: np.dtype) -> None:
    """MLX's E8M0 scale is the smallest power of two >= max / (6 or 448): probe just around each power."""
    maxval = 6.0 if qt == "mxfp4" else 448.0
    finfo = np.finfo(np.float32) if dtype != np.float16 else np.finfo(np.float16)
    ks = np.arange(-30, 14 if dtype == np.float16 else 100)
    eps = float(finfo.eps) if dtype == np.float32 else (2.0**-10 if dtype == np.float16 else 2.0**-7)
    amax = np.concatenate([maxval * 2.0**ks * f for f in (1.0, 1 + eps, 1 + 2 * eps, 1 - eps / 2, 1.5)])
    w = np.random.default_rng(5).uniform(-1, 1, (amax.size, 32)) * amax[:, None]
    w[:, 7] = amax
    with np.errstate(over="ignore"):  # float16 maxima past 65504 become inf groups: fine, MLX gets them too
        w = w.astype(np.float32).astype(dtype)
    check_against_mlx(w, qt, 32)


def test_every_e8m0_scale_byte_is_an_exact_power_of_two() -> None:
    """Scale byte e decodes to 2**(e - 127) exactly (255 to inf), in MLX and here, whatever numpy's exp2 does
    on this CPU (its float32 exp2 is an ulp off at 2**127 with AVX-512)."""
    codes = np.full((256, 32), 2, np.uint8)  # FP4 code 2 is 1.0
    packed = (codes[:, 0::2] | codes[:, 1::2] << 4).view(np.uint32)
    scales = np.arange(256, dtype=np.uint8)[:, None]
    exact = np.array([2.0 ** (e - 127) if e < 255 else np.inf for e in range(256)], np.float32)
    ours = quiet(mlx_dequantize, packed, scales, None, "mxfp4", 32, dtype=np.float32)
    assert_same(ours, np.repeat(exact[:, None], 32, axis=1), "E8M0 scales")
    assert_same(ours, mlx_dequant_reference(packed, scales, None, "mxfp4", 32, np.float32), "E8M0 scales vs MLX")


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=str)
@pytest.mark.parametrize("qt", ["nvfp4", "mxfp4", "mxfp8"])
def test_fp_code_of_every_16_bit_value_matches_mlx(qt: str, dtype: np.dtype) -> None:
    """With the format's largest value (6 or 448) in every group the scale is exactly 1, so each other
    weight is itself the quotient that gets a code: every finite value of the dtype up to that magnitude
    goes through the code table once."""
    top = 448 if qt == "mxfp8" else 6
    every = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    with np.errstate(invalid="ignore"):
        values = every[np.abs(every.astype(np.float32)) <= top]
    per_group = 15 if qt == "nvfp4" else 31
    values = np.concatenate([values, np.zeros(-len(values) % (2 * per_group), dtype)]).reshape(-1, per_group)
    w = np.concatenate([np.full((len(values), 1), top, dtype), values], axis=1).reshape(-1, 32)  # a group or two a row
    check_against_mlx(w, qt, per_group + 1)


@pytest.mark.parametrize(("qt", "gs"), COMBOS)
def test_dequantize_arbitrary_words_matches_mlx(qt: str, gs: int) -> None:
    """Every code and (for the fp modes) every scale byte, not only what quantize produces."""
    rng = np.random.default_rng(11)
    mode, bits, _ = MLX_MODES[qt]
    rows, cols = 64, 4 * gs
    packed = rng.integers(0, 2**32, (rows, cols * bits // 32), dtype=np.uint32)
    n_groups = cols // gs
    if mode == "affine":
        for sdt, bdt in [(np.float32, np.float32), (np.float16, np.float16), (BF16, BF16), (np.float16, BF16)]:
            with np.errstate(over="ignore"):  # some float16 scales overflow: inf and NaN outputs are compared too
                scales = (rng.standard_normal((rows, n_groups)) * 10.0 ** rng.integers(-8, 8, (rows, 1))).astype(sdt)
                biases = (rng.standard_normal((rows, n_groups)) * 10.0 ** rng.integers(-8, 8, (rows, 1))).astype(bdt)
            for dtype in (None, *DTYPES):
                assert_same(
                    quiet(mlx_dequantize, packed, scales, biases, qt, gs, dtype=dtype),
                    mlx_dequant_reference(packed, scales, biases, qt, gs, dtype),
                    f"{qt} {sdt}/{bdt} -> {dtype}",
                )
    else:
        scales = np.arange(rows * n_groups, dtype=np.uint64).reshape(rows, n_groups).astype(np.uint8)
        for dtype in (None, *DTYPES):
            assert_same(
                quiet(mlx_dequantize, packed, scales, None, qt, gs, dtype=dtype),
                mlx_dequant_reference(packed, scales, None, qt, gs, dtype),
                f"{qt} -> {dtype}",
            )


@pytest.mark.parametrize(("qt", "gs"), COMBOS)
def test_dequantize_in_many_chunks_matches_mlx(qt: str, gs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stacked experts cut into tasks of four groups (across rows; the last task short) decode as MLX does."""
    monkeypatch.setattr(mlx_module, "CHUNK_ELEMENTS", 4 * gs)
    monkeypatch.setattr(mlx_module, "MIN_TASK_ELEMENTS", 1)
    w = (np.random.default_rng(3).standard_normal((3, 7, 10 * gs)) * 4).astype(BF16)
    packed, scales, biases = mlx_quantize(w, qt, gs)
    ref = mlx_reference(w, qt, gs)
    for dtype in (None, np.float32):
        assert_same(
            quiet(mlx_dequantize, packed, scales, biases, qt, gs, dtype=dtype),
            mlx_dequant_reference(*ref, qt, gs, dtype),
            f"{qt}/{gs} in chunks to {dtype}",
        )


@pytest.mark.parametrize("qt", ["int4", "mxfp8"])
def test_dequantize_working_set_is_bounded(qt: str) -> None:
    """Decoding needs the output plus chunk-sized temporaries, not float32 copies of the whole tensor."""
    packed, scales, biases = mlx_quantize(np.random.default_rng(4).standard_normal((8, 8192), np.float32), qt)
    reps = 2048 // 8
    packed, scales = np.tile(packed, (reps, 1)), np.tile(scales, (reps, 1))
    biases = None if biases is None else np.tile(biases, (reps, 1))
    tracemalloc.start()
    out = mlx_dequantize(packed, scales, biases, qt, dtype=np.float32)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert out.shape == (2048, 8192)
    assert peak < out.nbytes + 64 * 2**20  # the 64 MiB output plus two threads' chunk temporaries


@pytest.mark.needs_torch
def test_torch_tensors_in() -> None:
    """mlx_quantize and mlx_dequantize take torch tensors (bfloat16 included) as they take numpy arrays."""
    import torch

    w = torch.randn(4, 128, generator=torch.Generator().manual_seed(2)).bfloat16()
    as_numpy = w.view(torch.int16).numpy().view(BF16)
    for qt in ("int4", "mxfp4"):
        ours = mlx_quantize(w, qt)
        ref = mlx_quantize(as_numpy, qt)
        for a, b in zip(ours, ref, strict=True):
            assert (a is None and b is None) or np.array_equal(raw_bits(a), raw_bits(b))
        scales = torch.from_numpy(raw_bits(ours[1])).view(torch.bfloat16) if qt == "int4" else torch.from_numpy(ours[1])
        biases = None if ours[2] is None else torch.from_numpy(raw_bits(ours[2])).view(torch.bfloat16)
        got = mlx_dequantize(torch.from_numpy(ours[0]), scales, biases, qt)
        assert_same(got, mlx_dequantize(*ref, qt), f"{qt} from torch")


def test_packing_layout() -> None:
    """Element k of a word sits at bits k * bits and up: codes 0..15 in order pack to 0x76543210, 0xFEDCBA98."""
    w = np.tile(np.arange(16, dtype=np.float32) - 15, 4).reshape(1, 64)  # the bias is -15, the scale 1
    packed, scales, biases = mlx_quantize(w, "int4", 64)
    assert packed.dtype == np.uint32 and packed.shape == (1, 8)
    assert list(packed[0, :2]) == [0x76543210, 0xFEDCBA98]
    assert scales.dtype == biases.dtype == np.float32
    np.testing.assert_array_equal(mlx_dequantize(packed, scales, biases, "int4", 64), w)
    w8 = np.arange(128, dtype=np.float32) - 255
    w8[-1] = 0  # range 255: scale 1, bias -255, codes 0, 1, 2, ...
    packed8, _, _ = mlx_quantize(w8.reshape(1, 128), "int8", 128)
    assert packed8[0, 0] == 0x03020100 and packed8[0, -1] >> 24 == 255


def test_affine_zero_is_exact_and_bias_is_an_edge() -> None:
    rng = np.random.default_rng(2)
    w = rng.standard_normal((8, 64)).astype(np.float32)
    w[:, 10] = 0
    packed, scales, biases = mlx_quantize(w, "int4", 64)
    back = mlx_dequantize(packed, scales, biases, "int4", 64)
    assert np.all(back[:, 10] == 0)
    edge = np.where(np.abs(w.min(1)) > np.abs(w.max(1)), w.min(1), w.max(1))
    np.testing.assert_array_equal(biases[:, 0], edge)
    assert np.all(np.sign(scales[:, 0]) == -np.sign(edge))


def test_ollama_names_and_metadata() -> None:
    assert MLX_MODES == {
        "int4": ("affine", 4, 64),
        "int8": ("affine", 8, 64),
        "nvfp4": ("nvfp4", 4, 16),
        "mxfp4": ("mxfp4", 4, 32),
        "mxfp8": ("mxfp8", 8, 32),
    }
    assert canonical_quant_type(" Q4 ") == "int4" and canonical_quant_type("FP8") == "int8"
    assert blob_quant_params({"quant_type": "int4", "group_size": "32"}) == ("int4", "affine", 4, 32)
    assert blob_quant_params({"quant_type": "int4"}) == ("int4", "affine", 4, 64)
    assert blob_quant_params({"quant_type": "NVFP4", "group_size": "16"}) == ("nvfp4", "nvfp4", 4, 16)
    assert blob_quant_params({"quant_type": "mxfp8", "group_size": ""}) == ("mxfp8", "mxfp8", 8, 32)
    assert packed_shape((2560, 2560), "int4", 32) == ((2560, 320), (2560, 80))
    assert packed_shape((10240, 2560), "mxfp8") == ((10240, 640), (10240, 80))
    with pytest.raises(ArgumentError, match=r"group_size: nvfp4 .* not 32"):
        blob_quant_params({"quant_type": "nvfp4", "group_size": "32"})
    with pytest.raises(ArgumentError, match="names no quant_type"):
        blob_quant_params({"group_size": "32"})
    with pytest.raises(ArgumentError, match="group_size 'x32' is not an integer"):
        blob_quant_params({"quant_type": "int4", "group_size": "x32"})
    with pytest.raises(ArgumentError, match="unknown MLX quant type 'q4_k'"):
        canonical_quant_type("q4_k")


def test_default_group_sizes_and_errors() -> None:
    w = np.random.default_rng(0).standard_normal((2, 128)).astype(np.float32)
    assert mlx_quantize(w, "int4")[1].shape == (2, 2)
    assert mlx_quantize(w, "int8")[1].shape == (2, 2)
    assert mlx_quantize(w, "nvfp4")[1].shape == (2, 8)
    with pytest.raises(ArgumentError, match=r"^group_size: int4 .* not 16"):
        mlx_quantize(w, "int4", 16)
    with pytest.raises(ArgumentError, match=r"^w: .* not a multiple of the group size 32"):
        mlx_quantize(w[:, :100], "int4", 32)
    with pytest.raises(ArgumentTypeError, match=r"^w: .* not float64"):
        mlx_quantize(w.astype(np.float64), "int4")
    packed, scales, biases = mlx_quantize(w, "int4")
    with pytest.raises(ArgumentError, match="needs biases"):
        mlx_dequantize(packed, scales, None, "int4")
    with pytest.raises(ValueError):
        mlx_dequantize(packed, scales[:, :1], biases[:, :1], "int4")
    with pytest.raises(ValueError):
        mlx_dequantize(packed, scales, biases, "int4", 32)
    with pytest.raises(TypeError):  # integer scales beside float biases
        mlx_dequantize(packed, scales.astype(np.int32), biases, "int4")
    packed, scales, _ = mlx_quantize(w, "mxfp4")
    with pytest.raises(ValueError):
        mlx_dequantize(packed, scales, scales, "mxfp4")
    with pytest.raises(TypeError):
        mlx_dequantize(packed, scales.astype(np.float32), None, "mxfp4")
    with pytest.raises(ArgumentTypeError, match=r"^dtype: .* not int32"):
        mlx_dequantize(packed, scales, None, "mxfp4", dtype=np.int32)


finite_rows = hnp.arrays(
    np.float32,
    st.sampled_from([(1, 128), (3, 128), (2, 256)]),
    elements=st.floats(-1e4, 1e4, width=32, allow_subnormal=False),
)


@settings(max_examples=40, deadline=None)
@given(w=finite_rows, scale=st.floats(1e-20, 1e20), combo=st.sampled_from(COMBOS), dtype=st.sampled_from(DTYPES))
def test_hypothesis_matches_mlx(w: np.ndarray, scale: float, combo, dtype) -> None:
    with np.errstate(over="ignore"):
        w = (w * np.float32(scale)).astype(dtype)
    check_against_mlx(w, *combo)


@settings(max_examples=60, deadline=None)
@given(w=finite_rows, combo=st.sampled_from(COMBOS))
def test_round_trip_error_bounds(w: np.ndarray, combo) -> None:
    qt, gs = combo
    mode, bits, _ = MLX_MODES[qt]
    w = np.where(np.abs(w) < 1e-30, np.float32(0), w)  # E8M0 cannot reach below 2**-127: MLX's byte wraps there
    back = mlx_dequantize(*mlx_quantize(w, qt, gs), qt, gs, dtype=np.float32).astype(np.float64)
    x = w.astype(np.float64).reshape(w.shape[0], -1, gs)
    err = np.abs(back.reshape(x.shape) - x)
    amax = np.abs(x).max(-1, keepdims=True)
    slack = 1e-6 * amax + 2e-7  # MLX floors the affine scale at 1e-7
    if mode == "affine":
        # a half step, or up to 1.5 steps at the far edge once the scale is refined to hit the near edge
        step = (x.max(-1, keepdims=True) - x.min(-1, keepdims=True)) / ((1 << bits) - 1)
        assert np.all(err <= 1.5 * step + slack)
        # the edge with the larger magnitude (one of them, when -min == max) is reproduced exactly, hence so
        # is a constant group
        near = np.where(np.abs(x) == amax, err, np.inf).min(-1, keepdims=True)
        assert np.all(near <= slack)
    elif mode == "mxfp4":
        # E2M1's widest gap is 2 of its 6 units; the scale 2**e is at most twice max / 6
        assert np.all(err <= amax / 3 + slack)
    elif mode == "nvfp4":
        # as mxfp4, but the E4M3 scale saturates at 448 (max 2688 without a global scale) and its subnormals
        # (down to 2**-9) are coarse
        assert np.all(err <= amax / 3 + np.maximum(np.abs(x) - 2688, 0) + 6 * 2.0**-9 + slack)
    else:
        # E4M3 keeps 3 mantissa bits; the smallest values fall into its subnormals
        assert np.all(err <= np.abs(x) / 16 + amax * 2.0**-16 + slack)
