"""`weightkit edit` against the files gguf-py's gguf_new_metadata.py and gguf_set_metadata.py write for the same
edits, recorded by tests/data/make_gguf_tools_golden.py."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from weightkit.cli import main
from weightkit.errors import ArgumentError
from weightkit.gguf import GGUFFile, GGUFValueType, edit_gguf
from weightkit.gguf.edit import TextValue, parse_assignment

from .tool_inputs import TEMPLATE, structure, tools_model

GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "gguf_tools_golden.json").read_text())["edit"]
INPUT_SHA256 = json.loads((Path(__file__).parents[1] / "data" / "gguf_tools_golden.json").read_text())["input_sha256"]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    path = tools_model(tmp_path_factory.mktemp("input") / "model.gguf")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == INPUT_SHA256, "re-record tests/data/gguf_tools_golden.json"
    return path


def _edit(*args: object) -> int:
    with pytest.raises(SystemExit) as done:
        main(["edit", *map(str, args)])
    return done.value.code


def _assert_same_file(path: Path, recorded: dict) -> None:
    assert structure(path) | {"name": recorded["name"]} == {k: recorded[k] for k in ("name", "keys", "tensors")}
    assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded["sha256"]


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_edit_writes_gguf_new_metadatas_file(case, source, tmp_path):
    template = tmp_path / "template.jinja"
    template.write_bytes(TEMPLATE.encode())
    options = [o.replace("{template}", str(template)) for o in GOLDEN[case]["weightkit"]]
    assert _edit(source, "-o", tmp_path / "out.gguf", *options) == 0
    _assert_same_file(tmp_path / "out.gguf", GOLDEN[case]["file"])


def test_edit_in_place(source, tmp_path):
    path = tmp_path / "model.gguf"
    shutil.copyfile(source, path)
    assert _edit(path, *GOLDEN["all"]["weightkit"][:4], "--json") == 0
    with GGUFFile(path) as f:
        assert f.metadata["general.name"] == "New name"
        assert f.metadata["general.description"] == "A test"


def test_a_failed_edit_in_place_leaves_the_file_as_it_was(source, tmp_path):
    path = tmp_path / "model.gguf"
    shutil.copyfile(source, path)

    def fail(done, total, name):
        if done > total // 2:
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        edit_gguf(path, set={"general.name": "x"}, progress=fail)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == INPUT_SHA256
    assert [p.name for p in tmp_path.iterdir()] == ["model.gguf"]


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("general.url=https://example.org:8080/x", "general.url", TextValue("https://example.org:8080/x")),
        ("a.b=7:uint64", "a.b", TextValue("7", GGUFValueType.UINT64)),
        ("a.b=yes:STRING", "a.b", TextValue("yes", GGUFValueType.STRING)),
        ("a.b=", "a.b", TextValue("")),
    ],
)
def test_set_reads_key_value_and_type(text, key, value):
    assert parse_assignment(text) == (key, value)


def test_set_types(source, tmp_path):
    out = tmp_path / "out.gguf"
    assignments = dict(map(parse_assignment, ["a.u64=7:uint64", "a.flag=true:bool", "a.text=5", "llama.block_count=9"]))
    edit_gguf(source, out, set=assignments)
    with GGUFFile(out) as f:
        typed = {key: (value.type, value.value) for key, value in f.metadata.typed_items()}
    assert typed["a.u64"] == (GGUFValueType.UINT64, 7)
    assert typed["a.flag"] == (GGUFValueType.BOOL, True)
    assert typed["a.text"] == (GGUFValueType.STRING, "5")  # a new key without a type is a string
    assert typed["llama.block_count"] == (GGUFValueType.UINT32, 9)  # an existing key keeps its type


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--set", "novalue"], "--set 'novalue': give KEY=VALUE"),
        (["--set", "llama.block_count=abc"], "--set llama.block_count='abc': not a UINT32 value"),
        (["--set", "llama.block_count=-1"], "llama.block_count"),
        (["--set", "tokenizer.ggml.tokens=x"], "holds an array"),
        (["--set", "a=maybe:bool"], "not a BOOL value"),
        (["--special-token", "nope", "<s>"], "--special-token 'nope': not one of bos, eos"),
        (["--special-token", "eos", "<none>"], "--special-token eos '<none>': .* has no such token"),
        (["--special-token", "eos"], "--special-token takes two values"),
        (["--remove", "no.such.key"], "no metadata key 'no.such.key' to remove"),
    ],
)
def test_bad_edits_are_one_line_and_write_nothing(options, message, source, tmp_path, capsys):
    assert _edit(source, "-o", tmp_path / "out.gguf", *options) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err)
    assert not (tmp_path / "out.gguf").exists()


def test_special_token_names_are_checked_by_the_library(source, tmp_path):
    with pytest.raises(ArgumentError, match="not one of"):
        edit_gguf(source, tmp_path / "out.gguf", special_tokens=[("pad", "<s>")])  # gguf-py's name is "padding"
