"""The command's error contract, over every subcommand: a bad argument or a bad file gets one line on stderr
and exit status 2 (usage) or 1 (a bad file, a failed job); never a traceback, never a partial output."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np
import pytest

from weightkit.cli import app, main
from weightkit.gguf import GGUFValueType, Value, write_gguf

from .remote.servers import FaultServer, free_port, serve_bytes

USAGE, BAD_FILE = 2, 1


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Iterator[dict[str, str]]:
    """A good tiny model and a corpus of bad inputs, local and served over HTTP (`{url}/<name>.gguf`)."""
    d = tmp_path_factory.mktemp("cli-errors")
    good = d / "good.gguf"
    metadata = {
        "general.architecture": "llama",
        "llama.block_count": Value(1, GGUFValueType.UINT32),
        "llama.embedding_length": Value(256, GGUFValueType.UINT32),
        "llama.attention.head_count": Value(4, GGUFValueType.UINT32),
        "llama.context_length": Value(2048, GGUFValueType.UINT32),
        "tokenizer.ggml.tokens": ["a", "b"],
    }
    write_gguf(good, metadata, {"blk.0.attn_q.weight": np.zeros((256, 256), np.float16)})
    paths = {"good": good, "missing": d / "missing.gguf", "folder": d / "folder"}
    paths["folder"].mkdir()
    contents = {
        "empty": b"",
        "random": bytes(range(256)) * 4,
        "truncated": good.read_bytes()[:200],
        "gguf_v1": b"GGUF\x01\x00\x00\x00" + bytes(16),
        "huge_count": b"GGUF" + struct.pack("<IQQ", 3, 1 << 62, 0),
        "safetensors_bad": struct.pack("<Q", 10) + b'{"a": 1}  ',
        "no_arch": None,
        "unknown_arch": None,
    }
    for name, data in contents.items():
        paths[name] = d / f"{name}.gguf"
        if data is None:
            metadata = {"general.name": "x"} if name == "no_arch" else {"general.architecture": "rwkv9"}
            write_gguf(paths[name], metadata, {"t": np.zeros(4, np.float32)})
        else:
            paths[name].write_bytes(data)
    bad_store = d / "bad_store"
    manifest = bad_store / "manifests" / "registry.ollama.ai" / "library" / "broken" / "latest"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{not json")
    paths["bad_store"] = bad_store
    hf = d / "hf"  # a checkpoint folder whose architecture is not supported
    hf.mkdir()
    (hf / "config.json").write_text('{"architectures": ["RwkvForCausalLM"], "model_type": "rwkv"}')
    paths["hf_unknown"] = hf
    hf_bad = d / "hf_bad"  # a checkpoint folder with a config.json that is not JSON
    hf_bad.mkdir()
    (hf_bad / "config.json").write_text("{")
    paths["hf_bad"] = hf_bad
    imatrix = d / "imatrix.dat"
    imatrix.write_bytes(b"\x01\x00")
    paths["imatrix"] = imatrix
    server = FaultServer()
    for name in ("good", "truncated"):
        server.routes[f"/{name}.gguf"] = serve_bytes(paths[name].read_bytes())
    server.routes["/norange.gguf"] = lambda req: req.reply(200, paths["good"].read_bytes())
    server.routes["/good.safetensors"] = serve_bytes(struct.pack("<Q", 2) + b"{}")
    served = {"url": server.url(""), "refused": f"http://127.0.0.1:{free_port()}"}
    yield {k: str(v) for k, v in paths.items()} | served
    server.stop()


# (arguments, with {name} for a file of the corpus; expected status; a fragment of the one line)
CASES = [
    # usage: unknown options, missing arguments, values that cannot be read
    (["frobnicate"], USAGE, "No such command"),
    (["inspect"], USAGE, "Missing argument"),
    (["inspect", "{good}", "--bogus"], USAGE, "No such option"),
    (["quantize", "{good}", "{out}"], USAGE, "Missing option"),
    (["quantize", "{good}", "{out}", "-t", "Q9_K"], USAGE, "--type 'Q9_K'"),
    (["quantize", "{good}", "-t", "Q4_K_M"], USAGE, "give an output path"),
    (["quantize", "{good}", "{out}", "-t", "Q4_0", "--tensor-type", "attn"], USAGE, "expected PATTERN=TYPE"),
    (["quantize", "{good}", "{out}", "-t", "Q4_0", "--tensor-type", "(=q8_0"], USAGE, "--tensor-type pattern"),
    (["quantize", "{good}", "{out}", "-t", "Q4_0", "--output-tensor-type", "zz"], USAGE, "--output-tensor-type"),
    (["quantize", "{good}", "{out}", "-t", "Q4_0", "--override-kv", "a=int:x"], USAGE, "--override-kv"),
    (["quantize", "{good}", "{out}", "-t", "Q4_0", "--prune-layers", "a,b"], USAGE, "--prune-layers"),
    (["quantize", "{good}", "{out}", "-t", "Q4_0", "--tensor-type-file", "{missing}"], BAD_FILE, "missing.gguf"),
    (["estimate", "{good}", "--ctx", "abc"], USAGE, "--ctx 'abc'"),
    (["estimate", "{good}", "-c", "-5"], USAGE, "--ctx '-5'"),
    # llama-server reads -c with std::stoi (a 32-bit int) and refuses what it cannot hold
    (["estimate", "{good}", "-c", "99999999999"], USAGE, "--ctx-size 99999999999: llama-server reads it as a 32-bit"),
    (["estimate", "{good}", "-c", "4096,2147483648"], USAGE, "--ctx-size 2147483648"),
    (["estimate", "{good}", "-b", "2147483648"], USAGE, "--batch-size 2147483648"),
    (["inspect", "{good}", "--insecure"], USAGE, "--insecure applies to a registry's model name: give --remote"),
    (["estimate", "{good}", "--insecure"], USAGE, "--insecure applies to a registry's model name: give --remote"),
    (["estimate", "{good}", "--engine", "vllm"], USAGE, "--engine 'vllm'"),
    (["estimate", "{good}", "--engine", "ollama", "--kv-cache-type", "zz"], USAGE, "kv_cache_type 'zz'"),
    (["estimate", "{good}", "-ctk", "zz"], USAGE, "--cache-type-k 'zz'"),
    (["estimate", "{good}", "-ctv", "q8_0", "-fa", "off"], USAGE, "quantized V cache requires flash_attn"),
    (["estimate", "{good}", "-fa", "maybe"], USAGE, "--flash-attn 'maybe'"),
    (["estimate", "{good}", "--batch", "-1"], USAGE, "--batch-size must be"),
    (["estimate", "{good}", "--engine", "ollama", "--batch", "-1"], USAGE, "batch must be"),
    (["estimate", "{good}", "--batch", "x"], USAGE, "Invalid value for '--batch"),
    (["estimate", "{good}", "--parallel", "0"], USAGE, "--parallel must be"),
    (["estimate", "{good}", "--gpu", "lots"], USAGE, "--gpu 'lots'"),
    (["estimate", "{good}", "--gpu", "TPU:8GiB"], USAGE, "unknown GPU library"),
    (["estimate", "{good}", "--ram", "much"], USAGE, "--ram 'much'"),
    (["estimate", "{good}", "--engine", "ollama", "--num-gpu", "-7"], USAGE, "num_gpu must be"),
    (["estimate", "{good}", "-ngl", "-7"], USAGE, "--n-gpu-layers must be"),
    (["estimate", "{good}", "-ts", "a,b"], USAGE, "--tensor-split 'a,b'"),
    (["estimate", "{good}", "-sm", "diagonal"], USAGE, "--split-mode 'diagonal'"),
    (["estimate", "{good}", "--engine", "ollama", "--swa-full"], USAGE, "--swa-full applies to --engine llama.cpp"),
    (["show", "../etc/passwd", "--store", "{folder}"], USAGE, "invalid model name"),
    (["create", "bad name!", "--from", "{good}", "--store", "{folder}"], USAGE, "invalid model name"),
    (["create", "ok", "--from", "{good}", "--quantize", "int4", "--store", "{folder}"], USAGE, "--quantize applies"),
    (["create", "ok", "--store", "{folder}"], USAGE, "create takes one of --from SOURCE or -f Modelfile"),
    (["create", "ok", "-f", "{missing}", "--store", "{folder}"], BAD_FILE, "missing.gguf: No such file"),
    (["inspect", "hf://org"], USAGE, "expected hf://org/repo[@revision]/path"),
    (["inspect", "http://u:pw@127.0.0.1:1/m.gguf"], USAGE, "a user name or password in the URL is not supported"),
    (["inspect", "bad name!", "--remote"], USAGE, "invalid model name"),
    (["estimate", "hf://org/repo/m.gguf", "--remote"], USAGE, "--remote takes a registry's model name"),
    # bad files and missing things
    (["inspect", "{missing}"], BAD_FILE, "No such file"),
    (["inspect", "{folder}"], BAD_FILE, "no .safetensors files"),
    (["inspect", "{empty}"], BAD_FILE, "not a recognised model"),
    (["inspect", "{random}"], BAD_FILE, "not a recognised model"),
    (["inspect", "{truncated}"], BAD_FILE, "truncated.gguf"),
    (["inspect", "{gguf_v1}"], BAD_FILE, "version 1"),
    (["inspect", "{huge_count}"], BAD_FILE, "huge_count.gguf"),
    (["inspect", "{safetensors_bad}"], BAD_FILE, "safetensors_bad.gguf"),
    (["quantize", "{truncated}", "{out}", "-t", "Q4_0"], BAD_FILE, "truncated.gguf"),
    (["quantize", "{good}", "{out}", "-t", "Q4_0", "--imatrix", "{imatrix}"], BAD_FILE, "imatrix.dat"),
    (["quantize", "{no_arch}", "{out}", "-t", "Q4_K_M"], BAD_FILE, "block_count"),
    (["estimate", "{no_arch}"], BAD_FILE, "general.architecture"),
    (["estimate", "{no_arch}", "--engine", "ollama"], BAD_FILE, "general.architecture"),
    (["estimate", "{unknown_arch}"], BAD_FILE, "llama.cpp does not know the architecture 'rwkv9'"),
    (["estimate", "{random}"], BAD_FILE, "not a recognised model"),
    (["estimate", "nosuchmodel:latest"], BAD_FILE, "nosuchmodel"),
    # remote models: network and server failures, malformed files named by their URL
    (["inspect", "{url}/missing.gguf"], BAD_FILE, "/missing.gguf: HTTP 404 Not Found"),
    (["inspect", "{url}/norange.gguf"], BAD_FILE, "/norange.gguf: the server ignores range requests"),
    (["inspect", "{url}/truncated.gguf"], BAD_FILE, "/truncated.gguf: at byte"),
    (["inspect", "{refused}/m.gguf"], BAD_FILE, "/m.gguf: connection refused"),
    (["estimate", "{url}/truncated.gguf"], BAD_FILE, "/truncated.gguf: at byte"),
    (["estimate", "{url}/good.safetensors"], BAD_FILE, "llama.cpp loads GGUF models; this is safetensors"),
    (["estimate", "{url}/norange.gguf", "--engine", "ollama"], BAD_FILE, "the server ignores range requests"),
    (["estimate", "{refused}/library/m:latest", "--remote"], BAD_FILE, "/manifests/latest: connection refused"),
    (["show", "nosuchmodel", "--store", "{folder}"], BAD_FILE, "not in the store"),
    (["rm", "nosuchmodel", "--store", "{folder}"], BAD_FILE, "not in the store"),
    (["verify", "nosuchmodel", "--store", "{folder}"], BAD_FILE, "not in the store"),
    (["create", "ok", "--from", "{truncated}", "--store", "{folder}"], BAD_FILE, "truncated.gguf"),
    (["create", "ok", "--from", "{missing}", "--store", "{folder}"], BAD_FILE, "missing.gguf"),
    (["convert", "{folder}"], USAGE, "Missing argument"),
    (["convert", "{folder}", "{out}", "--outtype", "q4_k"], USAGE, "--outtype 'q4_k'"),
    (["convert", "{missing}", "{out}"], USAGE, "not a folder"),
    (["convert", "{folder}", "{out}"], BAD_FILE, "no config.json"),
    (["convert", "{hf_bad}", "{out}"], BAD_FILE, "not valid JSON"),
    (["convert", "{hf_unknown}", "{out}"], BAD_FILE, "'RwkvForCausalLM' is not supported"),
    (["convert", "{folder}", "{out}", "--pure"], USAGE, "--pure is an option of the quantization"),
    (["convert", "{folder}", "{out}", "--base", "{folder}"], USAGE, "--base names a LoRA adapter's base model"),
    (["convert", "{folder}", "{out}", "--lora", "--type", "Q4_K_M"], USAGE, "the --type options do not apply"),
    (["convert", "{folder}", "{out}", "--lora", "--outtype", "auto"], USAGE, "auto fails on an adapter's tensors"),
    (["convert", "{missing}", "{out}", "--lora"], USAGE, "not a folder (give a PEFT adapter's folder)"),
    (["convert", "{folder}", "{out}", "--lora"], BAD_FILE, "no adapter_config.json"),
    (["estimate", "{good}", "--lora", "{good}"], BAD_FILE, "general.type is None, not 'adapter'"),
    (["estimate", "{good}", "--lora", "{good}", "--engine", "ollama"], USAGE, "Ollama no longer loads LoRA"),
    (["convert", "{folder}", "{out}", "--type", "Q9"], USAGE, "--type 'Q9'"),
    (["convert", "{folder}", "{out}", "-t", "Q4_K_M", "--outtype", "q8_0"], USAGE, "--outtype 'q8_0' with --type"),
    (["convert", "{folder}", "{out}", "-t", "Q4_K_M", "--tensor-type", "x"], USAGE, "--tensor-type 'x'"),
    (["convert", "{hf_unknown}", "{out}", "-t", "Q4_K_M"], BAD_FILE, "'RwkvForCausalLM' is not supported"),
    (["convert", "{folder}", "{out}", "--mmproj", "-t", "Q4_K_M"], USAGE, "--type does not apply to it"),
    (["convert", "{good}", "{out}", "--mmproj", "--to", "hf"], USAGE, "--to hf does not apply to it"),
    (["convert", "{hf_unknown}", "{out}", "--mmproj"], BAD_FILE, "a projector (--mmproj) for 'RwkvForCausalLM'"),
    (["convert", "{folder}", "{out}", "--mistral-format", "--to", "hf"], USAGE, "not with --lora or --to hf"),
    (["convert", "{folder}", "{out}", "--mistral-format", "--mmproj"], USAGE, "a Mistral-format projector is not"),
    (["convert", "{folder}", "{out}", "--mistral-format"], BAD_FILE, "no params.json (--mistral-format"),
    (["create", "ok", "--from", "{folder}", "--quantize", "Q9_X", "--store", "{folder}"], USAGE, "--quantize 'Q9_X'"),
    (
        ["create", "ok", "--from", "{hf_unknown}", "--quantize", "Q4_K_M", "--store", "{folder}"],
        BAD_FILE,
        "'RwkvForCausalLM' is not supported",
    ),
    (["create", "ok", "--from", "{hf_bad}", "--quantize", "int4", "--store", "{folder}"], BAD_FILE, "config.json"),
    (["pull", "bad name!", "--store", "{folder}"], USAGE, "invalid model name"),
    (["pull", "127.0.0.1:9/Upper/Case", "--insecure", "--store", "{folder}"], USAGE, "OCI repository names"),
    (["pull", "ftp://127.0.0.1:9/ns/m", "--store", "{folder}"], USAGE, "not 'ftp'"),
    (["pull", "http://127.0.0.1:9/ns/m", "--store", "{folder}"], USAGE, "allow it with --insecure"),
    (["pull", "127.0.0.1:9/ns/m", "--insecure", "--store", "{folder}"], BAD_FILE, "http://127.0.0.1:9/v2/ns/m/"),
    (["pull", "127.0.0.1:9/ns/m", "--store", "{folder}"], BAD_FILE, "https://127.0.0.1:9/v2/ns/m/manifests/"),
    (["push", "nosuchmodel", "--store", "{folder}"], BAD_FILE, "not in the store"),
    (["push", "http://127.0.0.1:9/ns/m", "--store", "{folder}"], USAGE, "allow it with --insecure"),
    (["push", "broken", "--store", "{bad_store}"], BAD_FILE, "broken/latest"),
    (["cp", "nosuchmodel", "other", "--store", "{folder}"], BAD_FILE, "not in the store"),
    (["cp", "broken", "bad name!", "--store", "{bad_store}"], USAGE, "invalid model name"),
    (["cp", "broken", "other", "--store", "{bad_store}"], BAD_FILE, "broken/latest"),
    (["prune", "--store", "{folder}", "--bogus"], USAGE, "No such option"),
    (["prune", "--store", "{bad_store}"], BAD_FILE, "latest"),
    (["show", "broken", "--store", "{bad_store}"], BAD_FILE, "latest"),
]


@pytest.mark.parametrize(("args", "status", "fragment"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_one_line_and_the_right_status(files, tmp_path, capsys, args, status, fragment):
    argv = [a.format(out=tmp_path / "out.gguf", **files) for a in args]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    out, err = capsys.readouterr()
    assert exit_.value.code == status, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in out + err
    assert not (tmp_path / "out.gguf").exists()  # nothing left at the destination
    assert not list(tmp_path.glob(".out.gguf.*"))  # nor a temporary file


def test_every_subcommand_is_in_the_matrix():
    """A new subcommand must bring its bad-input cases here."""
    covered = {args[0] for args, _, _ in CASES}
    commands = {c.name or c.callback.__name__ for c in app.registered_commands} - {"demo", "ls"}
    assert commands <= covered, commands - covered
