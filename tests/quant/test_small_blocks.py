"""MXFP4, NVFP4, TQ1_0 and TQ2_0 against llama.cpp's ggml, bit for bit: the shared fixtures, random bytes,
and the edge cases of tests/data/ggml_fp4_extra (made by its make_extra.py)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from weightkit import quant

from ._reference import dequantize_silently, same_bits

TYPES = ("MXFP4", "NVFP4", "TQ1_0", "TQ2_0")
EXTRA = Path(__file__).resolve().parents[1] / "data" / "ggml_fp4_extra"
FIXTURE_CASES = [(t, c) for t in TYPES for c in ("gaussian", "student_t", "uniform", "edge", "ternary")]
EXTRA_CASES = [(t, c) for t in TYPES for c in ("specials", "ternary_ties", "mxfp4_scales", "nvfp4_scales")]


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
