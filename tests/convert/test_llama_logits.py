"""llama.cpp runs what weightkit converts: its logits on tiny checkpoints match transformers' on the same
checkpoints (recorded by tests/data/make_logits_golden.py; checked live where llama-cpp-python is installed)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from weightkit.convert.hf import convert_hf

from .conftest import make_hf_checkpoints

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "data" / "logits_golden.json").read_text())
#: absolute tolerance on logits and log-sum-exps (|values| <= ~1.5). Both sides compute in float32 from the same
#: float32 weights (--outtype f32), so SiLU models agree to ~1e-5 (order of the sums, SIMD paths, threads);
#: ggml's GELU (Gemma 2) goes through an f16 lookup table, ~1e-3 apart.
ATOL = {"Tiny-Llama-3-8B-Instruct": 1e-4, "tiny-qwen3": 1e-4, "tiny-gemma-2": 5e-3}


def test_recorded_logits_belong_to_the_checkpoints_built_now(hf_checkpoints):
    """The record can't go stale silently: each checkpoint is still built, to the same bytes, and the record
    is complete for the live check."""
    assert set(GOLDEN["checkpoints"]) == set(ATOL)
    for name, rec in GOLDEN["checkpoints"].items():
        assert name in make_hf_checkpoints.CHECKPOINTS
        folder = hf_checkpoints[name]
        files = [folder / "config.json", *sorted(folder.glob("*.safetensors"))]
        assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files} == rec["files"], name
        config = json.loads((folder / "config.json").read_text())
        assert rec["vocab_size"] == config.get("vocab_size", config.get("text_config", {}).get("vocab_size"))
        n = len(rec["token_ids"])
        assert n >= 4 and all(0 <= t < rec["vocab_size"] for t in rec["token_ids"])
        assert rec["columns"] == sorted(set(rec["columns"])) and rec["columns"][-1] < rec["vocab_size"]
        assert len(rec["logsumexp"]) == n and [len(row) for row in rec["logits"]] == [len(rec["columns"])] * n


@pytest.mark.parametrize("name", sorted(ATOL))
def test_llama_cpp_logits_match_transformers(hf_checkpoints, tmp_path, name):
    """Live: llama.cpp loads weightkit's f32 GGUF and scores the recorded token ids as transformers did."""
    llama_cpp = pytest.importorskip("llama_cpp")
    rec = GOLDEN["checkpoints"][name]
    out = tmp_path / f"{name}.gguf"
    convert_hf(hf_checkpoints[name], out, "f32")
    ids = rec["token_ids"]
    llm = llama_cpp.Llama(model_path=str(out), logits_all=True, n_ctx=64, n_batch=64, verbose=False)
    try:
        llm.eval(ids)
        logits = np.array(llm.scores[: len(ids)], dtype=np.float64)
    finally:
        llm.close()
    assert logits.shape == (len(ids), rec["vocab_size"])
    top = logits.max(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
    np.testing.assert_allclose(logits[:, rec["columns"]], rec["logits"], rtol=0, atol=ATOL[name])
    np.testing.assert_allclose(lse, rec["logsumexp"], rtol=0, atol=ATOL[name])
