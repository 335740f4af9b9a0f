"""The template Ollama picks from a GGUF's chat template (template.Named over its bundled library), and the
template and params layers it stores, against Go's record (tests/data/make_ollama_template_library_go.go) and
Ollama's own cases (template_test.go's TestNamed over testdata/templates.jsonl, copied as
tests/data/ollama_templates.jsonl)."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from weightkit.gguf import write_gguf
from weightkit.ollama import Store
from weightkit.ollama.create import create_from_gguf, create_from_modelfile
from weightkit.ollama.go_template import check_template
from weightkit.ollama.template_library import edit_distance, library, match_template

DATA = Path(__file__).parents[1] / "data"
GO = json.loads((DATA / "ollama_template_library.json").read_text())


def test_bundled_files_are_ollamas():
    bundled = resources.files("weightkit.ollama").joinpath("data")
    got = {name: hashlib.sha256(bundled.joinpath(name).read_bytes()).hexdigest() for name in GO["files"]}
    assert got == GO["files"]


def test_layers_as_go():
    """Each library entry's template layer bytes and its params layer as json.Encoder writes the struct
    (gemma3-instruct.json's temperature is not in it)."""
    got = {e.name: (hashlib.sha256(e.template).hexdigest(), (e.params or b"").decode()) for e in library()}
    assert got == {name: (layer["template_sha256"], layer["params"]) for name, layer in GO["layers"].items()}
    for entry in library():
        check_template(entry.template.decode())  # each parses, as TestNamed checks


def test_matches_as_go():
    """template.Named's choice, and its distance where it chose, on Ollama's cases and edited templates
    around the threshold (non-ASCII runes included)."""
    wrong = []
    for case in GO["cases"]:
        found = match_template(case["text"])
        distance = edit_distance(case["text"], found.jinja, 100) if found else case["distance"]
        if (found.name if found else "", distance) != (case["name"], case["distance"]):
            wrong.append((case["text"][:40], case["name"], found and found.name))
    assert not wrong


def test_named_as_template_test_go():
    """TestNamed: each chat template of testdata/templates.jsonl names its library template, which parses."""
    for line in (DATA / "ollama_templates.jsonl").read_text().splitlines():
        for name, chat_template in json.loads(line).items():
            found = match_template(chat_template)
            assert found is not None and found.name == name
            check_template(found.template.decode())


def test_edit_distance_on_runes():
    assert edit_distance("kitten", "sitting", 100) == 3
    assert edit_distance("日本語", "日本", 100) == 1
    assert edit_distance("a" * 50, "b" * 50, 10) == 10  # capped at the limit


CHATML = json.loads((DATA / "ollama_templates.jsonl").read_text().splitlines()[1])["chatml"]


@pytest.fixture
def chatml_gguf(tmp_path):
    write_gguf(tmp_path / "chat.gguf", {"general.architecture": "llama", "general.file_type": np.uint32(1),
               "tokenizer.chat_template": CHATML}, {"a": np.ones((4, 32), np.float16)})  # fmt: skip
    return tmp_path


def _layers(store: Store, manifest) -> list[tuple[str, bytes]]:
    return [(layer.media_type.rsplit(".", 1)[1], store.blob_path(layer.digest).read_bytes())
            for layer in manifest.layers]  # fmt: skip


def test_create_detects_the_template(chatml_gguf):
    """A GGUF imported without a TEMPLATE gets the library's template and stop parameters (detectChatTemplate),
    with or without a Modelfile; a Modelfile's TEMPLATE replaces the template, its PARAMETERs merge over the
    stop, its stop wins."""
    store = Store(chatml_gguf / "store")
    chatml = next(e for e in library() if e.name == "chatml")
    layers = _layers(store, create_from_gguf(store, "plain", chatml_gguf / "chat.gguf"))
    assert layers[1:] == [("template", chatml.template), ("params", chatml.params)]
    assert chatml.params == GO["layers"]["chatml"]["params"].encode()
    (chatml_gguf / "Modelfile").write_text("FROM ./chat.gguf\nPARAMETER temperature 0.5\nTEMPLATE {{ .Prompt }}\n")
    layers = _layers(store, create_from_modelfile(store, "mine", chatml_gguf / "Modelfile"))
    assert layers[1:] == [
        ("template", b"{{ .Prompt }}"),
        ("params", b'{"stop":["\\u003c|im_start|\\u003e","\\u003c|im_end|\\u003e"],"temperature":0.5}\n'),
    ]
    (chatml_gguf / "Stop").write_text("FROM ./chat.gguf\nPARAMETER stop END\n")
    layers = _layers(store, create_from_modelfile(store, "stop", chatml_gguf / "Stop"))
    assert layers[1:] == [("template", chatml.template), ("params", b'{"stop":["END"]}\n')]


@pytest.mark.slow
def test_wrapped_distance_as_go():
    """Strings of 65,535 code points and more: the distance in Go's uint16 arithmetic, wrapped as Go wraps it."""
    for case in GO["wrapped"]:
        long, short = case["long"] * case["long_count"], case["short"] * case["short_count"]
        assert edit_distance(long, short, 1 << 20) == case["distance"]


def test_command_line_says_which(chatml_gguf, weightkit_cli):
    env = {"OLLAMA_MODELS": str(chatml_gguf / "store")}
    r = weightkit_cli("create", "m", "--from", chatml_gguf / "chat.gguf", env=env)
    assert r.returncode == 0 and r.stdout.startswith("using autodetected template chatml\ncreated m:latest"), r.stderr
