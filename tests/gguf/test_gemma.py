"""On a real llama.cpp file, weightkit and gguf-py agree on everything."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

import weightkit

from .reference import gguf_py_view, same_value

pytestmark = pytest.mark.slow  # both read the real Gemma with gguf-py (the session's gemma_reader, about 13 s)


def test_gemma_matches_gguf_py(gemma_path, gemma_reader):
    theirs, their_tensors = gguf_py_view(gemma_reader)
    with weightkit.open(gemma_path) as m:
        assert len(m.metadata) == 33 and len(m.tensors) == 236
        assert list(m.metadata) == list(theirs)
        for key in m.metadata:
            assert same_value(m.metadata.typed(key), *theirs[key]), key
        assert len(m.metadata["tokenizer.ggml.tokens"]) == 262144
        ours = [(t.name, int(t.dtype), t.shape, t.offset, t.nbytes) for t in m.tensors.values()]
        assert ours == their_tensors


def test_gemma_tensor_bytes_match_gguf_py(gemma_path, gemma_reader):
    reader = gemma_reader
    with weightkit.open(gemma_path) as m:
        for t in reader.tensors:
            raw = m.raw(t.name)
            assert raw.base is not None  # a view of the map, not a copy
            assert np.array_equal(raw, np.asarray(t.data).reshape(-1).view(np.uint8)), t.name
            if t.tensor_type == gguf.GGMLQuantizationType.F32:
                assert np.array_equal(m.tensor(t.name), np.asarray(t.data).reshape(m.tensors[t.name].shape))
