"""weightkit and gguf-py read each other's files identically, in both byte orders."""

from __future__ import annotations

import gguf
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import weightkit
from weightkit.dtypes import GGMLType
from weightkit.gguf import GGUFValueType as T
from weightkit.gguf import GGUFWriter, Value, write_gguf
from weightkit.gguf.constants import KEY_ALIGNMENT, KEY_SPLIT_COUNT, KEY_SPLIT_NO, KEY_SPLIT_TENSORS
from weightkit.gguf.values import typed_array
from weightkit.quant import quantize

from .reference import gguf_py_view, same_value

SCALARS = {
    "t.u8": Value(255, T.UINT8),
    "t.i8": Value(-128, T.INT8),
    "t.u16": Value(65535, T.UINT16),
    "t.i16": Value(-32768, T.INT16),
    "t.u32": Value(2**32 - 1, T.UINT32),
    "t.i32": Value(-(2**31), T.INT32),
    "t.f32": Value(float(np.float32(3.14159)), T.FLOAT32),
    "t.bool": Value(True, T.BOOL),
    "t.str": Value("héllo ✓ \x00 wörld", T.STRING),
    "t.empty_str": Value("", T.STRING),
    "t.u64": Value(2**64 - 1, T.UINT64),
    "t.i64": Value(-(2**63), T.INT64),
    "t.f64": Value(-1e300, T.FLOAT64),
}
ARRAYS = {
    f"a.{t.name.lower()}": typed_array([True, False, True] if t == T.BOOL else np.arange(-3, 4) % 100, t)
    for t in T
    if t not in (T.ARRAY, T.STRING)
}
ARRAYS["a.str"] = typed_array(["<pad>", "ünïcode", "", "日本語", "a\x00b"], T.STRING)
ARRAYS["a.empty"] = typed_array([], T.FLOAT32)
ARRAYS["a.nested"] = Value([typed_array([1, 2], T.INT32), typed_array([3, 4, 5], T.INT32)], T.ARRAY, T.ARRAY)


def tensors(rng):
    out = {
        "f32": rng.standard_normal((3, 8)).astype(np.float32),
        "f16": rng.standard_normal((2, 2, 4)).astype(np.float16),
        "bf16": rng.standard_normal(16).astype("bfloat16"),
        "f64": rng.standard_normal((1, 2, 3, 4)),
        "i8": rng.integers(-128, 127, 5).astype(np.int8),
        "i16": rng.integers(-1000, 1000, 5).astype(np.int16),
        "i32": rng.integers(-(2**31), 2**31 - 1, 5).astype(np.int32),
        "i64": rng.integers(-(2**62), 2**62, 5).astype(np.int64),
    }
    return out


def metadata():
    return {"general.architecture": Value("llama", T.STRING), **SCALARS, **ARRAYS}


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("alignment", [None, 64])
def test_weightkit_writes_gguf_py_reads(tmp_path, order, alignment):
    rng = np.random.default_rng(0)
    path = tmp_path / "w.gguf"
    data = tensors(rng)
    q4k = rng.integers(0, 256, 2 * 144, dtype=np.uint8)
    with GGUFWriter(path, metadata(), alignment=alignment, byte_order=order) as w:
        for name, arr in data.items():
            w.add_tensor(name, arr)
        w.add_tensor("q4k", q4k, dtype="Q4_K", shape=(2, 256))

    theirs, their_tensors = gguf_py_view(path)
    with weightkit.open(path) as m:
        assert list(m.metadata) == list(theirs)
        for key in m.metadata:
            assert same_value(m.metadata.typed(key), *theirs[key]), key
        for key, value in metadata().items():
            assert m.metadata.typed(key) == value, key
        ours = [(t.name, int(t.dtype), t.shape, t.offset, t.nbytes) for t in m.tensors.values()]
        assert ours == their_tensors
        for name, arr in data.items():
            got = m.tensor(name)
            assert got.shape == arr.shape and got.dtype.newbyteorder("=") == arr.dtype
            assert np.array_equal(got.astype(arr.dtype), arr, equal_nan=True)
        assert bytes(m.raw("q4k")) == q4k.tobytes()
        assert all(t.offset % m.alignment == 0 for t in m.tensors.values())


def _gguf_py_write(path, order: str, rng):
    endian = gguf.GGUFEndian.BIG if order == ">" else gguf.GGUFEndian.LITTLE
    w = gguf.GGUFWriter(path, "llama", endianess=endian)
    for key, v in {**SCALARS, **ARRAYS}.items():
        if key == "a.nested" or key == "a.empty":
            continue  # gguf-py's writer cannot type an empty array; nested arrays tested below
        if v.type == T.ARRAY:
            items = v.value.tolist() if isinstance(v.value, np.ndarray) else v.value
            w.add_key_value(key, items, T.ARRAY, sub_type=gguf.GGUFValueType(int(v.element)))
        else:
            w.add_key_value(key, v.value, gguf.GGUFValueType(int(v.type)))
    w.add_key_value("a.nested", [[1, 2], [3, 4, 5]], gguf.GGUFValueType.ARRAY)
    data = tensors(rng)
    for name, arr in data.items():
        if arr.dtype == "bfloat16":
            w.add_tensor(name, arr.view(np.uint16).copy(), raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(name, arr.copy())
    q8 = rng.integers(0, 256, 4 * 34, dtype=np.uint8)
    w.add_tensor("q8", q8.reshape(4, 34), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return data, q8


@pytest.mark.parametrize("order", ["<", ">"])
def test_gguf_py_writes_weightkit_reads(tmp_path, order):
    path = tmp_path / "g.gguf"
    data, q8 = _gguf_py_write(path, order, np.random.default_rng(1))
    theirs, their_tensors = gguf_py_view(path)
    with weightkit.open(path) as m:
        assert m.byte_order == order
        assert list(m.metadata) == list(theirs)
        for key in m.metadata:
            assert same_value(m.metadata.typed(key), *theirs[key]), key
        assert m.metadata["a.nested"][1].tolist() == [3, 4, 5]
        ours = [(t.name, int(t.dtype), t.shape, t.offset, t.nbytes) for t in m.tensors.values()]
        assert ours == their_tensors
        for name, arr in data.items():
            assert np.array_equal(m.tensor(name).astype(arr.dtype), arr, equal_nan=True), name
        assert bytes(m.raw("q8")) == q8.tobytes()


@pytest.mark.parametrize("order", ["<", ">"])
def test_same_bytes_as_gguf_py(tmp_path, order):
    """Given the same content, weightkit writes the very bytes gguf-py writes."""
    theirs = tmp_path / "g.gguf"
    _gguf_py_write(theirs, order, np.random.default_rng(2))
    ours = tmp_path / "w.gguf"
    with weightkit.open(theirs) as m, GGUFWriter(ours, dict(m.metadata.typed_items()), byte_order=order) as w:
        for name, info in m.tensors.items():
            w.add_tensor(name, m.raw(name), dtype=info.dtype, shape=info.shape)
    assert ours.read_bytes() == theirs.read_bytes()


@pytest.mark.needs_torch
def test_torch_tensors_write_like_numpy(tmp_path):
    """GGUFWriter takes torch tensors: their dtype names the type (bfloat16 too), or they are quantized."""
    import torch

    a = torch.arange(32, dtype=torch.float32).reshape(2, 16).bfloat16()
    b = torch.randn(4, 64, generator=torch.Generator().manual_seed(1))
    with GGUFWriter(tmp_path / "t.gguf", {}) as w:
        w.add_tensor("a", a)
        w.add_tensor("b", b, dtype="Q8_0")
        w.add_tensor("c", lambda: b, dtype="F16", shape=(4, 64))
    write_gguf(tmp_path / "n.gguf", {}, {"a": a.float().numpy().astype(ml_dtypes.bfloat16)})
    with weightkit.open(tmp_path / "t.gguf") as m, weightkit.open(tmp_path / "n.gguf") as n:
        assert m.tensors["a"].dtype == GGMLType.BF16 and np.array_equal(m.raw("a"), n.raw("a"))
        assert np.array_equal(m.raw("b"), quantize(b.numpy(), "Q8_0"))
        assert np.array_equal(m.tensor("c"), b.numpy().astype(np.float16))


def test_reread_is_identical(tmp_path):
    """Reading a file and writing it again reproduces it byte for byte."""
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    write_gguf(a, metadata(), tensors(np.random.default_rng(3)))
    with weightkit.open(a) as m:
        write_gguf(b, dict(m.metadata.typed_items()), {n: m.tensor(n) for n in m.tensors})
    assert a.read_bytes() == b.read_bytes()


scalar_values = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(width=32, allow_nan=False),
    st.text(max_size=20),
)
arrays = st.one_of(
    st.lists(st.text(max_size=10), max_size=8),
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=8),
    st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=8),
    st.lists(st.lists(st.integers(0, 100), min_size=1, max_size=4), min_size=1, max_size=3),
)
# Keys the reader interprets (alignment, split layout) must hold valid values; test_malformed covers bad ones.
INTERPRETED = {KEY_ALIGNMENT, KEY_SPLIT_NO, KEY_SPLIT_COUNT, KEY_SPLIT_TENSORS}
keys = st.text(st.characters(codec="utf-8", categories=("L", "N", "P")), min_size=1, max_size=16).filter(
    lambda k: k not in INTERPRETED
)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(keys, st.one_of(scalar_values, arrays), max_size=8))
def test_any_metadata_round_trips(tmp_path_factory, md):
    path = tmp_path_factory.mktemp("h") / "h.gguf"
    write_gguf(path, md, {"x": np.zeros(4, np.float32)})
    theirs, _ = gguf_py_view(path)
    with weightkit.open(path) as m:
        assert list(m.metadata) == list(md)
        for key, value in md.items():
            typed = m.metadata.typed(key)
            assert same_value(typed, *theirs[key]), key
            got = m.metadata[key]
            if isinstance(value, list) and value and isinstance(value[0], list):
                assert [g.tolist() for g in got] == value
            elif isinstance(value, list):
                assert list(got) == value or np.allclose(got, value)
            elif isinstance(value, float):
                assert got == float(np.float32(value))
            else:
                assert got == value
