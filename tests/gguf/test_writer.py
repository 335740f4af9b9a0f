"""The streaming writer: declaration order, validation, atomicity, and metadata editing."""

from __future__ import annotations

import os

import numpy as np
import pytest

import weightkit
from weightkit.errors import ArgumentError
from weightkit.gguf import GGUFValueType, GGUFWriter, Value, edit_gguf, write_gguf

from .reference import gguf_py_view


def test_streaming_declare_then_write(tmp_path):
    path = tmp_path / "s.gguf"
    rng = np.random.default_rng(0)
    q = rng.integers(0, 256, 3 * 34, dtype=np.uint8)
    calls = []
    with GGUFWriter(path, {"general.architecture": "llama"}) as w:
        w.add_tensor("eager", np.ones(4, np.float32))
        w.add_tensor("lazy", lambda: calls.append(1) or np.full(4, 2, np.float16), dtype="F16", shape=(4,))
        w.add_tensor_info("later", (3, 32), "Q8_0")
        assert calls == []  # nothing read until its turn
        w.write_tensor("later", q.tobytes())
    with weightkit.open(path) as m:
        assert m.tensor("eager").tolist() == [1, 1, 1, 1]
        assert m.tensor("lazy").dtype == np.float16
        assert bytes(m.raw("later")) == q.tobytes()


def test_tensor_in_pieces(tmp_path):
    """A callable may give the tensor's bytes as consecutive pieces, each written as it comes; pieces that do
    not add up to the tensor, or that are values rather than bytes, are refused and nothing is written."""
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "p.gguf"
    with GGUFWriter(path) as w:
        w.add_tensor("t", lambda: (values[i].view(np.uint8) for i in range(3)), dtype="F32", shape=(3, 4))
    with weightkit.open(path) as m:
        assert m.tensor("t").tolist() == values.tolist()
    for pieces, message in (([values[0].view(np.uint8)], "its pieces give 16"),
                            ([values.view(np.uint8), b"x"], "its pieces give more"),
                            ([values], "not float32 values")):  # fmt: skip
        bad = tmp_path / "bad.gguf"
        with pytest.raises(ValueError, match=message), GGUFWriter(bad) as w:
            w.add_tensor("t", lambda p=pieces: iter(p), dtype="F32", shape=(3, 4))
        assert not bad.exists()


def test_write_out_of_order_is_refused(tmp_path):
    with GGUFWriter(tmp_path / "o.gguf") as w:
        w.add_tensor_info("a", (4,), "F32")
        w.add_tensor_info("b", (4,), "F32")
        with pytest.raises(ValueError, match="expected 'a', got 'b'"):
            w.write_tensor("b", np.zeros(4, np.float32))
        w.abort()
    assert os.listdir(tmp_path) == []


def test_wrong_size_and_bad_declarations(tmp_path):
    w = GGUFWriter(tmp_path / "x.gguf")
    with pytest.raises(ValueError, match="not whole Q4_K blocks"):
        w.add_tensor_info("a", (2, 100), "Q4_K")
    with pytest.raises(ValueError, match="negative"):
        w.add_tensor_info("a", (2, -1), "F32")
    with pytest.raises(ValueError, match="at most 4"):
        w.add_tensor_info("a", (1, 1, 1, 1, 1), "F32")
    with pytest.raises(ValueError, match="removed"):
        w.add_tensor_info("a", (32,), 31)
    with pytest.raises(ValueError, match="power of two"):
        w.set("general.alignment", 48, GGUFValueType.UINT32)
    with pytest.raises(ValueError, match="does not fit"):
        w.set("x", 300, GGUFValueType.UINT8)
    w.add_tensor_info("a", (4,), "F32")
    with pytest.raises(ValueError, match="duplicate"):
        w.add_tensor_info("a", (4,), "F32")
    with pytest.raises(ValueError, match="takes 16 bytes, 12 given"):
        w.write_tensor("a", bytes(12))
    w.abort()
    assert os.listdir(tmp_path) == []


def test_failure_midway_leaves_old_file(tmp_path):
    path = tmp_path / "m.gguf"
    write_gguf(path, {"v": 1}, {"a": np.zeros(4, np.float32)})
    before = path.read_bytes()

    def explode():
        raise OSError("disk on fire")

    with pytest.raises(OSError, match="disk on fire"), GGUFWriter(path, {"v": 2}) as w:
        w.add_tensor("a", np.ones(4, np.float32))
        w.add_tensor("b", explode, dtype="F32", shape=(4,))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.gguf"]


def test_missing_tensor_data_is_an_error(tmp_path):
    w = GGUFWriter(tmp_path / "m.gguf")
    w.add_tensor_info("a", (4,), "F32")
    with pytest.raises(ValueError, match="never written"):
        w.close()
    assert os.listdir(tmp_path) == []


def test_alignment_is_honoured(tmp_path):
    path = tmp_path / "a.gguf"
    write_gguf(path, {}, {"a": np.zeros(3, np.float32), "b": np.zeros(5, np.int8)}, alignment=256)
    with weightkit.open(path) as m:
        assert m.alignment == 256
        assert m.metadata.value_type("general.alignment") == GGUFValueType.UINT32
        assert all(t.offset % 256 == 0 for t in m.tensors.values())


def test_edit_metadata_copies_tensors(tmp_path):
    src, dst = tmp_path / "a.gguf", tmp_path / "b.gguf"
    rng = np.random.default_rng(1)
    q = rng.integers(0, 256, 2 * 144, dtype=np.uint8)
    with GGUFWriter(src, {"general.name": "old", "llama.block_count": Value(2, GGUFValueType.UINT32), "x": 1}) as w:
        w.add_tensor("q", q, dtype="Q4_K", shape=(2, 256))
        w.add_tensor("f", np.arange(4, dtype=np.float32))
    edit_gguf(src, dst, set={"general.name": "new", "llama.block_count": 3, "added": [1.5, 2.5]}, remove=["x"])
    md, _ = gguf_py_view(dst)
    assert md["general.name"][1] == "new"
    assert md["llama.block_count"] == ((GGUFValueType.UINT32,), 3)  # keeps its type
    assert "x" not in md and md["added"][0] == (GGUFValueType.ARRAY, GGUFValueType.FLOAT32)
    with weightkit.open(dst) as m:
        assert bytes(m.raw("q")) == q.tobytes()
        assert m.tensor("f").tolist() == [0, 1, 2, 3]
    edit_gguf(dst, set={"general.name": "in place"})  # editing in place is atomic too
    with weightkit.open(dst) as m:
        assert m.metadata["general.name"] == "in place"
        assert bytes(m.raw("q")) == q.tobytes()
    with pytest.raises(ArgumentError, match="no metadata key"):
        edit_gguf(dst, remove=["nope"])
