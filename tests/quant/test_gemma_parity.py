"""Every tensor of the real Gemma 3 270M GGUF dequantizes as gguf-py's `gguf.quants` does (Q4_K, Q5_0,
Q6_K, Q8_0, F32), through the calls users make: `load()` and `tensor(name)`. gguf-py's float32 values are
recorded as hashes by tests/data/make_gemma_gguf_py.py."""

from __future__ import annotations

import hashlib

import numpy as np

import weightkit
from weightkit.dtypes import GGMLType


def _sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def test_gemma_tensors_match_gguf_py(gemma_path, gemma_gguf_py):
    recorded = gemma_gguf_py["tensors"]
    whole = [t for t in recorded if "dequantized_rows" not in t]
    seen = set()
    with weightkit.open(gemma_path) as m:
        assert sorted(m.tensors) == sorted(t["name"] for t in recorded)
        # 168M elements of token_embd.weight are checked on a row range below, to keep the suite quick.
        loaded = m.load(t["name"] for t in whole)  # as users load a model
        for t in whole:
            ours = loaded[t["name"]]
            assert np.array_equal(ours.view(np.uint8), m.tensor(t["name"]).view(np.uint8)), t["name"]
            assert ours.dtype == np.float32 and ours.shape == tuple(t["shape"]), t["name"]
            assert _sha256(ours) == t["dequantized_sha256"], t["name"]
            seen.add(GGMLType(t["type"]).name)
        (part,) = [t for t in recorded if "dequantized_rows" in t]
        assert part["name"] == "token_embd.weight"
        info, rows = m.tensors[part["name"]], part["dequantized_rows"]
        raw = m.raw(part["name"])[: rows * info.nbytes // info.shape[0]]
        ours = weightkit.quant.dequantize(raw, info.dtype, (rows, info.shape[1]))
        assert ours.dtype == np.float32 and ours.shape == (rows, info.shape[1])
        assert _sha256(ours) == part["dequantized_sha256"]
    assert seen == {"F32", "Q4_K", "Q5_0", "Q6_K", "Q8_0"}
