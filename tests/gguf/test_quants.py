"""gguf-py's tests/test_quants.py (llama.cpp's gguf-py, as llama-cpp-python 0.3.36 bundles it), with weightkit's
kernels in the place of gguf-py's: for F16 and every type gguf-py implements, the same three comparisons with
ggml's C, here as sha256 of ggml's outputs recorded by tests/data/make_gguf_py_quants.py:

- quantize normal random values (one row of zeros among them), with a column-wise sum of squares as the
  importance matrix for the types whose ggml quantizer requires one;
- dequantize ggml's quantized bytes;
- dequantize random float16 bytes read as the type.

Upstream draws (8, 1024, 1024) values unseeded; tests/gguf/gguf_py_quant_inputs.py draws a seeded (2, 4, 1024),
which keeps the cases in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weightkit import quant
from weightkit.dtypes import GGMLType

from .gguf_py_quant_inputs import SHAPE, sha256, upstream_inputs

RECORD = json.loads((Path(__file__).parents[1] / "data" / "gguf_py_quants.json").read_text())


@pytest.mark.parametrize("name", sorted(RECORD["types"]))
def test_quants_match_ggml(name):
    qtype, expected = GGMLType[name], RECORD["types"][name]
    values, f16_bytes = upstream_inputs(qtype)
    rows = values.reshape(-1, SHAPE[-1])
    imatrix = (rows * rows).sum(axis=0) if expected["requires_imatrix"] else None
    ours = quant.quantize(rows, qtype, imatrix=imatrix)
    assert sha256(ours) == expected["quantized"], f"quantizing to {name} differs from ggml"
    back = quant.dequantize(ours, qtype, rows.shape)
    assert sha256(back) == expected["dequantized"], f"dequantizing {name} differs from ggml"
    noise = quant.dequantize(f16_bytes.reshape(-1), qtype, SHAPE)
    assert sha256(noise) == expected["dequantized_f16_noise"], f"dequantizing noise as {name} differs from ggml"
