"""The IQ types against llama.cpp's ggml: bit-exact dequantization, byte-exact quantization.

References: the shared fixtures (../shared/fixtures/ggml) and tests/data/ggml_iq_extra, made by
tests/data/make_ggml_iq_extra.py with the same ggml (imatrix/no-imatrix paths the fixtures miss,
corner-case inputs, NaN/inf/zero/subnormal scales).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from weightkit.dtypes import ggml_type
from weightkit.errors import ArgumentError
from weightkit.quant import dequantize, quantize

IQ_TYPES = ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_NL", "IQ4_XS"]
NEEDS_IMATRIX = {"IQ2_XXS", "IQ2_XS", "IQ1_S"}
EXTRA = Path(__file__).resolve().parents[1] / "data" / "ggml_iq_extra"


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.fixture(scope="module")
def index(ggml_fixtures: Path) -> dict:
    return json.loads((ggml_fixtures / "index.json").read_text())["types"]


@pytest.mark.parametrize("name", IQ_TYPES)
def test_fixtures_dequantize(ggml_fixtures: Path, index: dict, name: str) -> None:
    z = np.load(ggml_fixtures / f"{name}.npz")
    assert index[name]["cases"], name
    for case in index[name]["cases"]:
        ref = z[f"{case}.dequantized"]
        got = dequantize(z[f"{case}.quantized"], name, ref.shape)
        assert same_bits(got, ref), (name, case)


@pytest.mark.parametrize("name", IQ_TYPES)
def test_fixtures_quantize(ggml_fixtures: Path, index: dict, name: str) -> None:
    z = np.load(ggml_fixtures / f"{name}.npz")
    imatrix = z["imatrix"] if index[name]["quantize_needs_imatrix"] else None
    assert (imatrix is not None) == (name in NEEDS_IMATRIX)
    for case in index[name]["cases"]:
        if case == "random_bytes":
            continue
        got = quantize(z[f"{case}.input"], name, imatrix)
        assert np.array_equal(got, z[f"{case}.quantized"]), (name, case)


@pytest.mark.parametrize("name", IQ_TYPES)
def test_extra_quantize_both_paths(name: str) -> None:
    inputs = np.load(EXTRA / "inputs.npz")
    z = np.load(EXTRA / f"{name}.npz")
    keys = [k for k in z.files if not k.startswith("special.")]
    assert len(keys) == (9 if name in NEEDS_IMATRIX else 18)
    for key in keys:
        case, mode = key.split(".")
        x = inputs[case]
        imatrix = inputs[f"imatrix{x.shape[1]}"] if mode == "im" else None
        assert np.array_equal(quantize(x, name, imatrix), z[key].reshape(-1)), (name, key)


@pytest.mark.parametrize("name", IQ_TYPES)
def test_extra_special_scales(name: str) -> None:
    """Blocks whose f16 scale is NaN (either sign, quiet or signalling), ±inf, ±0, subnormal or huge."""
    z = np.load(EXTRA / f"{name}.npz")
    ref = z["special.dequantized"]
    assert np.isnan(ref).any() and np.isinf(ref).any()
    assert same_bits(dequantize(z["special.raw"], name, ref.shape), ref)


@pytest.mark.parametrize("name", sorted(NEEDS_IMATRIX))
def test_imatrix_required(name: str) -> None:
    with pytest.raises(ArgumentError, match=rf"^imatrix: ggml quantizes {name} only with an importance matrix"):
        quantize(np.ones((1, 256), np.float32), name)


@pytest.mark.parametrize("name", IQ_TYPES)
def test_matches_gguf_py(ggml_fixtures: Path, name: str) -> None:
    """Cross-check with gguf-py's numpy decoder (independent of ggml) on finite data."""
    gguf = pytest.importorskip("gguf")
    z = np.load(ggml_fixtures / f"{name}.npz")
    q = z["gaussian.quantized"].reshape(4, -1)
    ref = gguf.quants.dequantize(q, gguf.GGMLQuantizationType[name])
    assert same_bits(dequantize(q, name, ref.shape), ref.astype(np.float32))


def test_dequantize_many_chunks_threaded(ggml_fixtures: Path) -> None:
    """Large inputs go through the thread pool in chunks; results must not depend on the split."""
    for name in IQ_TYPES:
        z = np.load(ggml_fixtures / f"{name}.npz")
        raw, ref = z["gaussian.quantized"], z["gaussian.dequantized"]
        got = dequantize(np.tile(raw, 40), name, (40 * ref.size,))
        assert same_bits(got, np.tile(ref.reshape(-1), 40)), name


def test_quantize_rows_are_independent() -> None:
    """Row-chunked quantization (as the thread pool splits it) equals quantizing rows one by one."""
    x = np.random.default_rng(3).standard_normal((6, 512)).astype(np.float32)
    imatrix = np.linspace(0.2, 2, 512, dtype=np.float32)
    for name in IQ_TYPES:
        whole = quantize(x, name, imatrix)
        rows = np.concatenate([quantize(r, name, imatrix) for r in x])
        assert np.array_equal(whole, rows), name


@pytest.mark.parametrize("name", IQ_TYPES)
def test_block_sizes(name: str) -> None:
    info = ggml_type(name)
    x = np.random.default_rng(0).standard_normal((2, 512)).astype(np.float32)
    q = quantize(x, name, np.ones(512, np.float32))
    assert q.dtype == np.uint8 and q.size == info.nbytes(x.size)
