"""`weightkit create -f Modelfile` and `show --modelfile` against Ollama at the commit docs/formats.md names:
the parser's cases ported from parser/parser_test.go with their expected values; typed parameters, the
layers' JSON and text/template's verdicts recorded from Go (tests/data/make_ollama_modelfile_go.go)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from weightkit.errors import FormatError, UnsupportedError, WeightkitError
from weightkit.gguf import write_gguf
from weightkit.ollama import Store
from weightkit.ollama.create import config_bytes, create_from_gguf, create_from_modelfile, read_modelfile
from weightkit.ollama.go_template import TemplateError, check_template
from weightkit.ollama.modelfile import (
    Command,
    ModelfileError,
    create_request,
    go_format_value,
    messages_json,
    parameter_value,
    params_json,
    parse_modelfile,
    stored_modelfile,
)
from weightkit.safetensors import write_checkpoint

GO = json.loads((Path(__file__).parents[1] / "data" / "ollama_modelfile_go.json").read_text())
LLAMA3 = (
    "{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>{{ end }}{{ if .Prompt }}"
    "<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>{{ end }}<|start_header_id|>assistant"
    "<|end_header_id|>\n\n{{ .Response }}<|eot_id|>"
)


def commands(text: str | bytes) -> list[tuple[str, str]]:
    return [(c.name, c.args) for c in parse_modelfile(text).commands]


# parser_test.go: TestParseFileFile, TestParseFileTrimSpace, TestParseFileFrom, TestParseFileRenderer/Parser,
# TestParseFileMessages, TestParseFileQuoted, TestParseFileComments, TestParseMultiByte (input, commands).
PARSED = [
    (f"\nFROM model1\nADAPTER adapter1\nLICENSE MIT\nPARAMETER param1 value1\nPARAMETER param2 value2\n"
     f'TEMPLATE """{LLAMA3}"""    \n',
     [("model", "model1"), ("adapter", "adapter1"), ("license", "MIT"), ("param1", "value1"), ("param2", "value2"),
      ("template", LLAMA3)]),
    (f'\nFROM "     model 1"\nADAPTER      adapter3\nLICENSE "MIT       "\nPARAMETER param1        value1\n'
     f'PARAMETER param2    value2\nTEMPLATE """   {LLAMA3}   """    \n',
     [("model", "     model 1"), ("adapter", "adapter3"), ("license", "MIT       "), ("param1", "value1"),
      ("param2", "value2"), ("template", f"   {LLAMA3}   ")]),
    ('FROM "FOO  BAR  "', [("model", "FOO  BAR  ")]),
    ('FROM "FOO BAR"\nPARAMETER param1 value1', [("model", "FOO BAR"), ("param1", "value1")]),
    ("FROM     FOOO BAR    ", [("model", "FOOO BAR")]),
    ("FROM /what/is/the path ", [("model", "/what/is/the path")]),
    ("FROM foo", [("model", "foo")]),
    ("FROM /path/to/model/fp16.bin", [("model", "/path/to/model/fp16.bin")]),
    ("FROM llama3:7b-instruct-q4_K_M", [("model", "llama3:7b-instruct-q4_K_M")]),
    ("PARAMETER param1 value1\nFROM foo", [("param1", "value1"), ("model", "foo")]),
    ("PARAMETER what the \nFROM lemons make lemonade ", [("what", "the"), ("model", "lemons make lemonade")]),
    ("\nFROM foo\nRENDERER renderer1\n", [("model", "foo"), ("renderer", "renderer1")]),
    ("\nFROM foo\nPARSER parser1\n", [("model", "foo"), ("parser", "parser1")]),
    ("\nFROM foo\nMESSAGE system You are a file parser. Always parse things.\n",
     [("model", "foo"), ("message", "system: You are a file parser. Always parse things.")]),
    ("\nFROM foo\nMESSAGE system You are a file parser. Always parse things.",
     [("model", "foo"), ("message", "system: You are a file parser. Always parse things.")]),
    ("\nFROM foo\nMESSAGE system You are a file parser. Always parse things.\nMESSAGE user Hey there!\n"
     "MESSAGE assistant Hello, I want to parse all the things!\n",
     [("model", "foo"), ("message", "system: You are a file parser. Always parse things."),
      ("message", "user: Hey there!"), ("message", "assistant: Hello, I want to parse all the things!")]),
    ('\nFROM foo\nMESSAGE system """\nYou are a multiline file parser. Always parse things.\n"""\n\t\t\t',
     [("model", "foo"), ("message", "system: \nYou are a multiline file parser. Always parse things.\n")]),
    ('\nFROM foo\nSYSTEM """\nThis is a\nmultiline system.\n"""\n\t\t\t',
     [("model", "foo"), ("system", "\nThis is a\nmultiline system.\n")]),
    ('\nFROM foo\nSYSTEM """\nThis is a\nmultiline system."""\n\t\t\t',
     [("model", "foo"), ("system", "\nThis is a\nmultiline system.")]),
    ('\nFROM foo\nSYSTEM """This is a\nmultiline system."""\n\t\t\t',
     [("model", "foo"), ("system", "This is a\nmultiline system.")]),
    ('\nFROM foo\nSYSTEM """This is a multiline system."""\n\t\t\t',
     [("model", "foo"), ("system", "This is a multiline system.")]),
    ('\nFROM foo\nSYSTEM """\nThis is a multiline system with "quotes".\n"""\n',
     [("model", "foo"), ("system", '\nThis is a multiline system with "quotes".\n')]),
    ('\nFROM foo\nSYSTEM """"""\n', [("model", "foo"), ("system", "")]),
    ('\nFROM foo\nSYSTEM ""\n', [("model", "foo"), ("system", "")]),
    ("\nFROM foo\nSYSTEM \"'\"\n", [("model", "foo"), ("system", "'")]),
    ("\nFROM foo\nSYSTEM \"\"\"''\"'\"\"'\"\"'\"'''''\"\"'\"\"'\"\"\"\n",
     [("model", "foo"), ("system", "''\"'\"\"'\"\"'\"'''''\"\"'\"\"'")]),
    ('\nFROM foo\nTEMPLATE """\n{{ .Prompt }}\n"""', [("model", "foo"), ("template", "\n{{ .Prompt }}\n")]),
    ("\n# comment\nFROM foo\n\t", [("model", "foo")]),
    ("FROM test\n\tSYSTEM 你好👋", [("model", "test"), ("system", "你好👋")]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_parses_as_ollama(text, expected):
    assert commands(text) == expected


# TestParseFileParameters: "PARAMETER <case>" parses to (name, value).
PARAMETERS = {
    "numa true": ("numa", "true"), "num_ctx 1": ("num_ctx", "1"), "use_mmap true": ("use_mmap", "true"),
    "top_p 1.0": ("top_p", "1.0"), "min_p 0.05": ("min_p", "0.05"),
    "penalize_newline true": ("penalize_newline", "true"),
    "stop ### User:": ("stop", "### User:"), "stop ### User: ": ("stop", "### User:"),
    'stop "### User:"': ("stop", "### User:"), 'stop "### User: "': ("stop", "### User: "),
    'stop """### User:"""': ("stop", "### User:"), 'stop """### User:\n"""': ("stop", "### User:\n"),
    "stop <|endoftext|>": ("stop", "<|endoftext|>"), "stop </s>": ("stop", "</s>"),
}  # fmt: skip


@pytest.mark.parametrize("case", PARAMETERS)
def test_parameter_lines_as_ollama(case):
    assert commands(f"FROM foo\nPARAMETER {case}\n") == [("model", "foo"), PARAMETERS[case]]


# Rejections: Ollama's message for each (TestParseFileFrom, ...MissingValue, ...BadCommand, ...Messages,
# ...Quoted), with the line where the parser reports one.
REJECTED = [
    ("", "no FROM line"),
    ("PARAMETER param1 value1", "no FROM line"),
    ("\nFROM foo\nPARAMETER param1\n", "unexpected EOF: param1"),
    ("\nFROM foo\nBADCOMMAND param1 value1\n", '(line 3): command must be one of "from", "license", "template", '
     '"system", "adapter", "draft", "renderer", "parser", "parameter", "message", or "requires"'),
    ("\nFROM foo\nMESSAGE badguy I'm a bad guy!\n",
     '(line 3): message role must be one of "system", "user", or "assistant"'),
    ("\nFROM foo\nMESSAGE system\n", "unexpected EOF: system"),
    ("\nFROM foo\nMESSAGE system", "unexpected EOF"),
    ('\nFROM foo\nSYSTEM """This is a multiline system.""\n\t\t\t', "unexpected EOF"),
    ('\nFROM foo\nSYSTEM "\n\t\t\t', "unexpected EOF"),
    ("FROM\n", '(line 2): command must be one of'),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), REJECTED)
def test_rejected_as_ollama(text, message):
    with pytest.raises(ModelfileError) as e:
        parse_modelfile(text)
    assert e.value.reason == message or (message.endswith("of") and e.value.reason.startswith(message))


# TestParseFileFormatParseFile: what String() writes parses back to the same commands.
ROUND_TRIPS = [
    "\nFROM foo\nADAPTER adapter1\nLICENSE MIT\nPARAMETER param1 value1\nTEMPLATE template1\n"
    "MESSAGE system You are a file parser. Always parse things.\nMESSAGE user Hey there!\n",
    '\nFROM foo\nLICENSE """\nVery long and boring legal text.\nBlah blah blah.\n"Oh look, a quote!"\n"""\n\n'
    'MESSAGE system """\nYou are a store greeter. Always respond with "Hello!".\n"""\n',
    '\nFROM foo\nSYSTEM ""\n',
]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_string_parses_back(text):
    parsed = parse_modelfile(text)
    assert parse_modelfile(str(parsed)) == parsed


def test_utf16_and_bom():
    """TestParseFileUTF16ParseFile and TestParseMultiByte: a UTF-16 BOM decodes UTF-16 of either order."""
    text = "FROM bob\nPARAMETER param1 1\nPARAMETER param2 4096\nSYSTEM You are a utf16 file.\n"
    expected = [("model", "bob"), ("param1", "1"), ("param2", "4096"), ("system", "You are a utf16 file.")]
    assert commands(b"\xff\xfe" + text.encode("utf-16-le")) == expected
    assert commands(b"\xfe\xff" + text.encode("utf-16-be")) == expected
    assert commands(b"\xef\xbb\xbf" + text.encode()) == expected


def test_create_request_as_ollama(tmp_path):
    """TestCreateRequest: FROM a name; licenses kept in order, parameters typed, messages split at ": "."""
    text = ("FROM test\nPARAMETER temperature 0.5\nPARAMETER top_k 1\nSYSTEM You are a bot.\nLICENSE license1\n"
            "LICENSE license2\nMESSAGE user Hello there!\nMESSAGE assistant Hi! How are you?\n")  # fmt: skip
    req = create_request(parse_modelfile(text), tmp_path)
    assert (req.from_name, req.from_path, req.system, req.licenses) == ("test", None, "You are a bot.",
                                                                        ["license1", "license2"])  # fmt: skip
    assert req.parameters == {"temperature": np.float32(0.5), "top_k": 1}
    assert type(req.parameters["temperature"]) is np.float32 and type(req.parameters["top_k"]) is int
    assert req.messages == [("user", "Hello there!"), ("assistant", "Hi! How are you?")]
    with pytest.raises(ModelfileError, match="requires must be a valid semver"):
        create_request(parse_modelfile("FROM x\nREQUIRES 1.2.3.4"), tmp_path)
    with pytest.raises(ModelfileError, match="unknown parameter 'num_gqa'"):
        create_request(parse_modelfile("FROM x\nPARAMETER num_gqa 1"), tmp_path)
    assert create_request(parse_modelfile("FROM x\nREQUIRES 0.14.0-rc1"), tmp_path).requires == "0.14.0-rc1"


KIND_PARAMETER = {"int": "num_ctx", "float": "temperature", "bool": "use_mmap"}


@pytest.mark.parametrize("case", GO["params"], ids=lambda c: f"{c['kind']}:{c['text']}")
def test_parameter_values_as_go(case):
    """FormatParams' parse, the client's JSON, the server's re-encoding and fmt's %v, as recorded from Go."""
    try:
        value = parameter_value(KIND_PARAMETER[case["kind"]], case["text"])
        got = {"client": params_json({"p": value}, through_server=False).decode()}
        got["server"] = params_json({"p": value}).decode()
        got["show"] = go_format_value(json.loads(got["server"])["p"])
    except (ModelfileError, ValueError) as e:
        assert "error" in case and str(e).endswith(case["error"])
        return
    assert got == {k: case[k] for k in ("client", "server", "show")}


def test_layer_json_as_go():
    layers = GO["layers"]
    typed = {"temperature": np.float32(0.7), "num_ctx": 4096, "use_mmap": False, "stop": ["<|im_end|>", "</s>"],
             "top_p": np.float32(0.95), "seed": 9007199254740993}  # fmt: skip
    assert params_json(typed).decode() == layers["params_server"]
    assert params_json(typed, through_server=False).decode() == layers["params_x_create"]
    assert messages_json([("system", 'Be <brief> & "exact"\n'), ("user", "héllo\u2028")]).decode() == layers["messages"]
    config = {"model_format": "gguf", "model_family": "llama", "model_families": ["llama"], "model_type": "128",
              "file_type": "F16", "renderer": "r<1>", "parser": "p", "requires": "0.12", "architecture": "amd64",
              "os": "linux"}  # fmt: skip
    assert config_bytes(config).decode() == layers["config"]


def test_template_verdicts_as_go():
    """text/template's parse (as Ollama configures it) accepts or refuses each template of the recorded
    corpus (written cases, then random token strings) with Go's message."""
    wrong = []
    for case in GO["templates"]:
        try:
            check_template(case["template"])
            verdict = ""
        except TemplateError as e:
            verdict = str(e)
        if verdict != case["error"]:
            wrong.append((case["template"], case["error"], verdict))
    assert not wrong


@pytest.fixture
def model_dir(tmp_path):
    write_gguf(tmp_path / "tiny.gguf", {"general.architecture": "llama", "general.file_type": np.uint32(1)},
               {"a": np.ones((4, 32), np.float16)})  # fmt: skip
    return tmp_path


def _store_files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*")) if root.exists() else []


def test_create_from_modelfile_layers_and_show(model_dir):
    """createModel's layers in its order with their bytes; show --modelfile reads them back to the same
    commands (FROM the blob), parameters as fmt prints what Go decoded."""
    (model_dir / "Modelfile").write_text(
        'FROM ./tiny.gguf\nPARAMETER temperature 0.7\nPARAMETER num_ctx 1000000\nPARAMETER stop "<|im_end|>"\n'
        f'PARAMETER stop </s>\nPARAMETER mirostat 1\nTEMPLATE """{LLAMA3}"""\nSYSTEM You are a & b.\nLICENSE MIT\n'
        "LICENSE Apache\nMESSAGE user Hi\nMESSAGE assistant Hello!\nRENDERER r1\nREQUIRES 0.12\n"
    )
    assert read_modelfile(model_dir / "Modelfile").warnings == ["warning: parameter mirostat is deprecated"]
    store = Store(model_dir / "store")
    manifest = create_from_modelfile(store, "my", model_dir / "Modelfile")
    blobs = {
        layer.media_type.rsplit(".", 1)[1]: store.blob_path(layer.digest).read_bytes() for layer in manifest.layers
    }
    kinds = [layer.media_type.rsplit(".", 1)[1] for layer in manifest.layers]
    assert kinds == ["model", "template", "system", "license", "license", "params", "messages"]
    assert blobs["template"] == LLAMA3.encode() and blobs["system"] == b"You are a & b."
    assert (
        blobs["params"]
        == b'{"num_ctx":1000000,"stop":["\\u003c|im_end|\\u003e","\\u003c/s\\u003e"],"temperature":0.7}\n'
    )
    assert blobs["messages"] == b'[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"}]\n'
    assert store.blob_path(manifest.config.digest).read_bytes() == (
        b'{"model_format":"gguf","model_family":"llama","model_families":["llama"],"model_type":"128",'
        b'"file_type":"F16","renderer":"r1","requires":"0.12","architecture":"amd64","os":"linux"}\n'
    )
    shown = stored_modelfile(store, "my")
    assert shown.startswith('# Modelfile generated by "ollama show"\n# To build a new Modelfile based on this, '
                            "replace FROM with:\n# FROM my:latest\n\nFROM ")  # fmt: skip
    assert commands(shown)[1:] == [
        ("template", LLAMA3), ("system", "You are a & b."), ("renderer", "r1"), ("num_ctx", "1e+06"),
        ("stop", "<|im_end|>"), ("stop", "</s>"), ("temperature", "0.7"), ("license", "MIT"), ("license", "Apache"),
        ("message", "user: Hi"), ("message", "assistant: Hello!"),
    ]  # fmt: skip


def test_create_from_a_stored_model(model_dir):
    """FROM a stored model: its layers marked as from it, its params merged under the new ones, a LICENSE
    added to its own, TEMPLATE replaced; with no TEMPLATE, show prints Ollama's default."""
    store = Store(model_dir / "store")
    (model_dir / "Base").write_text("FROM ./tiny.gguf\nPARAMETER top_k 20\nPARAMETER temperature 0.2\nLICENSE A\n")
    create_from_modelfile(store, "base", model_dir / "Base")
    assert "TEMPLATE {{ .Prompt }}\n" in stored_modelfile(store, "base")
    (model_dir / "Child").write_text("FROM base\nPARAMETER temperature 0.9\nLICENSE B\nTEMPLATE {{ .Prompt }}!\n")
    manifest = create_from_modelfile(store, "child", model_dir / "Child")
    assert [(layer.media_type.rsplit(".", 1)[1], layer.from_) for layer in manifest.layers] == [
        ("model", "base:latest"), ("license", "base:latest"), ("template", ""), ("license", ""), ("params", "")
    ]  # fmt: skip
    params = next(layer for layer in manifest.layers if layer.media_type.endswith(".params"))
    assert store.blob_path(params.digest).read_bytes() == b'{"temperature":0.9,"top_k":20}\n'
    assert [c for c in commands(stored_modelfile(store, "child")) if c[0] in ("license", "template")] == [
        ("template", "{{ .Prompt }}!"), ("license", "A"), ("license", "B")
    ]  # fmt: skip


REFUSED = {
    "bad template": ("FROM ./tiny.gguf\nTEMPLATE {{ .Prompt }\n", ModelfileError,
                     'template error: template: :1: unexpected "}" in operand'),
    "unknown parameter": ("FROM ./tiny.gguf\nPARAMETER foo 1\n", ModelfileError, "unknown parameter 'foo'"),
    "bad value": ("FROM ./tiny.gguf\nPARAMETER num_ctx lots\n", ModelfileError, r"invalid int value \[lots\]"),
    "missing adapter": ("FROM ./tiny.gguf\nADAPTER ./nope.gguf\n", ModelfileError, "no such file or directory"),
    "adapter not a GGUF": ("FROM ./tiny.gguf\nADAPTER ./Modelfile\n", FormatError, "supplied file was not in GGUF"),
    "safetensors adapter": ("FROM ./tiny.gguf\nADAPTER ./peft\n", UnsupportedError,
                            r"peft: a safetensors ADAPTER .*weightkit convert ADAPTER_DIR adapter.gguf --lora"),
    "safetensors adapter file": ("FROM ./tiny.gguf\nADAPTER ./peft/adapter_model.safetensors\n", UnsupportedError,
                                 "a safetensors ADAPTER is converted by Ollama's own converter"),
    # the server converts it with Ollama's own converter (convertMTPDraftFromSafetensors)
    "safetensors draft beside a GGUF": ("FROM ./tiny.gguf\nDRAFT ./peft\n", UnsupportedError, "Ollama's own converter"),
}  # fmt: skip


@pytest.mark.parametrize("case", REFUSED)
def test_refused_modelfile_changes_nothing(model_dir, case):
    text, error, message = REFUSED[case]
    (model_dir / "Modelfile").write_text(text)
    (model_dir / "peft").mkdir()
    (model_dir / "peft" / "adapter_model.safetensors").write_bytes(b"")
    (model_dir / "peft" / "model.safetensors").write_bytes(b"")
    store = Store(model_dir / "store")
    create_from_gguf(store, "other", model_dir / "tiny.gguf")
    before = _store_files(model_dir / "store")
    with pytest.raises(error, match=message):
        create_from_modelfile(store, "my", model_dir / "Modelfile")
    assert _store_files(model_dir / "store") == before


def test_adapter_layer(model_dir):
    """ADAPTER with a GGUF LoRA: an adapter layer after the model's, named from its file (as the reference
    commit's server stores it; llama.cpp's converter marks an adapter with general.type "adapter")."""
    write_gguf(model_dir / "lora.gguf", {"general.architecture": "llama", "general.type": "adapter",
               "adapter.type": "lora"}, {"a.lora_a": np.ones((2, 32), np.float32)})  # fmt: skip
    (model_dir / "Modelfile").write_text("FROM ./tiny.gguf\nADAPTER ./lora.gguf\n")
    store = Store(model_dir / "store")
    manifest = create_from_modelfile(store, "tuned", model_dir / "Modelfile")
    adapter = manifest.layers[1]
    assert (adapter.media_type, adapter.from_) == ("application/vnd.ollama.image.adapter", "lora.gguf")
    assert store.blob_path(adapter.digest).read_bytes() == (model_dir / "lora.gguf").read_bytes()
    assert commands(stored_modelfile(store, "tuned"))[1] == ("adapter", str(store.blob_path(adapter.digest)))


def test_create_from_a_checkpoint_as_x_create(tmp_path):
    """FROM a safetensors folder: x/create's Modelfile layers after the tensor and .json layers (TEMPLATE,
    SYSTEM, the last LICENSE, the PARAMETERs as typed, no MESSAGE), its REQUIRES and PARSER in the config."""
    folder = tmp_path / "ckpt"
    write_checkpoint(folder, {"model.layers.0.mlp.up_proj.weight": np.ones((64, 64), np.float32)})
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (tmp_path / "Modelfile").write_text(
        "FROM ./ckpt\nTEMPLATE {{ .Prompt }\nSYSTEM s\nLICENSE a\nLICENSE b\nPARAMETER seed 9007199254740993\n"
        "MESSAGE user hi\nREQUIRES 0.20.0\nPARSER p\n"
    )
    store = Store(tmp_path / "store")
    manifest = create_from_modelfile(store, "st", tmp_path / "Modelfile")
    kinds = [layer.media_type.rsplit(".", 1)[1] for layer in manifest.layers]
    assert kinds == ["tensor", "json", "template", "system", "license", "params"]
    blobs = [store.blob_path(layer.digest).read_bytes() for layer in manifest.layers[2:]]
    assert blobs == [b"{{ .Prompt }", b"s", b"b", b'{"seed":9007199254740993}\n']
    config = json.loads(store.blob_path(manifest.config.digest).read_bytes())
    assert (config["requires"], config["parser"]) == ("0.20.0", "p")
    assert stored_modelfile(store, "st").startswith('# Modelfile generated by "ollama show"\nFROM st:latest\n')
    (tmp_path / "Old").write_text("FROM ./ckpt\nREQUIRES 0.18.0\n")
    with pytest.raises(WeightkitError, match=r"requires 0\.18\.0 is below the minimum supported version 0\.19\.0"):
        create_from_modelfile(store, "old", tmp_path / "Old")


def test_draft_layer(model_dir):
    """DRAFT with a GGUF: a draft layer after the model's (named from its file) and the config's draft."""
    write_gguf(model_dir / "small.gguf", {"general.architecture": "qwen3"}, {"a": np.ones((2, 32), np.float32)})
    (model_dir / "Modelfile").write_text("FROM ./tiny.gguf\nDRAFT ./small.gguf\n")
    store = Store(model_dir / "store")
    manifest = create_from_modelfile(store, "spec", model_dir / "Modelfile")
    draft = manifest.layers[1]
    assert (draft.media_type, draft.from_) == ("application/vnd.ollama.image.draft", "small.gguf")
    config = json.loads(store.blob_path(manifest.config.digest).read_bytes())
    assert list(config)[-3:] == ["draft", "architecture", "os"]
    assert config["draft"] == {"model_format": "gguf", "architecture": "qwen3"}
    assert commands(stored_modelfile(store, "spec"))[1] == ("draft", str(store.blob_path(draft.digest)))
    (model_dir / "Same").write_text("FROM ./tiny.gguf\nDRAFT ./tiny.gguf\n")
    with pytest.raises(ModelfileError, match="DRAFT must not reference the same local path as FROM"):
        create_from_modelfile(store, "same", model_dir / "Same")


def test_command_line(model_dir, weightkit_cli):
    env = {"OLLAMA_MODELS": str(model_dir / "store")}
    (model_dir / "Modelfile").write_text("FROM ./tiny.gguf\nSYSTEM hi\n")
    r = weightkit_cli("create", "m", "-f", model_dir / "Modelfile", env=env)
    assert r.returncode == 0 and "created m:latest" in r.stdout, r.stderr
    r = weightkit_cli("show", "m", "--modelfile", env=env)
    assert r.returncode == 0 and r.stdout.endswith("TEMPLATE {{ .Prompt }}\nSYSTEM hi\n"), r.stderr
    (model_dir / "Bad").write_text("FROM ./tiny.gguf\nMESSAGE robot hi\n")
    r = weightkit_cli("create", "bad", "-f", model_dir / "Bad", env=env)
    assert r.returncode != 0 and 'message role must be one of "system", "user", or "assistant"' in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_commands_render_as_ollama():
    """Command.String: quoted when multi-line or space-padded, triple-quoted when it holds a quote."""
    assert str(Command("model", "x y")) == "FROM x y"
    assert str(Command("system", " padded")) == 'SYSTEM " padded"'
    assert str(Command("template", 'a\n"b"')) == 'TEMPLATE """a\n"b""""'
    assert str(Command("message", "user: two\nlines")) == 'MESSAGE user "two\nlines"'
    assert str(Command("stop", "</s>")) == "PARAMETER stop </s>"


def test_safetensors_draft_beside_a_safetensors_model(tmp_path):
    """DRAFT with a safetensors folder beside a safetensors model (x/create's CreateDraftLayers): the draft's
    tensor blobs (names prefixed `draft.`, in the blobs too) and .json files (`draft/`) after the model's,
    then the Modelfile's layers; the config's draft as draftMetadata writes it (recorded from Go). A GGUF
    DRAFT there is refused, as Ollama refuses it, with the store unchanged."""
    from weightkit.ollama.blob_bytes import BlobTensor, go_packed_header

    rng = np.random.default_rng(16)
    base = {"model.layers.0.mlp.up_proj.weight": rng.standard_normal((64, 64)).astype(np.float32)}
    draft = {"model.embed_tokens.weight": rng.standard_normal((32, 64)).astype(np.float32),
             "model.layers.0.mlp.up_proj.weight": rng.standard_normal((64, 64)).astype(np.float32)}  # fmt: skip
    for folder, tensors in (("ckpt", base), ("assistant", draft)):
        write_checkpoint(tmp_path / folder, tensors)
        (tmp_path / folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (tmp_path / "assistant" / "tokenizer_config.json").write_text("{}")
    (tmp_path / "Modelfile").write_text("FROM ./ckpt\nDRAFT ./assistant\nSYSTEM s\n")
    store = Store(tmp_path / "store")
    manifest = create_from_modelfile(store, "spec", tmp_path / "Modelfile")
    assert [(layer.media_type.rsplit(".", 1)[1], layer.name) for layer in manifest.layers] == [
        ("tensor", "model.layers.0.mlp.up_proj.weight"), ("json", "config.json"),
        ("tensor", "draft.model.embed_tokens.weight"), ("tensor", "draft.model.layers.0.mlp.up_proj.weight"),
        ("json", "draft/config.json"), ("json", "draft/tokenizer_config.json"), ("system", ""),
    ]  # fmt: skip
    for layer in manifest.layers[2:4]:
        source = draft[layer.name.removeprefix("draft.")]
        tensor = BlobTensor(layer.name, "F32", source.shape, source.tobytes())
        assert store.blob_path(layer.digest).read_bytes() == go_packed_header([tensor], None) + tensor.data
    config = store.blob_path(manifest.config.digest).read_bytes()
    go_json = json.loads((Path(__file__).parents[1] / "data" / "ollama_go_json.json").read_text())
    assert config == go_json["config_safetensors_draft"].encode()
    write_gguf(tmp_path / "small.gguf", {"general.architecture": "llama"}, {"a": np.ones((2, 32), np.float32)})
    (tmp_path / "Gguf").write_text("FROM ./ckpt\nDRAFT ./small.gguf\n")
    before = _store_files(tmp_path / "store")
    with pytest.raises(UnsupportedError, match="not a supported safetensors model directory"):
        create_from_modelfile(store, "spec2", tmp_path / "Gguf")
    assert _store_files(tmp_path / "store") == before


def test_safetensors_draft_beside_a_stored_safetensors_model(tmp_path):
    """FROM a stored safetensors model with a safetensors DRAFT (createModelFromBaseWithDraft): the base's
    layers as they are (no `from`), the draft's after them; the base's config with the draft (recorded from Go).
    Beside a stored GGUF model the same DRAFT is refused (Ollama's server converts it with its own converter)."""
    import ml_dtypes

    from weightkit.ollama import create_from_checkpoint

    folder = tmp_path / "ckpt"
    write_checkpoint(folder, {"model.layers.0.mlp.up_proj.weight": np.ones((64, 64), ml_dtypes.bfloat16)})
    (folder / "config.json").write_text(json.dumps({"architectures": ["Qwen3_5ForCausalLM"], "vision_config": {}}))
    store = Store(tmp_path / "store")
    base = create_from_checkpoint(store, "qwen", folder, quantize="int8")
    write_checkpoint(tmp_path / "assistant", {"model.norm.weight": np.ones(64, np.float32)})
    (tmp_path / "assistant" / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (tmp_path / "Modelfile").write_text("FROM qwen\nDRAFT ./assistant\n")
    manifest = create_from_modelfile(store, "spec", tmp_path / "Modelfile")
    assert manifest.layers[:2] == base.layers and all(not layer.from_ for layer in manifest.layers)
    assert [layer.name for layer in manifest.layers[2:]] == ["draft.model.norm.weight", "draft/config.json"]
    go_json = json.loads((Path(__file__).parents[1] / "data" / "ollama_go_json.json").read_text())
    assert store.blob_path(manifest.config.digest).read_bytes() == go_json["config_qwen35_int8_with_draft"].encode()
    write_gguf(tmp_path / "tiny.gguf", {"general.architecture": "llama"}, {"a": np.ones((4, 32), np.float32)})
    create_from_gguf(store, "tiny", tmp_path / "tiny.gguf")
    (tmp_path / "Gguf").write_text("FROM tiny\nDRAFT ./assistant\n")
    before = _store_files(tmp_path / "store")
    with pytest.raises(UnsupportedError, match="Ollama's own converter"):
        create_from_modelfile(store, "spec2", tmp_path / "Gguf")
    assert _store_files(tmp_path / "store") == before
