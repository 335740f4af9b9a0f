"""TQ1_0 and TQ2_0 against llama.cpp's ggml, bit for bit, plus properties of the formats themselves."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from weightkit import quant
from weightkit.dtypes import ggml_type

TYPES = ("TQ1_0", "TQ2_0")
EXTRA = Path(__file__).resolve().parents[1] / "data" / "ggml_fp4_extra"  # holds the ternary edge cases too
FIXTURE_CASES = [(t, c) for t in TYPES for c in ("gaussian", "student_t", "uniform", "edge", "ternary")]
EXTRA_CASES = [(t, c) for t in TYPES for c in ("specials", "ternary_ties", "mxfp4_scales", "nvfp4_scales")]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return np.array_equal(np.asarray(a, np.float32).view(np.uint32), np.asarray(b, np.float32).view(np.uint32))


def dequantize_silently(raw: np.ndarray, qtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Dequantize with numpy warnings turned into errors: inf/NaN scales must not leak warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return quant.dequantize(raw, qtype, shape)


@pytest.mark.parametrize(("qtype", "case"), FIXTURE_CASES)
def test_matches_ggml_fixtures(ggml_fixtures: Path, qtype: str, case: str) -> None:
    meta = json.loads((ggml_fixtures / "index.json").read_text())["types"][qtype]
    assert not meta["quantize_needs_imatrix"]
    ref = np.load(ggml_fixtures / f"{qtype}.npz")
    x = ref[f"{case}.input"]
    assert np.array_equal(quant.quantize(x, qtype), ref[f"{case}.quantized"])
    assert same_bits(dequantize_silently(ref[f"{case}.quantized"], qtype, x.shape), ref[f"{case}.dequantized"])


@pytest.mark.parametrize("qtype", TYPES)
def test_random_bytes_match_ggml(ggml_fixtures: Path, qtype: str) -> None:
    ref = np.load(ggml_fixtures / f"{qtype}.npz")
    expected = ref["random_bytes.dequantized"]
    assert same_bits(dequantize_silently(ref["random_bytes.quantized"], qtype, expected.shape), expected)
    # Many times over, so the work is split into chunks across threads.
    many = np.tile(ref["random_bytes.quantized"], 40)
    rows, cols = expected.shape
    assert same_bits(dequantize_silently(many, qtype, (40 * rows, cols)), np.tile(expected, (40, 1)))


@pytest.mark.parametrize(("qtype", "case"), EXTRA_CASES)
def test_matches_ggml_edge_cases(qtype: str, case: str) -> None:
    """Zeros, denormals, huge values, inf/NaN anywhere in a block, exact half-way ties (make_extra.py)."""
    x = np.load(EXTRA / "inputs.npz")[case]
    ref = np.load(EXTRA / f"{qtype}.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(quant.quantize(x, qtype), ref[f"{case}.quantized"])
    assert same_bits(dequantize_silently(ref[f"{case}.quantized"], qtype, x.shape), ref[f"{case}.dequantized"])


@pytest.mark.parametrize("qtype", TYPES)
def test_every_byte_and_special_scale_matches_ggml(qtype: str) -> None:
    ref = np.load(EXTRA / f"{qtype}.npz")
    expected = ref["codes.dequantized"]
    assert same_bits(dequantize_silently(ref["codes.quantized"], qtype, expected.shape), expected)


@pytest.mark.parametrize("qtype", TYPES)
def test_importance_matrix_is_ignored_like_ggml(ggml_fixtures: Path, qtype: str) -> None:
    ref = np.load(ggml_fixtures / f"{qtype}.npz")
    x = ref["gaussian.input"]
    imatrix = np.linspace(0.1, 3, x.shape[1], dtype=np.float32)
    assert np.array_equal(quant.quantize(x, qtype, imatrix), ref["gaussian.quantized"])


@pytest.mark.parametrize("qtype", TYPES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_dequantize_accepts_any_bytes(qtype: str, data: st.DataObject) -> None:
    info = ggml_type(qtype)
    n_blocks = data.draw(st.integers(1, 4))
    raw = data.draw(st.binary(min_size=n_blocks * info.type_size, max_size=n_blocks * info.type_size))
    out = dequantize_silently(np.frombuffer(raw, np.uint8), qtype, (n_blocks, info.block_size))
    assert out.dtype == np.float32 and out.shape == (n_blocks, info.block_size)
    d = np.frombuffer(raw, np.uint8).reshape(n_blocks, -1)[:, -2:].copy().view(np.float16).astype(np.float32)
    finite = np.isfinite(d[:, 0])
    # TQ1_0 decodes every byte to trits in {-1, 0, 1}; TQ2_0's 2-bit codes also reach 2.
    top = 1 if qtype == "TQ1_0" else 2
    assert np.all(np.abs(out[finite]) <= top * np.abs(d[finite]))


@pytest.mark.parametrize("qtype", TYPES)
@settings(max_examples=80, deadline=None)
@given(x=hnp.arrays(np.float32, st.tuples(st.integers(1, 3), st.just(256)), elements=st.floats(-1e4, 1e4, width=32)))
def test_round_trip_error_is_bounded(qtype: str, x: np.ndarray) -> None:
    """Each value becomes the nearest of {-1, 0, 1} x its block's max |x| (stored as f16)."""
    y = quant.dequantize(quant.quantize(x, qtype), qtype, x.shape).astype(np.float64)
    amax = np.abs(x).astype(np.float64).max(axis=1, keepdims=True)
    f16_error = np.maximum(amax * 2.0**-11, 2.0**-25)  # the scale's rounding to f16, normal or subnormal
    assert np.all(np.abs(x - y) <= amax * (0.5 + 2.0**-20) + f16_error)


@pytest.mark.parametrize("qtype", TYPES)
@settings(max_examples=60, deadline=None)
@given(
    trits=hnp.arrays(np.int8, st.tuples(st.integers(1, 3), st.just(256)), elements=st.integers(-1, 1)),
    scale=st.floats(1e-3, 1e3).map(lambda s: float(np.float16(s))),
)
def test_ternary_weights_survive_exactly(qtype: str, trits: np.ndarray, scale: float) -> None:
    trits[:, 0] = 1  # every block's max is then exactly `scale`, which f16 holds
    x = trits.astype(np.float32) * np.float32(scale)
    assert same_bits(quant.dequantize(quant.quantize(x, qtype), qtype, x.shape), x)
