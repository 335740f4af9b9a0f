"""`weightkit estimate` with the llama.cpp engine (the default): llama-server's flags become the context llama.cpp
allocates, checked against what libllama allocated for those very settings (tests/data/llama_memory.json), and
the table and JSON say the same numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import weightkit
from weightkit.cli import main
from weightkit.cli.estimate import parse_gpu
from weightkit.cli.render import human_bytes
from weightkit.errors import ArgumentError, FormatError
from weightkit.memory import LlamaCppSettings, estimate
from weightkit.memory.llamacpp.architectures import read_hparams
from weightkit.memory.llamacpp.context import ContextParams

from ..scripts import load_script

DATA = Path(__file__).parents[1] / "data"
RECORD = json.loads((DATA / "llama_memory.json").read_text())
MODELS = load_script(DATA / "memory_models.py")


def _recorded(model: str, **params) -> dict:
    """The oracle's case recorded with exactly these `llama_context_params`."""
    (case,) = [c for c in RECORD[model] if c["params"] == params]
    return case


def _estimate(*args: str) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["estimate", *args])
    assert exit.value.code == 0


def _run_json(capsys, *args: str):
    _estimate(*args, "--json")
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("flags", "params"),
    [
        # llama-server -c 16384: --parallel auto is 4 slots in one unified cache, SWA layers windowed
        (["-c", "16384"], {"kv_unified": True, "n_ctx": 16384, "n_outputs_max": 4, "n_seq_max": 4, "swa_full": False}),
        # --swa-full: every layer's cache full size
        (["-c", "32768", "--swa-full"], {"kv_unified": True, "n_ctx": 32768, "n_outputs_max": 4, "n_seq_max": 4}),
    ],
)
def test_server_flags_allocate_what_llama_cpp_allocated(capsys, gemma_path, flags, params):
    case = _recorded("gemma-3-270m", **params)
    doc = _run_json(capsys, str(gemma_path), *flags)
    (cpu,) = doc["devices"]
    assert (cpu["name"], cpu["kv"], cpu["compute"]) == ("CPU", case["kv"], case["compute"])
    assert round(cpu["output"] / (1 << 20), 2) == case["output_mib"]
    assert cpu["total"] == cpu["weights"] + cpu["kv"] + cpu["compute"] + cpu["output"]
    assert doc["settings"]["parallel"] == 4 and doc["settings"]["kv_unified"] and doc["engine"] == "llama.cpp"
    assert doc["fits"] is None and cpu["compute_exact"]


def test_settings_defaults_are_llama_servers():
    s = LlamaCppSettings()
    assert (s.ctx_size, s.batch_size, s.ubatch_size, s.flash_attn, s.cache_type_k, s.n_gpu_layers) == (
        0, 2048, 512, "auto", "f16", -1)  # fmt: skip
    assert s.context_params() == ContextParams(
        n_ctx=0, n_batch=2048, n_ubatch=512, n_seq_max=4, kv_unified=True, swa_full=False, n_outputs_max=4
    )
    explicit = LlamaCppSettings(parallel=2, embeddings=True, batch_size=4096).context_params()
    assert (explicit.n_seq_max, explicit.kv_unified, explicit.n_batch, explicit.n_outputs_max) == (2, False, 512, 512)


def test_table_and_json_say_the_same(capsys, gemma_path):
    doc = _run_json(capsys, str(gemma_path), "-c", "8192,32768", "--gpu", "CUDA:1GiB", "--ram", "8GiB")
    assert [d["settings"]["ctx_size"] for d in doc] == [8192, 32768]
    _estimate(str(gemma_path), "-c", "8192,32768", "--gpu", "CUDA:1GiB", "--ram", "8GiB")
    table = capsys.readouterr().out
    for est in doc:
        cuda, cpu = est["devices"]
        assert cuda["name"] == "CUDA0" and cuda["free"] == 1 << 30 and cpu["free"] == 8 << 30
        assert not cuda["compute_exact"] and cpu["weights"] > 0  # the token embeddings stay on the CPU
        assert f"ctx {est['settings']['ctx_size']} " in table
        for d in est["devices"]:
            assert human_bytes(d["kv"]) in table and human_bytes(d["total"]) in table
    assert "19/19 layers on GPUs" in table and "derived: llama.cpp's scheduler and allocator" in table


def test_the_library_front_door_matches_the_command(capsys, gemma_path):
    doc = _run_json(capsys, str(gemma_path), "-c", "4096", "-ngl", "10", "--gpu", "2GiB")
    with weightkit.open(gemma_path) as m:
        est = estimate(m, LlamaCppSettings(ctx_size=4096, n_gpu_layers=10), [parse_gpu(0, "2GiB")])
    assert [d.total for d in est.devices] == [d["total"] for d in doc["devices"]]
    assert doc["settings"]["n_gpu_layers"] == est.placement.offloaded == 10


@pytest.mark.parametrize(
    ("name", "key", "value", "message"),
    [
        ("llama-3.1-8b", "llama.block_count", None, r"llama\.block_count is missing"),
        ("llama-3.1-8b", "llama.embedding_length", None, r"llama\.embedding_length is missing"),
        (
            "llama-3.1-8b",
            "llama.attention.head_count",
            None,
            r"'blk\.0\.attn_q\.weight' has shape \[4096, 4096\]; llama\.attention",
        ),
        (
            "llama-3.1-8b",
            "llama.attention.head_count_kv",
            4,
            r"'blk\.0\.attn_k\.weight' has shape \[1024, 4096\].* make it \[512, 4096\]",
        ),
        ("llama-3.1-8b", "llama.attention.key_length", "x", r"llama\.attention\.key_length is 'x', not a count"),
        ("mamba-2.8b", "mamba.ssm.time_step_rank", None, r"mamba\.ssm\.time_step_rank is missing"),
        ("rwkv6-finch-1.6b", "rwkv6.wkv.head_size", None, r"rwkv6\.wkv\.head_size is missing"),
        ("rwkv6-finch-1.6b", "rwkv6.time_decay_extra_dim", None, r"rwkv6\.time_decay_extra_dim is missing"),
        ("rwkv7-goose-1.5b", "rwkv7.attention.iclr_lora_rank", None, r"rwkv7\.attention\.iclr_lora_rank is missing"),
        ("rwkv7-goose-1.5b", "rwkv7.token_shift_count", 1, r"rwkv7\.token_shift_count is 1; llama\.cpp's rwkv7 graph"),
    ],
)
def test_metadata_that_does_not_match_the_tensors_is_named(tmp_path, name, key, value, message):
    metadata, tensors = MODELS.MODELS[name]()
    if value is None:
        del metadata[key]
    else:
        metadata[key] = value
    MODELS.write_skeleton(tmp_path / "m.gguf", metadata, tensors)
    with weightkit.open(tmp_path / "m.gguf") as m, pytest.raises(FormatError, match=message):
        read_hparams(m)


def test_settings_refuse_what_llama_server_refuses():
    bad_settings = [({"ubatch_size": 0}, "--ubatch-size"), ({"parallel": 0}, "--parallel"),
                    ({"flash_attn": "yes"}, "--flash-attn"), ({"tensor_split": (1, -1)}, "--tensor-split"),
                    ({"cache_type_v": "q2_k"}, "--cache-type-v"), ({"split_mode": "rows"}, "--split-mode")]  # fmt: skip
    for bad, message in bad_settings:
        with pytest.raises(ArgumentError, match=message):
            LlamaCppSettings(**bad)


def test_gpu_takes_a_comma_list_as_a_repeated_flag(capsys, gemma_path):
    listed = _run_json(capsys, str(gemma_path), "-c", "4096", "--gpu", "CUDA:1GiB,Metal:2GiB")
    repeated = _run_json(capsys, str(gemma_path), "-c", "4096", "--gpu", "CUDA:1GiB", "--gpu", "Metal:2GiB")
    assert listed == repeated
    assert [(d["name"], d.get("free")) for d in listed["devices"]] == [("CUDA0", 1 << 30), ("Metal", 2 << 30),
                                                                        ("CPU", None)]  # fmt: skip


def test_a_context_beyond_the_trained_length_is_warned_of(capsys, gemma_path, gemma_gguf_py):
    """llama_context's warning, as llama.cpp words it, when a sequence's context (n_ctx_seq: -c padded to 256
    cells, divided among the sequences unless they share one cache) exceeds the model's trained length (as
    gguf-py reads it, recorded by tests/data/make_gemma_gguf_py.py)."""
    n_ctx_train = int(gemma_gguf_py["metadata"]["gemma3.context_length"]["contents"])
    padded = -(-(n_ctx_train + 1000) // 256) * 256  # GGML_PAD(n_ctx, 256)
    warning = f"n_ctx_seq ({padded}) > n_ctx_train ({n_ctx_train}) -- possible training context overflow"
    cases = {  # flags: the warnings
        (str(n_ctx_train),): [],
        (str(n_ctx_train + 1000),): [warning],  # --parallel auto: 4 slots sharing the cache, each up to n_ctx
        (str(2 * n_ctx_train), "-np", "2"): [],  # two sequences of n_ctx_train each
    }
    for flags, warnings in cases.items():
        assert _run_json(capsys, str(gemma_path), "-c", *flags)["warnings"] == warnings, flags
    _estimate(str(gemma_path), "-c", str(n_ctx_train + 1000))
    assert f"warning: {warning}" in capsys.readouterr().out


@pytest.mark.parametrize("missing", ["token_embd.weight", "blk.1.attn_q.weight"])
def test_a_tensor_the_graph_needs_and_the_model_lacks_is_one_line(tmp_path, capsys, missing):
    """llama.cpp refuses to load a model without a tensor its graph uses ("missing tensor"); the estimate says
    which, in one line, instead of failing inside the graph."""
    metadata, tensors = MODELS.MODELS["llama-3.1-8b"]()
    MODELS.write_skeleton(tmp_path / "m.gguf", metadata, [t for t in tensors if t[0] != missing])
    with pytest.raises(SystemExit) as exit:
        main(["estimate", str(tmp_path / "m.gguf")])
    assert exit.value.code == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"no tensor '{missing}'" in err and "Traceback" not in err
