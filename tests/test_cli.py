"""The `weightkit` command as a user runs it: tables, --json, and bad input without tracebacks."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.main import get_command

import weightkit.cli
from weightkit.cli import COMMANDS, app, main
from weightkit.gguf import GGUFValueType, GGUFWriter, Value

from .ollama._cli import cli_env
from .remote.servers import free_port


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "tiny.gguf"
    md = {
        "general.architecture": "llama",
        "general.name": "Tiny [bold]Model[/bold]",
        "general.file_type": Value(15, GGUFValueType.UINT32),
        "llama.context_length": Value(4096, GGUFValueType.UINT32),
        "llama.block_count": Value(2, GGUFValueType.UINT32),
        "llama.attention.head_count": Value(8, GGUFValueType.UINT32),
        "llama.attention.head_count_kv": np.array([2, 2], np.int32),
        "tokenizer.ggml.tokens": [f"tok{i}" for i in range(1000)] + ["\udcff\x07"],
        "tokenizer.ggml.scores": np.full(1001, np.nan, np.float32),
    }
    rng = np.random.default_rng(0)
    with GGUFWriter(path, md) as w:
        w.add_tensor("token_embd.weight", rng.integers(0, 256, 4 * 34, dtype=np.uint8), dtype="Q8_0", shape=(4, 32))
        w.add_tensor("blk.0.attn_norm.weight", np.ones(32, np.float32))
    return path


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "weightkit", *args], capture_output=True, text=True, env=cli_env(COLUMNS="160")
    )


def test_inspect_tables(model):
    r = run("inspect", str(model), "--tensors")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for expected in ("llama", "Tiny [bold]Model[/bold]", "Q4_K_M", "4096", "8 (KV heads 2)", "1001", "Q8_0", "F32"):
        assert expected in out, expected
    assert "string[1001]" in out and "… (995 more)" in out
    assert "blk.0.attn_norm.weight" in out and "4×32" in out
    assert "8.50" in out  # Q8_0 bits per weight


def test_inspect_json(model):
    r = run("inspect", str(model), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["format"] == "gguf"
    assert doc["summary"]["parameters"] == 4 * 32 + 32
    assert doc["summary"]["head_count_kv"] == 2
    assert doc["metadata"]["llama.context_length"] == {"type": "UINT32", "value": 4096}
    tokens = doc["metadata"]["tokenizer.ggml.tokens"]
    assert tokens["element_type"] == "STRING" and len(tokens["value"]) == 1001
    assert doc["metadata"]["tokenizer.ggml.scores"]["value"][0] == "NaN"
    t = doc["tensors"][0]
    assert t == {"name": "token_embd.weight", "type": "Q8_0", "shape": [4, 32], "offset": t["offset"], "nbytes": 136}


def test_json_answers_are_json_dumps_text(capsys):
    """`--json` writes what `json.dump(doc, indent=1)` writes, byte for byte, at every depth and kind of value."""
    from weightkit.cli.render import print_json

    plain = [None, True, 0, -(10**20), 1.5, float("nan"), float("-inf"), "", "é\u2028\udcff\x07", []]
    doc = {
        "a": plain, "b": {}, "c": [plain, {"d": tuple(plain)}, [[]], ({},)], 1: {2.5: [[1, 2], 3]},
        False: None, None: "x", "e": {"f": {"g": list(range(50))}}, "nested": [[["deep", 1.0]]],
    }  # fmt: skip
    capsys.readouterr()
    print_json(doc)
    assert capsys.readouterr().out == json.dumps(doc, indent=1) + "\n"


@pytest.mark.parametrize(
    "content, message",
    [(b"GGUF\x01\x00\x00\x00" + bytes(16), "version 1 is no longer supported"), (b"hello", "not a recognised model")],
)
def test_bad_input_is_one_line_not_a_traceback(tmp_path, content, message):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    r = run("inspect", str(bad))
    assert r.returncode == 1
    assert message in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_missing_file(tmp_path):
    r = run("inspect", str(tmp_path / "nope.gguf"))
    assert r.returncode == 1 and "No such file" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_demo_inspects_the_real_gemma_file(tmp_path, gemma_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / gemma_path.name).symlink_to(gemma_path)  # what `demo` would assemble on first run
    r = subprocess.run(
        [sys.executable, "-m", "weightkit", "demo"],
        capture_output=True,
        text=True,
        env=cli_env(COLUMNS="160", WEIGHTKIT_CACHE=str(cache)),
    )
    assert r.returncode == 0, r.stderr
    for expected in ("gemma3", "Gemma 3 270m", "262144", "Q4_K_M", "268,098,176", "32768"):  # inspect
        assert expected in r.stdout, expected
    assert "weightkit estimate" in r.stdout and "ctx 8192" in r.stdout and "KV cache" in r.stdout
    assert "CUDA0" in r.stdout and "llama.cpp" in r.stdout
    assert "--dry-run" in r.stdout and "Q8_0: tensor data" in r.stdout and "nothing written" in r.stdout


@pytest.mark.parametrize(
    "command", [["inspect"], ["estimate"], ["estimate", "--engine", "ollama"]], ids=lambda c: " ".join(c)
)
def test_insecure_reads_a_registry_name_over_plain_http(capsys, command):
    """--insecure wherever --remote reads a registry's model name, as `pull --insecure`: plain HTTP, not HTTPS
    (here to a port nothing listens on, so the one line names the URL tried)."""
    name = f"127.0.0.1:{free_port()}/team/tiny:v1"
    for flags, scheme in ((["--insecure"], "http"), ([], "https")):
        with pytest.raises(SystemExit) as exit_:
            main([*command[:1], name, *command[1:], "--remote", *flags])
        err = capsys.readouterr().err
        assert exit_.value.code == 1 and f"{scheme}://{name.split('/')[0]}/v2/team/tiny/manifests/v1" in err, err


def test_no_function_in_the_command_is_long():
    """A thin CLI: the commands' options and checks are declared beside them, each function short."""
    long = []
    for path in Path(weightkit.cli.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno >= 50:
                long.append(f"{path.name}:{node.name}")
    assert not long


def test_every_command_is_listed_and_loads():

    group = get_command(app)
    with group.make_context("weightkit", ["--help"], resilient_parsing=True) as ctx:
        assert group.list_commands(ctx) == list(COMMANDS)
        for name in COMMANDS:
            assert group.get_command(ctx, name).name == name
