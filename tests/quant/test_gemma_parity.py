"""Every tensor of the real Gemma 3 270M GGUF dequantizes as gguf-py's `gguf.quants` does (Q4_K, Q5_0,
Q6_K, Q8_0, F32), through the calls users make: `load()` and `tensor(name)`."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf import quants

import weightkit


@pytest.mark.slow
def test_gemma_tensors_match_gguf_py(gemma_path, gemma_reader):
    reader = gemma_reader
    seen = set()
    with weightkit.open(gemma_path) as m:
        # 168M elements of token_embd.weight are checked on a row range below, to keep the suite quick.
        loaded = m.load(name for name in m.tensors if name != "token_embd.weight")  # as users load a model
        for t in reader.tensors:
            if t.name == "token_embd.weight":
                continue
            ours = loaded[t.name]
            assert np.array_equal(ours.view(np.uint8), m.tensor(t.name).view(np.uint8)), t.name
            theirs = quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(ours.shape)
            assert ours.dtype == np.float32
            assert np.array_equal(ours.view(np.uint32), theirs.astype(np.float32).view(np.uint32)), t.name
            seen.add(t.tensor_type.name)
        info = m.tensors["token_embd.weight"]
        rows = 4096
        raw = m.raw("token_embd.weight")[: rows * info.nbytes // info.shape[0]]
        ours = weightkit.quant.dequantize(raw, info.dtype, (rows, info.shape[1]))
        theirs = quants.dequantize(raw.reshape(rows, -1), gguf.GGMLQuantizationType(int(info.dtype)))
        assert np.array_equal(ours, theirs)
    assert seen == {"F32", "Q4_K", "Q5_0", "Q6_K", "Q8_0"}
