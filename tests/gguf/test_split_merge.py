"""`weightkit split` and `weightkit merge` against llama-gguf-split's own files, recorded by
tests/data/make_gguf_tools_golden.py (its digests of the files it wrote from tests/gguf/tool_inputs.py's model)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from weightkit.cli import main
from weightkit.errors import ArgumentError, FormatError
from weightkit.gguf import plan_tensor, split
from weightkit.gguf.split import merge_gguf, parse_split_size, split_gguf, write_files

from .tool_inputs import structure, tools_model

GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "gguf_tools_golden.json").read_text())
RERECORD = "re-record with tests/data/make_gguf_tools_golden.py"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    path = tools_model(tmp_path_factory.mktemp("input") / "model.gguf")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == GOLDEN["input_sha256"], f"the input drifted; {RERECORD}"
    return path


def _weightkit(*args: object) -> None:
    with pytest.raises(SystemExit) as done:
        main([str(a) for a in args])
    assert done.value.code == 0


def _assert_same_files(paths: list[Path], recorded: list[dict]) -> None:
    assert [structure(p) for p in paths] == [{k: r[k] for k in ("name", "keys", "tensors")} for r in recorded]
    assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths] == [r["sha256"] for r in recorded]


@pytest.mark.parametrize("case", sorted(GOLDEN["split"]))
def test_split_writes_llama_gguf_splits_files(case, source, tmp_path):
    _weightkit("split", source, tmp_path / "split", *GOLDEN["split"][case]["options"])
    _assert_same_files(sorted(tmp_path.iterdir()), GOLDEN["split"][case]["files"])


@pytest.mark.parametrize("case", sorted(GOLDEN["split"]))
def test_dry_run_plans_the_same_shards(case, source, tmp_path):
    options = GOLDEN["split"][case]["options"]
    limits = {"max_tensors": int(options[1])} if "--split-max-tensors" in options else {}
    if "--split-max-size" in options:
        limits["max_bytes"] = parse_split_size(options[1])
    shards = split_gguf(
        source, tmp_path / "split", no_tensor_first_split="--no-tensor-first-split" in options, dry_run=True, **limits
    )
    planned = [int(n) for n in re.findall(r"n_tensors = (\d+)", "\n".join(GOLDEN["split"][case]["dry_run"]))]
    assert [len(s.tensors) for s in shards] == planned
    assert [s.path.name for s in shards] == [f["name"] for f in GOLDEN["split"][case]["files"]]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("case", sorted(GOLDEN["merge"]))
def test_merge_writes_llama_gguf_splits_file(case, source, tmp_path):
    _weightkit("split", source, tmp_path / "split", *GOLDEN["split"][case]["options"])
    first = sorted(tmp_path.glob("split-*.gguf"))[0]
    _weightkit("merge", first, tmp_path / "merged.gguf")
    _assert_same_files([tmp_path / "merged.gguf"], [GOLDEN["merge"][case]["merged"]])
    if "resplit" in GOLDEN["merge"][case]:  # the merged file's split keys, moved to the end again
        resplit = GOLDEN["merge"][case]["resplit"]
        _weightkit("split", tmp_path / "merged.gguf", tmp_path / "again", *resplit["options"])
        _assert_same_files(sorted(tmp_path.glob("again-*")), resplit["files"])


def _split(source: Path, folder: Path) -> list[Path]:
    return [s.path for s in split_gguf(source, folder / "s", max_tensors=4)]


def test_a_missing_shard_is_named(source, tmp_path):
    paths = _split(source, tmp_path)
    paths[1].unlink()
    with pytest.raises(FileNotFoundError, match="shard 2 of 3 of a split model is missing") as e:
        merge_gguf(paths[0], tmp_path / "out.gguf")
    assert e.value.filename == str(paths[1])
    assert not (tmp_path / "out.gguf").exists()


def test_a_shard_of_another_model_is_named(source, tmp_path):
    paths = _split(source, tmp_path)
    paths[2].write_bytes(paths[1].read_bytes())
    wrong = r"shard 3 of 3 should have split\.no=2; it has split\.no=1, split\.count=3"
    with pytest.raises(FormatError, match=f"{paths[2].name}.*{wrong}"):
        merge_gguf(paths[0], tmp_path / "out.gguf")


def test_merge_refuses_a_file_that_is_not_a_shard_and_an_existing_output(source, tmp_path):
    with pytest.raises(FormatError, match="not a shard of a split model"):
        merge_gguf(source, tmp_path / "out.gguf")
    paths = _split(source, tmp_path)
    with pytest.raises(ArgumentError, match="already exists"):
        merge_gguf(paths[0], source)


@pytest.mark.parametrize(
    ("text", "expected"), [("48G", 48 * 10**9), ("500M", 500 * 10**6), ("1G", 10**9), ("1.5G", None), ("0M", None),
                           ("-2G", None), ("10K", None), ("G", None), ("100", None)]
)  # fmt: skip
def test_split_max_size_is_read_as_llama_gguf_split_reads_it(text, expected):
    if expected is None:
        with pytest.raises(ArgumentError, match="--split-max-size"):
            parse_split_size(text)
    else:
        assert parse_split_size(text) == expected


def test_a_first_tensor_over_the_size_limit_is_refused(source, tmp_path):
    # the reference: "one of splits have 0 tensors"; its first tensor is 512 KiB
    with pytest.raises(ArgumentError, match=r"'token_embd.weight' .* a shard would hold no tensors"):
        split_gguf(source, tmp_path / "s", max_bytes=500_000)


def test_split_streams_through_a_small_buffer(source, tmp_path, monkeypatch):
    monkeypatch.setattr(split, "COPY_CHUNK", 64 * 1024)
    tracemalloc.start()
    try:
        shards = split_gguf(source, tmp_path / "s", max_tensors=100)
        merge_gguf(shards[0].path, tmp_path / "merged.gguf")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert os.path.getsize(tmp_path / "merged.gguf") > 2_000_000
    assert peak < 600_000  # neither the model (2.2 MB) nor its largest tensor (512 KiB) is ever held


def test_a_failed_split_leaves_nothing_and_overwrites_nothing(source, tmp_path, monkeypatch):
    existing = tmp_path / "s-00001-of-00003.gguf"
    existing.write_bytes(b"keep me")
    copies = []

    def failing_copy(*args):
        copies.append(args)
        if len(copies) == 5:  # in the second shard
            raise OSError(28, "No space left on device")
        return real_copy(*args)

    real_copy = split._copy
    monkeypatch.setattr(split, "_copy", failing_copy)
    with pytest.raises(OSError, match="No space left"):
        split_gguf(source, tmp_path / "s", max_tensors=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == [existing.name]
    assert existing.read_bytes() == b"keep me"


def test_shards_written_together_or_not_at_all(tmp_path):
    existing = tmp_path / "m-00001-of-00002.gguf"
    existing.write_bytes(b"keep me")

    def broken():
        raise OSError(5, "Input/output error")

    files = [
        (existing, {"general.architecture": "llama"}, [plan_tensor("a", (4,), "F32", np.ones(4, np.float32))]),
        (tmp_path / "m-00002-of-00002.gguf", {}, [plan_tensor("b", (4,), "F32", broken)]),
    ]
    with pytest.raises(OSError, match="Input/output error"):
        write_files(files)
    assert sorted(p.name for p in tmp_path.iterdir()) == [existing.name]
    assert existing.read_bytes() == b"keep me"
