"""Granite 4.0-H beyond the goldens: a config.json saved by transformers 5.x (whose `layer_types` the reference
misreads) converts as its 4.x save does, and the layouts weightkit does not convert are refused."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from weightkit.convert.hf import convert_hf
from weightkit.errors import FormatError, UnsupportedError

from .conftest import checkpoint_group
from .test_hf_errors import _config, _set_config, assert_refused
from .test_hf_golden import GOLDEN

GRANITE_4H = "tiny-granite-4h"
#: transformers 5.25's names for the layer kinds the released checkpoints (saved by 4.x) call mamba and attention
_TF5_KINDS = {"mamba": "linear_attention", "attention": "full_attention"}

pytestmark = checkpoint_group(GRANITE_4H)


def test_config_saved_by_transformers_5_converts_as_saved_by_4(hf_checkpoints, tmp_path):
    """config.json as transformers 5.25's `save_pretrained` rewrites the 4.57.6 one (its layer kinds renamed,
    `rope_parameters`, `time_step_limit`): the file the reference writes from the 4.57.6 save, not the one it
    writes from this (every layer Mamba2)."""
    folder = tmp_path / GRANITE_4H
    shutil.copytree(hf_checkpoints[GRANITE_4H], folder)
    config = _config(folder)
    _set_config(folder, layer_types=[_TF5_KINDS[kind] for kind in config["layer_types"]],
                rope_parameters={"rope_theta": config["rope_theta"], "rope_type": "default"}, rope_scaling=...,
                rope_theta=..., time_step_limit=[0.0, {"__float__": "Infinity"}],
                transformers_version="5.25.0")  # fmt: skip
    convert_hf(folder, tmp_path / "out.gguf", "f32")
    digest = hashlib.sha256((tmp_path / "out.gguf").read_bytes()).hexdigest()
    assert digest == GOLDEN["checkpoints"][GRANITE_4H]["f32"]["sha256"]


CASES = [
    ("every layer attention", lambda d: _set_config(d, layer_types=["attention"] * 4), UnsupportedError,
     ["every layer is attention"]),
    ("no layer kinds", lambda d: _set_config(d, layer_types=...), FormatError, ["attn_layer_period"]),
    ("no tokenizer", lambda d: (d / "tokenizer.json").unlink(), UnsupportedError, ["no tokenizer.model"]),
    ("no group count", lambda d: _set_config(d, mamba_n_groups=...), FormatError, ["config.json", "mamba_n_groups"]),
]  # fmt: skip


@pytest.mark.parametrize(("what", "breaks", "error", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_refused(hf_checkpoints, tmp_path, what, breaks, error, fragments):
    assert_refused(hf_checkpoints[GRANITE_4H], tmp_path, breaks, error, fragments, "f16")
