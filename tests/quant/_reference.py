"""Reference vectors for the legacy and K-quant tests: the shared ggml fixtures and tests/data/ggml_extra."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from weightkit import quant
from weightkit.dtypes import ggml_type

EXTRA = Path(__file__).resolve().parents[1] / "data" / "ggml_extra"


def fixture_cases(fixtures: Path, name: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """The arrays of `<name>.npz` in the shared fixtures and the cases index.json lists for it."""
    index = json.loads((fixtures / "index.json").read_text())["types"][name]
    assert index["cases"], f"no cases for {name}"
    with np.load(fixtures / f"{name}.npz") as z:
        return dict(z), index["cases"]


def extra(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(arrays of ggml_extra/<name>.npz, the shared inputs and imatrices)."""
    with np.load(EXTRA / f"{name}.npz") as z, np.load(EXTRA / "inputs.npz") as i:
        return dict(z), dict(i)


def quantize_mismatch(x: np.ndarray, name: str, imatrix: np.ndarray | None, want: np.ndarray) -> str | None:
    """None if quantizing `x` gives `want` byte for byte, else which blocks differ."""
    got = quant.quantize(x, name, imatrix)
    if np.array_equal(got, want):
        return None
    size = ggml_type(name).type_size
    bad = np.flatnonzero((got.reshape(-1, size) != want.reshape(-1, size)).any(axis=1))
    return f"{len(bad)} of {want.size // size} blocks differ, first {bad[:5].tolist()}"


def dequantize_mismatch(raw: np.ndarray, name: str, want: np.ndarray) -> str | None:
    """None if dequantizing `raw` gives the float32 bit patterns of `want`, else how many differ."""
    got = quant.dequantize(raw, name, want.shape)
    bad = got.view(np.uint32) != want.view(np.uint32)
    return None if not bad.any() else f"{bad.sum()} of {bad.size} values differ"


def fixture_problems(fixtures: Path, name: str) -> dict[str, str]:
    """Every case of the shared fixtures for `name`: quantize byte-exact, dequantize bit-exact."""
    arrays, cases = fixture_cases(fixtures, name)
    problems = {}
    for case in cases:
        raw = arrays[f"{case}.quantized"]
        if f"{case}.input" in arrays:
            problems[f"{case} quantize"] = quantize_mismatch(arrays[f"{case}.input"], name, arrays.get("imatrix"), raw)
        if f"{case}.dequantized" in arrays:
            problems[f"{case} dequantize"] = dequantize_mismatch(raw, name, arrays[f"{case}.dequantized"])
    assert problems, f"nothing to check for {name}"
    return {k: v for k, v in problems.items() if v}


def extra_problems(name: str) -> dict[str, str]:
    """Every vector of ggml_extra/<name>.npz: quantize with and without imatrix, dequantize odd bytes."""
    arrays, inputs = extra(name)
    problems = {}
    for key, want in arrays.items():
        case, kind = key.rsplit(".", 1)
        if kind == "quantized" and f"{case}.dequantized" in arrays:
            problems[f"{case} dequantize"] = dequantize_mismatch(want, name, arrays[f"{case}.dequantized"])
        elif kind == "quantized":
            base, _, weighted = case.partition("+")
            imatrix = inputs[f"{base}.imatrix"] if weighted else None
            problems[f"{case} quantize"] = quantize_mismatch(inputs[f"{base}.input"], name, imatrix, want)
    assert len(problems) >= 5, f"too few vectors for {name}: {sorted(problems)}"
    return {k: v for k, v in problems.items() if v}


def round_trip_sample(
    seed: int, rows: int, n_per_row: int, scale: float, zeros: float, weighted: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """The round-trip tests' input: heavy-tailed rows (Student's t, 3 degrees of freedom) times `scale`
    with a `zeros` fraction of exact zeros, and an importance matrix when `weighted`."""
    rng = np.random.default_rng(seed)
    x = rng.standard_t(3, (rows, n_per_row)) * scale
    x[rng.random(x.shape) < zeros] = 0.0
    imatrix = np.random.default_rng(seed + 1).uniform(0.1, 2.0, n_per_row).astype(np.float32) if weighted else None
    return x.astype(np.float32), imatrix


def worst_relative_error(x: np.ndarray, name: str, imatrix: np.ndarray | None, group: int) -> float:
    """max |x - dequantize(quantize(x))| over each group of `group` values, relative to its max |x|."""
    y = quant.dequantize(quant.quantize(x, name, imatrix), name, x.shape)
    xb, yb = x.reshape(-1, group), y.reshape(-1, group)
    amax = np.abs(xb).max(axis=1)
    err = np.abs(xb.astype(np.float64) - yb).max(axis=1)
    return float((err / np.maximum(amax, 1e-30)).max())


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return np.array_equal(np.asarray(a, np.float32).view(np.uint32), np.asarray(b, np.float32).view(np.uint32))


def dequantize_silently(raw: np.ndarray, qtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Dequantize with numpy warnings turned into errors: inf/NaN scales must not leak warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return quant.dequantize(raw, qtype, shape)
