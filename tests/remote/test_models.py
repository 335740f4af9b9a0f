"""Remote models served by nginx give what the local files give, for a small share of their bytes."""

from __future__ import annotations

import numpy as np
import pytest

import weightkit
from weightkit.cli import main
from weightkit.gguf import GGUFSplit
from weightkit.safetensors import SafetensorsCheckpoint

from .conftest import CHECKPOINT_TENSORS, SPLIT_TENSORS, cli_json

pytestmark = pytest.mark.network


@pytest.mark.slow
def test_gemma_inspect_matches_local_and_reads_under_5_percent(nginx, gemma_path, capsys):
    local = cli_json(capsys, "inspect", str(gemma_path))
    remote = cli_json(capsys, "inspect", nginx.url("gemma.gguf"))
    cost = remote.pop("remote")
    assert remote.pop("path") == nginx.url("gemma.gguf")
    local.pop("path")
    assert remote == local
    assert cost["file_size"] == gemma_path.stat().st_size
    # The 6.5 MB header: 1 MiB first, then half as much again each time the parse runs out (5 requests).
    assert 6_500_000 < cost["bytes_fetched"] < 0.05 * cost["file_size"]
    assert cost["requests"] == 5


@pytest.mark.parametrize("engine", ["llama.cpp", "ollama"])
def test_gemma_estimate_matches_local(nginx, gemma_path, capsys, engine):
    args = ["--engine", engine, "-c", "4096,32768", "--gpu", "1GiB"]
    local = cli_json(capsys, "estimate", str(gemma_path), *args)
    remote = cli_json(capsys, "estimate", nginx.url("gemma.gguf"), *args)
    costs = [doc.pop("remote") for doc in remote]
    assert remote == local
    assert all(c == costs[0] and c["bytes_fetched"] < 0.05 * c["file_size"] for c in costs)


def test_gemma_tensors_fetched_on_demand_exactly(nginx, gemma_path):
    with weightkit.open(nginx.url("gemma.gguf")) as remote, weightkit.open(gemma_path) as local:
        held = remote._src.held  # the header's prefix: tensors inside it cost nothing more
        infos = sorted(local.tensors.values(), key=lambda t: t.offset)
        inside = [t.name for t in infos if t.offset + t.nbytes <= held][:2]
        beyond = [t.name for t in infos if t.offset > held][:3]
        assert inside and beyond
        before = remote.remote.bytes_fetched
        for name in inside + beyond:
            raw = remote.raw(name)
            assert np.array_equal(raw, local.raw(name))
            assert not raw.flags.writeable
        assert remote.remote.bytes_fetched - before == sum(local.tensors[n].nbytes for n in beyond)
        np.testing.assert_array_equal(remote.tensor(beyond[0]), local.tensor(beyond[0]))  # dequantized alike


@pytest.mark.needs_torch
def test_minilm_safetensors_matches_local(nginx, minilm_folder, capsys):
    url = nginx.url("minilm/model.safetensors")
    local = cli_json(capsys, "inspect", str(minilm_folder / "model.safetensors"))
    remote = cli_json(capsys, "inspect", url)
    cost = remote.pop("remote")
    remote.pop("path"), local.pop("path")
    assert remote == local
    assert remote["summary"]["architecture"] == "bert"  # from the config.json beside it, as locally
    assert cost["bytes_fetched"] < 0.02 * cost["file_size"]
    with weightkit.open(url, framework="torch") as m, weightkit.open(minilm_folder / "model.safetensors") as ref:
        name = "encoder.layer.0.attention.self.query.weight"
        t = m.tensor(name)
        assert np.array_equal(t.numpy(), ref.tensor(name))
        t[0, 0] = 1  # torch gets writable memory, as from a local file


def test_split_gguf_any_shard_opens_all(nginx):
    with weightkit.open(nginx.url("split/model-00002-of-00003.gguf")) as m:
        assert isinstance(m, GGUFSplit) and len(m.shards) == 3
        assert list(m.tensors) == list(SPLIT_TENSORS)
        for name, array in SPLIT_TENSORS.items():
            assert np.array_equal(m.tensor(name), array)
        assert m.remote.bytes_fetched < 3 * 4096 + sum(a.nbytes for a in SPLIT_TENSORS.values())


def test_sharded_checkpoint_by_its_index(nginx, capsys):
    url = nginx.url("ckpt/model.safetensors.index.json")
    with weightkit.open(url) as m, weightkit.open(nginx.roots[0] / "ckpt") as local:
        assert isinstance(m, SafetensorsCheckpoint) and m.files == local.files and len(m.files) > 2
        assert dict(m.metadata) == dict(local.metadata) and m.config == local.config
        for name, array in CHECKPOINT_TENSORS.items():
            assert np.array_equal(m.tensor(name), array)
    remote = cli_json(capsys, "inspect", url)
    assert remote["summary"]["architecture"] == "bert"
    assert [t["shard"] for t in remote["tensors"] if "shard" in t] == [
        t["shard"] for t in cli_json(capsys, "inspect", str(nginx.roots[0] / "ckpt"))["tensors"] if "shard" in t
    ]


def test_table_output_says_what_was_fetched(nginx, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["inspect", nginx.url("split/model-00001-of-00003.gguf")])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "(GGUF v3, 3 shards)" in out
    assert "fetched 4.2 KiB of 4.2 KiB (100.0%) in 3 requests" in out  # each small shard whole, in one request
