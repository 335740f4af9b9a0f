"""`convert_hf(..., quantize=...)`: a checkpoint to a quantized GGUF in one pass, byte for byte the file of
llama.cpp's converter followed by llama-quantize; and the converter's own ternary outtypes (hashes recorded
from the real tools by tests/data/make_convert_quant_golden.py)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import weightkit
from weightkit.convert.hf import convert_hf
from weightkit.errors import ArgumentError, WeightkitError
from weightkit.gguf import writer as gguf_writer
from weightkit.llama_quantize import QuantizeOptions, quantize_gguf

from ..llama_quantize.test_imatrix import _legacy
from ..llama_quantize.test_mixes import GENERATOR, _options
from ..processes import children
from ..scripts import load_script
from .conftest import checkpoint_group, output_sha256

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDER = load_script(DATA / "make_convert_quant_golden.py")
GOLDEN = json.loads((DATA / "convert_quant_golden.json").read_text())
CASES = [(name, key) for name, record in GOLDEN["checkpoints"].items() for key in record["runs"]]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("name", "key"),
    [pytest.param(n, k, id=f"{n}-{k}", marks=checkpoint_group(n)) for n, k in CASES],
)
def test_same_bytes_as_converter_then_llama_quantize(hf_checkpoints, tmp_path, vocabulary_once, name, key):
    expected = GOLDEN["checkpoints"][name]["runs"][key]
    out = tmp_path / "out.gguf"
    report = _convert_run(hf_checkpoints[name], out, name, key)
    assert out.stat().st_size == expected["bytes"] == report.bytes_written
    with weightkit.open(out) as m:
        assert report.tensors == {n: (i.dtype.name, i.shape) for n, i in m.tensors.items()}
    assert output_sha256(out) == expected["sha256"]


def _convert_run(folder: Path, out: Path, name: str, key: str):
    """The golden's run `key` of checkpoint `name`: converted (and quantized in the same pass) to `out`."""
    record = GOLDEN["checkpoints"][name]
    expected = record["runs"][key]
    outtype, quantize = RECORDER.split_run(key)
    mistral_format = name in RECORDER.make_hf_checkpoints.MISTRAL_FORMAT
    if not quantize:
        return convert_hf(folder, out, outtype, mistral_format=mistral_format)
    weighted = GENERATOR.parse_key(quantize)[1]["imatrix"]
    shapes = {n: tuple(s) for n, s in record.get("imatrix_tensors", [])}
    options = _options(quantize, GENERATOR.imatrix_values(shapes) if weighted else None)
    report = convert_hf(folder, out, outtype or "auto", quantize=options, mistral_format=mistral_format)
    assert report.outtype == expected["outtype"] and report.quantized == options.target.name
    assert report.file_type == options.target.file_type_id
    return report


#: checkpoint, run, values a piece: Gemma 3n's padded per-layer embeddings, Llama 4's transposed stacked experts,
#: an importance-weighted run, and f16 to Q8_0, each tensor quantized and written a few thousand values' rows at a
#: time (tiny-llama-256's smallest matrix still in three pieces of 12,000, its 12.9M-value embedding in 1,093 not 4,569)
PIECES = [("tiny-gemma-3n", "Q4_K_M", 3000), ("tiny-llama4", "Q4_K_M", 3000),
          ("tiny-llama-256", "Q4_K_M imatrix", 12000), ("tiny-llama-256", "Q8_0 --outtype f16", 3000)]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "key", "piece"),
    [pytest.param(n, k, v, id=f"{n}-{k}", marks=checkpoint_group(n)) for n, k, v in PIECES],
)
def test_quantized_a_group_of_rows_at_a_time(hf_checkpoints, tmp_path, monkeypatch, vocabulary_once, name, key,
                                             piece):  # fmt: skip
    """With `--type`, every tensor is quantized and written a group of rows at a time, never held whole in its new
    type (ggml quantizes each row by itself): the same bytes."""
    monkeypatch.setattr(gguf_writer, "PIECE_VALUES", piece)
    out = tmp_path / "out.gguf"
    _convert_run(hf_checkpoints[name], out, name, key)
    assert _sha256(out) == GOLDEN["checkpoints"][name]["runs"][key]["sha256"]


@pytest.mark.slow
def test_command_line_imatrix_file_as_weightkit_quantize(hf_checkpoints, tmp_path, weightkit_cli):
    """`convert --type --imatrix FILE` (and the other llama-quantize options) gives what `quantize` gives with
    them from the converter's output, the imatrix's provenance included."""
    folder = hf_checkpoints["tiny-llama-256"]
    rng = np.random.default_rng(5)
    entries = [(f"blk.{i}.{t}.weight", 2, rng.random(n, dtype=np.float32) + 0.5)
               for i in range(2) for t, n in (("attn_q", 256), ("ffn_down", 512))]  # fmt: skip
    (tmp_path / "imatrix.dat").write_bytes(_legacy(entries))
    options = ["-t", "IQ3_S", "--imatrix", str(tmp_path / "imatrix.dat"), "--exclude-weights", "ffn_down",
               "--override-kv", "general.name=str:renamed", "--token-embedding-type", "q4_0",
               "--tensor-type", "ffn_down=q5_k", "--prune-layers", "0"]  # fmt: skip
    one = tmp_path / "one.gguf"
    r = weightkit_cli("convert", folder, one, *options, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["type"] == "IQ3_S" and doc["outtype"] == "bf16" and doc["file_type"] == 26
    convert_hf(folder, tmp_path / "mid.gguf", "bf16")
    r = weightkit_cli("quantize", tmp_path / "mid.gguf", tmp_path / "two.gguf", *options)
    assert r.returncode == 0, r.stderr
    assert _sha256(one) == _sha256(tmp_path / "two.gguf")
    with weightkit.open(one) as m:
        assert m.metadata["general.name"] == "renamed" and m.metadata["quantize.imatrix.entries_count"] == 2
        assert m.tensors["blk.0.attn_q.weight"].dtype.name == "IQ3_S" and "blk.1.attn_q.weight" not in m.tensors
        assert m.tensors["token_embd.weight"].dtype.name == "Q4_0"  # not q4_k: 12.9M values twice in it cost 4 s


def test_explicit_outtype_before_quantizing(hf_checkpoints, tmp_path):
    """--outtype f32 before Q4_0: what quantize makes of the converter's f32 file."""
    folder = hf_checkpoints["tiny-mistral-v0.1"]
    report = convert_hf(folder, tmp_path / "one.gguf", "f32", quantize="Q4_0")
    convert_hf(folder, tmp_path / "mid.gguf", "f32")
    quantize_gguf(tmp_path / "mid.gguf", tmp_path / "two.gguf", "Q4_0")
    assert report.outtype == "f32" and _sha256(tmp_path / "one.gguf") == _sha256(tmp_path / "two.gguf")


@pytest.mark.parametrize(
    ("outtype", "options", "message"),
    [
        ("q8_0", "Q4_K_M", "--outtype 'q8_0' with --type"),
        ("tq1_0", "Q4_K_M", "--outtype 'tq1_0' with --type"),
        ("auto", "Q9_X", "--type 'Q9_X'"),
    ],
)
def test_bad_quantize_arguments(hf_checkpoints, tmp_path, outtype, options, message):
    with pytest.raises(ArgumentError, match=message):
        convert_hf(hf_checkpoints["tiny-bert"], tmp_path / "out.gguf", outtype, quantize=options)
    assert not list(tmp_path.iterdir())


def test_keep_split_and_missing_imatrix_refused(hf_checkpoints, tmp_path):
    with pytest.raises(ArgumentError, match="--keep-split"):
        convert_hf(
            hf_checkpoints["tiny-bert"], tmp_path / "out.gguf", quantize=QuantizeOptions("Q4_0", keep_split=True)
        )
    with pytest.raises(WeightkitError, match="needs an importance matrix"):
        convert_hf(hf_checkpoints["tiny-llama-256"], tmp_path / "out.gguf", quantize="IQ2_XS")
    assert not list(tmp_path.iterdir())


def test_command_line_quantize_options_need_type(hf_checkpoints, tmp_path, weightkit_cli):
    r = weightkit_cli("convert", hf_checkpoints["tiny-bert"], tmp_path / "out.gguf", "--imatrix", "x.dat")
    assert r.returncode == 2 and "--imatrix" in r.stderr and "--type" in r.stderr and "Traceback" not in r.stderr
    assert not list(tmp_path.iterdir())


def test_create_stores_the_quantized_gguf_as_a_model_layer(hf_checkpoints, tmp_path):
    """`create --from HF_DIR --quantize Q4_K_M`: the one-pass GGUF (the golden's bytes) as the model layer, with
    the config Ollama writes for a GGUF model; nothing but the model's blobs stays in the store."""
    from weightkit.ollama import Store, create_from_hf_gguf, open_store_model

    store = Store(tmp_path / "models")
    folder = hf_checkpoints["tiny-llama-256"]
    seen = []
    manifest = create_from_hf_gguf(store, "tiny:q4", folder, "q4_k_m", progress=lambda done, total: seen.append(done))
    expected = GOLDEN["checkpoints"]["tiny-llama-256"]["runs"]["Q4_K_M"]
    [layer] = manifest.layers
    assert layer.media_type == "application/vnd.ollama.image.model" and layer.digest == "sha256:" + expected["sha256"]
    config = json.loads(store.blob_path(manifest.config.digest).read_bytes())
    assert config == {
        "model_format": "gguf", "model_family": "llama", "model_families": ["llama"], "model_type": "14.05M",
        "file_type": "Q4_K_M", "architecture": "amd64", "os": "linux",
    }  # fmt: skip
    assert seen and seen == sorted(seen)
    with open_store_model("tiny:q4", store=store) as m:
        assert m.tensors["blk.0.attn_q.weight"].dtype.name == "Q4_K"
    assert sorted(p.name for p in store.blobs.iterdir()) == sorted(
        d.replace(":", "-") for d in (layer.digest, manifest.config.digest)
    )


def test_create_from_a_modelfile_with_a_llama_type(hf_checkpoints, tmp_path):
    """`create -f Modelfile --quantize Q4_K_M` FROM a checkpoint: the same model layer as `create --from`, then
    the Modelfile's layers."""
    from weightkit.ollama import Store
    from weightkit.ollama.create import create_from_request, read_modelfile

    (tmp_path / "Modelfile").write_text(f"FROM {hf_checkpoints['tiny-llama-256']}\nSYSTEM terse\n")
    manifest = create_from_request(Store(tmp_path), "m", read_modelfile(tmp_path / "Modelfile"), quantize="Q4_K_M")
    expected = GOLDEN["checkpoints"]["tiny-llama-256"]["runs"]["Q4_K_M"]["sha256"]
    assert [(layer.media_type.rsplit(".", 1)[1], layer.digest) for layer in manifest.layers] == [
        ("model", "sha256:" + expected), ("system", "sha256:" + hashlib.sha256(b"terse").hexdigest())
    ]  # fmt: skip


@pytest.mark.slow
def test_create_command_line(hf_checkpoints, tmp_path, weightkit_cli):
    """The CLI: a llama.cpp type converts to a GGUF layer; an unknown one is an argument error, leaving nothing."""
    store = ["--store", str(tmp_path / "models")]
    folder = str(hf_checkpoints["tiny-mistral-v0.1"])
    r = weightkit_cli("create", "m:q8", "--from", folder, "--quantize", "Q8_0", *store, "--json")
    assert r.returncode == 0, r.stderr
    [layer] = json.loads(r.stdout)["layers"]
    assert layer["digest"] == "sha256:" + GOLDEN["checkpoints"]["tiny-mistral-v0.1"]["runs"]["Q8_0"]["sha256"]
    bad = weightkit_cli("create", "m:bad", "--from", folder, "--quantize", "Q9_X", *store)
    assert bad.returncode == 2 and "--quantize 'Q9_X'" in bad.stderr and "Traceback" not in bad.stderr
    assert len(list((tmp_path / "models" / "blobs").iterdir())) == 2


def test_failed_create_leaves_nothing(hf_checkpoints, tmp_path, monkeypatch):
    """A conversion that fails midway (here: a tensor that cannot be read) leaves no blob and no manifest."""
    from weightkit.convert.hf import convert as module
    from weightkit.ollama import Store, create_from_hf_gguf

    def broken(*args):
        def make():
            raise OSError("disk gone")

        return make

    monkeypatch.setattr(module, "_maker", broken)
    store = Store(tmp_path / "models")
    with pytest.raises(OSError, match="disk gone"):
        create_from_hf_gguf(store, "tiny", hf_checkpoints["tiny-bert"], "Q8_0")
    assert list(store.blobs.iterdir()) == [] and list(store.models()) == []


@pytest.mark.slow
@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
def test_small_tasks_give_the_same_file(hf_checkpoints, tmp_path, monkeypatch, processes):
    """Quantizing makes each tensor's rows task by task (from the mapped file, or, transformed, from the
    tensor made whole once), on threads or in forked processes: tasks of a few dozen rows, with a short last
    task in every tensor, give the golden file either way."""
    import weightkit.quant as module

    monkeypatch.setattr(module, "_quantize_chunk", lambda qtype, weighted: 37 * 256)
    monkeypatch.setattr(module, "MIN_TASK_ELEMENTS", 0)
    monkeypatch.setattr(module, "workers", lambda: 2)
    monkeypatch.setattr(module, "MIN_FORKED_ELEMENTS", 0)
    monkeypatch.setenv("WEIGHTKIT_PROCESSES", "1" if processes else "0")
    forks = []
    real_fork_map = module.fork_map
    monkeypatch.setattr(module, "fork_map", lambda *a: forks.append(a[0]) or real_fork_map(*a))
    convert_hf(hf_checkpoints["tiny-llama-256"], tmp_path / "out.gguf", quantize="Q4_K_M")
    assert _sha256(tmp_path / "out.gguf") == GOLDEN["checkpoints"]["tiny-llama-256"]["runs"]["Q4_K_M"]["sha256"]
    assert bool(forks) == processes


@pytest.mark.skipif(sys.platform != "linux", reason="weightkit forks workers on Linux only")
def test_a_killed_worker_ends_the_conversion_with_nothing_written(hf_checkpoints, tmp_path, monkeypatch, capsys):
    """A quantizing worker process killed mid-way (here by the kernel itself, as the OOM killer would): one
    error line from the command, no output file, no temporary file left in the folder."""
    import weightkit.quant as module
    from weightkit.cli import main

    parent = os.getpid()
    q4_k = module.QUANTIZERS[module.GGMLType.Q4_K]

    def dies_in_a_child(x, imatrix):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return q4_k(x, imatrix)

    monkeypatch.setitem(module.QUANTIZERS, module.GGMLType.Q4_K, dies_in_a_child)
    monkeypatch.setattr(module, "workers", lambda: 2)
    monkeypatch.setattr(module, "MIN_FORKED_ELEMENTS", 0)
    monkeypatch.setattr(module, "_quantize_chunk", lambda qtype, weighted: 16 * 256)
    monkeypatch.setenv("WEIGHTKIT_PROCESSES", "1")
    out = tmp_path / "out" / "model.gguf"
    out.parent.mkdir()
    with pytest.raises(SystemExit) as exit_:
        main(["convert", str(hf_checkpoints["tiny-llama-256"]), str(out), "--type", "Q4_K_M"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 1
    assert len(err) == 1 and "a worker process was killed (SIGKILL) while quantizing" in err[0]
    assert list(out.parent.iterdir()) == []


@pytest.mark.skipif(sys.platform != "linux", reason="weightkit forks workers on Linux only")
def test_ctrl_c_during_a_forked_conversion(hf_checkpoints, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while workers quantize: the command
    exits with 130, its workers are gone, and nothing is left in the output folder."""
    out = tmp_path / "out" / "model.gguf"
    out.parent.mkdir()
    started = tmp_path / "a worker quantizes"  # made by the first worker task, which then waits to be killed
    driver = (
        "import os, sys, time\n"
        "import weightkit.quant as q\n"
        "parent, q4_k = os.getpid(), q.QUANTIZERS[q.GGMLType.Q4_K]\n"
        "def slowed(x, w):\n"
        f"    if os.getpid() != parent and not os.path.exists({str(started)!r}):\n"
        f"        open({str(started)!r}, 'a').close()\n"
        "        time.sleep(120)\n"
        "    time.sleep(0.2)\n"
        "    return q4_k(x, w)\n"
        "q.QUANTIZERS[q.GGMLType.Q4_K] = slowed\n"
        "q.workers = lambda: 2\n"
        "q.MIN_FORKED_ELEMENTS = 0\n"
        "q._quantize_chunk = lambda qtype, weighted: 16 * 256\n"
        "from weightkit.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    args = ["convert", str(hf_checkpoints["tiny-llama-256"]), str(out), "--type", "Q4_K_M"]
    env = {**os.environ, "WEIGHTKIT_PROCESSES": "1"}
    proc = subprocess.Popen([sys.executable, "-c", driver, *args], env=env, start_new_session=True,
                            stderr=subprocess.PIPE)  # fmt: skip
    # Ctrl-C only once a worker is inside a task: under load, children seen as they are forked may belong to a
    # call that is already ending. That task lasts until the worker is killed, so the conversion cannot end before
    # the Ctrl-C, however late it comes
    deadline = time.monotonic() + 120
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    workers = children(proc.pid)
    assert started.exists() and workers, "no worker process started"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()[-2000:]
    assert b"Traceback" not in err
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
    assert list(out.parent.iterdir()) == []
