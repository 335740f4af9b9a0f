import json

import gguf
import numpy as np
import pytest

from weightkit.dtypes import (
    GGML_TYPES,
    GGMLType,
    exact_bytes,
    ggml_type,
    ggml_type_of_numpy,
    safetensors_dtype_of_numpy,
)
from weightkit.errors import ArgumentError, ArgumentTypeError

REMOVED = {4, 5, 31, 32, 33, 36, 37, 38}


def test_every_id_ggml_ever_assigned_is_known():
    assert sorted(int(t) for t in GGMLType) == list(range(43))
    assert {int(t) for t, i in GGML_TYPES.items() if i.removed} == REMOVED


def test_block_sizes_match_ggml_fixture_index(ggml_fixtures):
    index = json.loads((ggml_fixtures / "index.json").read_text())["types"]
    for name, entry in index.items():
        info = ggml_type(name)
        assert int(info.type) == entry["ggml_type"]
        assert (info.block_size, info.type_size) == (entry["block_size"], entry["type_size"]), name


def test_block_sizes_match_gguf_py_except_its_stale_q8_1():
    for t in gguf.GGMLQuantizationType:
        ours = ggml_type(int(t))
        theirs = gguf.GGML_QUANT_SIZES[t]
        if t.name == "Q8_1":  # gguf-py still has the old 40-byte block; ggml's block_q8_1 is 36 bytes
            assert (ours.block_size, ours.type_size) == (32, 36)
            continue
        assert (ours.block_size, ours.type_size) == theirs, t.name
        assert ours.name == t.name


def test_lookup_by_name_id_and_enum():
    assert ggml_type("q4_k") is ggml_type(12) is ggml_type(GGMLType.Q4_K)
    assert ggml_type("Q4_K").bits_per_weight == 4.5
    with pytest.raises(ArgumentError, match="unknown GGML type name 'Q9_9'"):
        ggml_type("Q9_9")
    with pytest.raises(ArgumentError, match="unknown GGML type id 43"):
        ggml_type(43)
    with pytest.raises(ArgumentTypeError, match=r"a GGML type is .*, not NoneType"):
        ggml_type(None)


def test_numpy_mapping():
    assert ggml_type_of_numpy(np.dtype(">f4")) == GGMLType.F32
    assert ggml_type_of_numpy(np.float16) == GGMLType.F16
    with pytest.raises(ArgumentTypeError, match="no GGML type stores numpy dtype uint32"):
        ggml_type_of_numpy(np.uint32)
    with pytest.raises(ArgumentTypeError, match="safetensors has no dtype for numpy complex128"):
        safetensors_dtype_of_numpy(np.complex128)


def test_exact_bytes():
    assert exact_bytes(np.arange(4, dtype="<u2"), 8, "t").tobytes() == bytes([0, 0, 1, 0, 2, 0, 3, 0])
    with pytest.raises(ArgumentError, match="tensor 't' takes 8 bytes, 6 given"):
        exact_bytes(bytes(6), 8, "tensor 't'")
    with pytest.raises(ArgumentTypeError, match=r"tensor 't': data must be contiguous bytes or an array \(list: "):
        exact_bytes([0] * 8, 8, "tensor 't'")
