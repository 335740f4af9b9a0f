"""`weightkit convert` with the converter's split options: the shards convert_hf_to_gguf.py writes, byte for byte,
recorded by tests/data/make_gguf_tools_golden.py (under "convert")."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from weightkit.cli import main

from ..gguf.tool_inputs import structure

GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "gguf_tools_golden.json").read_text())["convert"]


def _convert(*args: object) -> int:
    with pytest.raises(SystemExit) as done:
        main(["convert", *map(str, args)])
    return done.value.code


@pytest.mark.parametrize("case", sorted(GOLDEN["cases"]))
def test_convert_splits_as_the_converter(case, hf_checkpoints, tmp_path):
    recorded = GOLDEN["cases"][case]
    folder = hf_checkpoints[GOLDEN["checkpoint"]]
    assert _convert(folder, tmp_path / "model.gguf", "--outtype", GOLDEN["outtype"], *recorded["options"]) == 0
    paths = sorted(tmp_path.iterdir())
    assert [structure(p) for p in paths] == [{k: f[k] for k in ("name", "keys", "tensors")} for f in recorded["files"]]
    assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths] == [f["sha256"] for f in recorded["files"]]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--type", "Q4_K_M", "--split-max-tensors", "5"], "run split on it"),
        (["--to", "hf", "--split-max-size", "1G"], "the split options apply to --to gguf"),
        (["--split-max-size", "1.5G"], "--split-max-size '1.5G'"),
        (["--split-max-tensors", "-1"], "--split-max-tensors must not be negative"),
    ],
)
def test_split_options_it_cannot_use_are_one_line(options, message, hf_checkpoints, tmp_path, capsys):
    assert _convert(hf_checkpoints[GOLDEN["checkpoint"]], tmp_path / "model.gguf", *options) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())
