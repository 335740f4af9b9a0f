"""Fixtures: nginx serving real and written models, the scriptable fault server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from weightkit.cli import main
from weightkit.gguf import plan_tensor, write_split
from weightkit.safetensors import write_checkpoint

from .servers import FaultServer, Nginx, have


def cli_json(capsys, *args: str):
    """`weightkit ARGS --json`'s answer; the command must succeed."""
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--json"])
    out, err = capsys.readouterr()
    assert exit_.value.code == 0, err
    return json.loads(out)


def require(program: str) -> None:
    """Skip on a developer's machine without `program`; on CI (which installs it) its absence is a failure."""
    if not have(program):
        message = f"{program} is not installed (.ci/run installs it with apt-get)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


SPLIT_TENSORS = {f"blk.{i}.w": np.random.default_rng(i).standard_normal((4, 32)).astype(np.float32) for i in range(7)}
CHECKPOINT_TENSORS = {
    f"layer.{i}.w": np.random.default_rng(i).standard_normal((8, 4 * (i + 1))).astype(np.float32) for i in range(6)
}


def _www(folder: Path, gemma_path: Path, minilm_folder: Path) -> Path:
    """What nginx serves: the real Gemma and MiniLM files (linked), a split GGUF and a sharded checkpoint."""
    folder.mkdir()
    (folder / "gemma.gguf").symlink_to(gemma_path)
    (folder / "minilm").symlink_to(minilm_folder)
    planned = [plan_tensor(name, a.shape, "F32", a) for name, a in SPLIT_TENSORS.items()]
    (folder / "split").mkdir()
    write_split(folder / "split" / "model", {"general.architecture": "llama"}, planned, max_tensors=3)
    write_checkpoint(folder / "ckpt", CHECKPOINT_TENSORS, {"format": "pt"}, max_shard_bytes=400)
    (folder / "ckpt" / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    return folder


@pytest.fixture(scope="session")
def nginx(tmp_path_factory, gemma_path, minilm_folder):
    require("nginx")
    work = tmp_path_factory.mktemp("nginx")
    server = Nginx([_www(work / "www", gemma_path, minilm_folder)], work)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def faults():
    server = FaultServer()
    yield server
    server.stop()
