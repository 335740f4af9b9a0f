"""weightkit and Hugging Face's safetensors read each other's files, and write the very same bytes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import weightkit
from weightkit.dtypes import SafetensorsDType
from weightkit.safetensors import SafetensorsFile, tensor_from, write_safetensors

NUMPY_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.uint16, np.float16, np.int32, np.uint32, np.float32,
                np.float64, np.int64, np.uint64, np.complex64]  # fmt: skip


def arrays(rng):
    out = {f"t.{np.dtype(d).name}": (rng.standard_normal((3, 5)) * 100).astype(d) for d in NUMPY_DTYPES}
    out["scalar"] = np.array(7.5, np.float32)
    out["empty"] = np.zeros((0, 4), np.float16)
    return out


def test_same_bytes_as_reference(tmp_path):
    data = arrays(np.random.default_rng(0))
    ours, theirs = tmp_path / "w.safetensors", tmp_path / "r.safetensors"
    write_safetensors(ours, data, {"format": "np"})
    save_file(data, str(theirs), metadata={"format": "np"})
    assert ours.read_bytes() == theirs.read_bytes()


def test_reference_reads_ours_and_we_read_theirs(tmp_path):
    data = arrays(np.random.default_rng(1))
    path = tmp_path / "x.safetensors"
    save_file(data, str(path))
    with weightkit.open(path) as m:
        assert isinstance(m, SafetensorsFile)
        for name, arr in data.items():
            got = m.tensor(name)
            assert got.dtype == arr.dtype and got.shape == arr.shape and np.array_equal(got, arr)
    write_safetensors(path, data)
    back = load_file(str(path))
    for name, arr in data.items():
        assert np.array_equal(back[name], arr)


def test_ml_dtypes_and_packed_types(tmp_path):
    """Types numpy lacks: float8 through ml_dtypes, and the sub-byte F4/F6 as packed bytes."""
    rng = np.random.default_rng(2)
    f8 = rng.standard_normal(16).astype(ml_dtypes.float8_e4m3fn)
    bf = rng.standard_normal((2, 8)).astype(ml_dtypes.bfloat16)
    packed = rng.integers(0, 256, 6, dtype=np.uint8)
    path = tmp_path / "m.safetensors"
    write_safetensors(path, [tensor_from("f8", f8), tensor_from("bf", bf), tensor_from("f6", packed, "F6_E3M2", (8,))])
    with safe_open(str(path), framework="np") as f:
        assert sorted(f.keys()) == ["bf", "f6", "f8"]
    with weightkit.open(path) as m:
        assert m.tensors["f8"].dtype is SafetensorsDType.F8_E4M3
        assert np.array_equal(m.tensor("f8").view(np.uint8), f8.view(np.uint8))
        assert np.array_equal(m.tensor("bf").astype(np.float32), bf.astype(np.float32))
        assert bytes(m.raw("f6")) == packed.tobytes()
        with pytest.raises(weightkit.UnsupportedError, match="packed F6_E3M2"):
            m.tensor("f6")


def test_slices_read_only_their_rows(tmp_path):
    big = np.arange(1000 * 64, dtype=np.float32).reshape(1000, 64)
    path = tmp_path / "b.safetensors"
    write_safetensors(path, {"w": big})
    with weightkit.open(path) as m:
        rows = m.tensor("w")[10:12]
        assert not rows.flags.owndata and not rows.flags.writeable  # a view of the map
        assert np.array_equal(rows, big[10:12])


def test_interrupted_write_leaves_old_file(tmp_path):
    path = tmp_path / "o.safetensors"
    write_safetensors(path, {"a": np.ones(3, np.float32)})
    before = path.read_bytes()

    def explode():
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_safetensors(path, [tensor_from("a", explode, "F32", (3,))])
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["o.safetensors"]


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12).filter(
    lambda s: s != "__metadata__"
)


@settings(max_examples=50, deadline=None)
@given(
    st.dictionaries(names, st.sampled_from(NUMPY_DTYPES), min_size=1, max_size=6),
    st.dictionaries(names, st.text(max_size=8), max_size=1),
)
def test_any_content_same_bytes_as_reference(tmp_path_factory, spec, metadata):
    d = tmp_path_factory.mktemp("h")
    rng = np.random.default_rng(0)
    data = {name: rng.integers(0, 100, (2, 3)).astype(dt) for name, dt in spec.items()}
    write_safetensors(d / "w", data, metadata or None)
    save_file(data, str(d / "r"), metadata=metadata or None)
    assert (d / "w").read_bytes() == (d / "r").read_bytes()
