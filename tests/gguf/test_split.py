"""Split models in llama.cpp's gguf-split convention."""

from __future__ import annotations

import numpy as np
import pytest

import weightkit
from weightkit.errors import FormatError
from weightkit.gguf import GGUFSplit, GGUFValueType, open_gguf, plan_tensor, write_split

from .reference import gguf_py_view


def _tensors(n=7):
    rng = np.random.default_rng(0)
    return {f"blk.{i}.w": rng.standard_normal((4, 8 * (i + 1))).astype(np.float32) for i in range(n)}


def _write(tmp_path, **limits):
    data = _tensors()
    planned = [plan_tensor(name, a.shape, "F32", a) for name, a in data.items()]
    md = {"general.architecture": "llama", "general.name": "split test"}
    return data, write_split(tmp_path / "model", md, planned, **limits)


def test_split_by_tensor_count(tmp_path):
    data, paths = _write(tmp_path, max_tensors=3)
    assert [p.name for p in paths] == [f"model-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    for i, p in enumerate(paths):
        md, tensors = gguf_py_view(p)
        assert md["split.no"] == ((GGUFValueType.UINT16,), i)
        assert md["split.count"] == ((GGUFValueType.UINT16,), 3)
        assert md["split.tensors.count"] == ((GGUFValueType.INT32,), 7)
        assert ("general.name" in md) == (i == 0)  # all metadata lives in the first shard
        assert len(tensors) == (3 if i < 2 else 1)
    for shard in (paths[0], paths[2]):  # any shard opens the whole model
        with weightkit.open(shard) as m:
            assert isinstance(m, GGUFSplit)
            assert list(m.tensors) == list(data)
            assert m.metadata["general.name"] == "split test"
            for name, arr in data.items():
                assert np.array_equal(m.tensor(name), arr)
            assert [m.tensors[n].shard for n in data] == [0, 0, 0, 1, 1, 1, 2]


def test_split_by_size_like_gguf_split(tmp_path):
    # padded sizes: 128, 256, 384, 512, 640, 768, 896 bytes; limit 1000 -> [128 256 384] [512] [640] [768] [896]
    _, paths = _write(tmp_path, max_bytes=1000)
    counts = [len(open_gguf(p).shards[i].tensors) for i, p in enumerate(paths)]
    assert counts == [3, 1, 1, 1, 1]


def test_missing_shard_is_reported(tmp_path):
    _, paths = _write(tmp_path, max_tensors=3)
    paths[1].unlink()
    with pytest.raises(FileNotFoundError):
        weightkit.open(paths[0])


def test_shard_from_another_split_is_reported(tmp_path):
    _, paths = _write(tmp_path, max_tensors=3)
    paths[1].write_bytes(paths[2].read_bytes())
    with pytest.raises(FormatError, match=r"shard 2 of 3 should have split\.no=1; it has split\.no=2"):
        weightkit.open(paths[0])


def test_renamed_shard_cannot_find_siblings(tmp_path):
    _, paths = _write(tmp_path, max_tensors=3)
    renamed = tmp_path / "renamed.gguf"
    paths[0].rename(renamed)
    with pytest.raises(FormatError, match="siblings cannot be found"):
        weightkit.open(renamed)
