"""The HF checkpoints the conversion tests share: built once per session by tests/data/make_hf_checkpoints.py."""

from __future__ import annotations

import fcntl
import importlib.util
from pathlib import Path

import pytest

from ..conftest import built_once

DATA = Path(__file__).resolve().parents[1] / "data"
_spec = importlib.util.spec_from_file_location("make_hf_checkpoints", DATA / "make_hf_checkpoints.py")
make_hf_checkpoints = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_hf_checkpoints)


@pytest.fixture(scope="session")
def hf_checkpoints(tmp_path_factory) -> dict[str, Path]:
    """Every test checkpoint by name, plus the real all-MiniLM-L6-v2: built once a run, whatever the number of test
    processes (the vocabularies come from the llama-cpp-python sdist, downloaded once into the asset cache)."""

    def build(root: Path) -> None:
        cache = make_hf_checkpoints.asset_dir()
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / ".lock", "w") as lock:  # one download into the cache that test runs share
            fcntl.flock(lock, fcntl.LOCK_EX)
            make_hf_checkpoints.build_all(root)

    root = built_once(tmp_path_factory, "hf", build)
    folders = {name: root / name for name in make_hf_checkpoints.CHECKPOINTS}
    folders["all-MiniLM-L6-v2"] = make_hf_checkpoints.minilm_folder()
    return folders
