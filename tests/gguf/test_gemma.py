"""On a real llama.cpp file, weightkit and gguf-py agree on everything: gguf-py's view of the Gemma file is
recorded by tests/data/make_gemma_gguf_py.py (gguf-py takes about 30 s to read it)."""

from __future__ import annotations

import hashlib
import importlib.metadata

import numpy as np

import weightkit
from weightkit.dtypes import GGMLType

from .reference import same_as_recorded


def _sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def test_the_recording_is_the_installed_gguf_pys(gemma_gguf_py, gemma_path):
    """The recording still is what gguf-py says, as long as the gguf-py installed is the one that made it."""
    rerecord = "re-record with: python tests/data/make_gemma_gguf_py.py"
    assert gemma_gguf_py["gguf"] == importlib.metadata.version("gguf"), rerecord
    model = gemma_gguf_py["model"]
    assert model["version"] == importlib.metadata.version(model["package"]), rerecord
    assert (gemma_path.name, gemma_path.stat().st_size) == (model["file"], model["size"]), rerecord


def test_gemma_matches_gguf_py(gemma_path, gemma_gguf_py):
    theirs = gemma_gguf_py["metadata"]
    with weightkit.open(gemma_path) as m:
        assert len(m.metadata) == 33 and len(m.tensors) == 236
        assert list(m.metadata) == list(theirs)
        for key in m.metadata:
            assert same_as_recorded(m.metadata.typed(key), theirs[key]), key
        assert theirs["tokenizer.ggml.tokens"]["len"] == len(m.metadata["tokenizer.ggml.tokens"]) == 262144
        ours = [(t.name, int(t.dtype), t.shape, t.offset, t.nbytes) for t in m.tensors.values()]
        their_tensors = [(t["name"], t["type"], tuple(t["shape"]), t["offset"], t["nbytes"])
                         for t in gemma_gguf_py["tensors"]]  # fmt: skip
        assert ours == their_tensors


def test_gemma_tensor_bytes_match_gguf_py(gemma_path, gemma_gguf_py):
    with weightkit.open(gemma_path) as m:
        assert list(m.tensors) == [t["name"] for t in gemma_gguf_py["tensors"]]
        for t in gemma_gguf_py["tensors"]:
            raw = m.raw(t["name"])
            assert raw.base is not None  # a view of the map, not a copy
            assert raw.dtype == np.uint8 and raw.size == t["nbytes"], t["name"]
            assert _sha256(raw) == t["data_sha256"], t["name"]
            if t["type"] == GGMLType.F32:  # gguf-py's data are the float32 values themselves
                values = m.tensor(t["name"])
                assert values.dtype == np.float32 and values.shape == tuple(t["shape"]), t["name"]
                assert _sha256(values) == t["data_sha256"], t["name"]
