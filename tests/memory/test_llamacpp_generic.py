"""The generic estimate, for an architecture llama.cpp knows without an exact entry: the table of llama.cpp's
architectures against what its source says (tests/data/llama_archs.json, recorded by make_llama_archs.py); the
estimate against what libllama allocated for skeletons of real olmoe and arcee shapes
(tests/data/llama_memory_generic.json, by make_llama_memory.py): KV cache, output buffer and refusals exact, the
compute buffer within `COMPUTE_TOLERANCE`; its marking as approximate in the library, the table and `--json`;
clear errors for what it cannot read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import weightkit
from weightkit.cli import app
from weightkit.errors import FormatError, UnsupportedError
from weightkit.memory import GPU, LlamaCppSettings, estimate
from weightkit.memory.llamacpp import fit
from weightkit.memory.llamacpp.architectures import ARCHITECTURES, architecture, read_hparams
from weightkit.memory.llamacpp.architectures.generic import COMPUTE, KV_CACHE, GenericArchitecture
from weightkit.memory.llamacpp.cache import make_memory, output_bytes
from weightkit.memory.llamacpp.compute import compute_buffer
from weightkit.memory.llamacpp.context import ContextParams, ContextRefused, make_context
from weightkit.memory.llamacpp.known_architectures import (
    HYBRID,
    KV,
    LLAMA_CPP_ARCHITECTURES,
    NONE,
    OWN,
    RECURRENT,
)

from ..scripts import load_script

DATA = Path(__file__).parents[1] / "data"
ARCHS = json.loads((DATA / "llama_archs.json").read_text())
RECORD = json.loads((DATA / "llama_memory_generic.json").read_text())
COMPUTE_TOLERANCE = 0.10  # the nearest family's graph against the architecture's own: measured within 7%
MiB = 1 << 20


MODELS = load_script(DATA / "memory_models.py")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    folder = tmp_path_factory.mktemp("generic")
    return lambda name: MODELS.write_model(name, folder)


# ------------------------------------------------------------------------------------------ the table


def test_the_table_holds_every_architecture_llama_cpp_knows():
    assert list(LLAMA_CPP_ARCHITECTURES) == ARCHS["names"]
    assert set(ARCHITECTURES) <= set(LLAMA_CPP_ARCHITECTURES), "an exact entry llama.cpp does not know"


def test_each_architecture_has_the_memory_llama_cpp_gives_it():
    def expected(name: str) -> str:
        if name in ARCHS["no_memory"]:
            return NONE
        if name in ARCHS["own_memory"]:
            return OWN
        if name in ARCHS["recurrent"]:
            return RECURRENT
        return HYBRID if name in ARCHS["hybrid"] else KV

    wrong = {n: (k.memory, expected(n)) for n, k in LLAMA_CPP_ARCHITECTURES.items() if k.memory != expected(n)}
    assert not wrong


def test_sliding_window_layers_as_each_architecture_marks_them():
    table = {name: k.swa for name, k in LLAMA_CPP_ARCHITECTURES.items() if k.swa is not None}
    assert set(table) == set(ARCHS["swa"])
    for name, fact in ARCHS["swa"].items():
        swa = table[name]
        if fact.get("array"):
            assert swa.pattern is None, name
        else:
            assert (swa.pattern, swa.dense_first) == (fact["pattern"], fact["dense_first"]), name


def test_the_recording_is_llama_cpps_source_where_given():
    """Drift check: with LLAMA_CPP_SOURCE pointing at the vendored llama.cpp, the recording is made again."""
    source = os.environ.get("LLAMA_CPP_SOURCE")
    if not source:
        pytest.skip("LLAMA_CPP_SOURCE is not set (the check against the recording above needs no source)")
    maker = load_script(DATA / "make_llama_archs.py")
    assert maker.record(Path(source)) == ARCHS


# ------------------------------------------------------------------------------------------ against llama.cpp


@pytest.mark.parametrize("name", sorted(RECORD))
def test_the_generic_estimate_against_llama_cpp(model_path, name):
    """KV cache, output buffer, flash attention and refusals as llama.cpp's; the compute buffer near."""
    wrong, deviations = [], []
    with weightkit.open(model_path(name)) as m:
        hp = read_hparams(m)
        assert hp.arch not in ARCHITECTURES, f"{hp.arch} has an exact entry now: record {name} in GRIDS instead"
        assert isinstance(architecture(hp.arch), GenericArchitecture)
        for case in RECORD[name]:
            params = ContextParams(**case["params"])
            if "refused" in case:
                with pytest.raises(ContextRefused) as refused:
                    make_context(hp, params)
                assert str(refused.value) in case["refused"]
                continue
            ctx = make_context(hp, params)
            memory = make_memory(hp, ctx)
            got = {
                "kv": memory.kv_bytes,
                "recurrent": memory.recurrent_bytes,
                "output_mib": round(output_bytes(hp, ctx, params.n_seq_max) / MiB, 2),
                "flash_attn": ctx.flash_attn,
            }
            if got != {key: case[key] for key in got}:
                wrong.append((case["params"], got))
            compute = compute_buffer(hp, ctx, memory, m.tensors).bytes
            deviations.append(abs(compute - case["compute"]) / case["compute"])
    assert not wrong, wrong
    assert max(deviations) <= COMPUTE_TOLERANCE, deviations


# ------------------------------------------------------------------------------------------ marked approximate


def test_the_estimate_says_it_is_approximate_and_what_it_guessed(model_path):
    with weightkit.open(model_path("olmoe-default")) as m:
        est = estimate(m, LlamaCppSettings(ctx_size=8192), [GPU("0", "CUDA", 4 << 30)])
        weights = sum(info.nbytes for info in m.tensors.values())
    assert est.approximate and set(est.guessed) == {COMPUTE}
    assert any(n.startswith("approximate (~): no exact llama.cpp memory model of olmoe") for n in est.notes)
    assert not any(d.exact for d in est.devices)  # the compute buffers are derived
    assert sum(d.weights for d in est.devices) >= weights  # every tensor placed (CUDA pads rows)
    with weightkit.open(model_path("arcee-default")) as m:
        fitted = fit(m, LlamaCppSettings(), [GPU("0", "CUDA", 8 << 30)])
    assert fitted.approximate and fitted.fits
    assert any(n.startswith("approximate (~)") for n in fitted.notes)


def test_an_exact_architecture_is_not_approximate(model_path):
    with weightkit.open(MODELS.write_model("qwen3-8b", model_path("smollm3-default").parent)) as m:
        est = estimate(m, LlamaCppSettings(ctx_size=4096))
    assert not est.approximate and est.guessed == {}
    assert not any(n.startswith("approximate") for n in est.notes)


def test_the_cli_marks_it_in_the_table_and_in_json(model_path):
    path = str(model_path("arcee-default"))
    runner = CliRunner()
    table = runner.invoke(app, ["estimate", path, "-c", "4096", "--gpu", "8GiB"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "APPROXIMATE" in table.output and " ~ " in table.output
    assert "note: approximate (~): no exact llama.cpp memory model of arcee" in table.output
    doc = json.loads(runner.invoke(app, ["estimate", path, "-c", "4096", "--json"]).output)
    assert doc["approximate"] is True and list(doc["guessed"]) == [COMPUTE]
    assert doc["architecture"] == "arcee" and doc["devices"][-1]["compute_exact"] is False
    fitted = runner.invoke(app, ["estimate", path, "--fit", "--gpu", "6GiB"], env={"COLUMNS": "200"})
    assert fitted.exit_code == 0 and "APPROXIMATE" in fitted.output and "note: --fit" in fitted.output
    exact = json.loads(runner.invoke(app, ["estimate", str(MODELS.write_model("qwen3-8b", Path(path).parent)),
                                           "--json"]).output)  # fmt: skip
    assert exact["approximate"] is False and exact["guessed"] == {}


# ------------------------------------------------------------------------------------------ clear errors


def _variant(tmp_path: Path, name: str, edit) -> Path:
    metadata, tensors = MODELS.MODELS[name]()
    metadata, tensors = edit(dict(metadata), list(tensors))
    path = tmp_path / "m.gguf"
    MODELS.write_skeleton(path, metadata, tensors)
    return path


def test_an_architecture_llama_cpp_does_not_know_stays_refused(tmp_path):
    def rename(metadata, tensors):
        metadata = {k.replace("smollm3.", "smollm9."): v for k, v in metadata.items()}
        return metadata | {"general.architecture": "smollm9"}, tensors

    with weightkit.open(_variant(tmp_path, "smollm3-default", rename)) as m, pytest.raises(UnsupportedError) as e:
        estimate(m)
    assert str(e.value) == "llama.cpp does not know the architecture 'smollm9': it refuses to load the model"


def test_another_known_architecture_takes_the_generic_estimate(tmp_path):
    """A model llama.cpp runs as another architecture (here Llama-shaped weights named `internlm2`)."""

    def rename(metadata, tensors):
        metadata = {k.replace("llama.", "internlm2."): v for k, v in metadata.items()}
        return metadata | {"general.architecture": "internlm2"}, tensors

    with weightkit.open(_variant(tmp_path, "llama-3.1-8b", rename)) as m:
        est = estimate(m, LlamaCppSettings(ctx_size=4096))
        exact = 32 * 2 * 4096 * 8 * 128 * 2  # layers x (K, V) x cells x KV heads x head size x f16
    assert est.approximate and est.memory.kv_bytes == exact


@pytest.mark.parametrize(
    ("edit", "error", "message"),
    [
        (lambda md, t: ({k: v for k, v in md.items() if k != "arcee.attention.head_count"}, t), FormatError,
         "arcee.attention.head_count and arcee.attention.key_length make it"),
        (lambda md, t: (md | {"arcee.attention.head_count_kv": "four"}, t), FormatError,
         "arcee.attention.head_count_kv is 'four', not a count"),
        (lambda md, t: (md, [x for x in t if x[0] != "token_embd.weight"]), UnsupportedError,
         "cannot build a graph for this arcee model: it has no tensor 'token_embd.weight'"),
        (lambda md, t: (md, [x for x in t if x[0] != "blk.0.attn_k.weight"]), UnsupportedError,
         "it has no tensor 'blk.0.attn_k.weight'"),
    ],
)  # fmt: skip
def test_what_the_generic_path_cannot_read_is_a_clear_error(tmp_path, edit, error, message):
    with weightkit.open(_variant(tmp_path, "arcee-default", edit)) as m, pytest.raises(error, match=message):
        estimate(m, LlamaCppSettings(ctx_size=4096))


def test_a_recurrent_architecture_without_state_keys_names_them(tmp_path):
    def rename(metadata, tensors):
        metadata = {k.replace("mamba.", "rwkv6qwen2."): v for k, v in metadata.items() if ".ssm." not in k}
        return metadata | {"general.architecture": "rwkv6qwen2"}, tensors

    path = _variant(tmp_path, "mamba-2.8b", rename)
    with weightkit.open(path) as m, pytest.raises(FormatError, match=r"rwkv6qwen2.ssm.state_size is missing"):
        estimate(m)


def test_a_hybrid_with_mamba_layers_is_estimated_with_its_state(tmp_path):
    """Granite 4.0-H's shapes as `jamba` (a hybrid llama.cpp knows): Mamba-2 state for the layers without KV
    heads, KV for the others, exactly as the exact granitehybrid entry sizes them; marked approximate."""

    def rename(metadata, tensors):
        metadata = {k.replace("granitehybrid.", "jamba."): v for k, v in metadata.items()}
        return metadata | {"general.architecture": "jamba"}, tensors

    with weightkit.open(MODELS.write_model("granite-4.0-h-tiny", tmp_path)) as m:
        exact = estimate(m, LlamaCppSettings(ctx_size=4096))
    with weightkit.open(_variant(tmp_path, "granite-4.0-h-tiny", rename)) as m:
        est = estimate(m, LlamaCppSettings(ctx_size=4096))
    assert est.memory.kv_bytes == exact.memory.kv_bytes
    assert est.memory.recurrent_bytes == exact.memory.recurrent_bytes > 0
    assert set(est.guessed) == {COMPUTE, KV_CACHE, "recurrent"}
    assert abs(est.devices[-1].compute - exact.devices[-1].compute) <= COMPUTE_TOLERANCE * exact.devices[-1].compute


def test_every_architecture_llama_cpp_knows_gets_an_estimate_or_a_clear_error(tmp_path):
    """SmolLM3's shapes (two layers of them) under each name llama.cpp knows without an exact entry: an
    approximate estimate, or a weightkit error naming what it lacks (a recurrent architecture's state keys),
    never a traceback."""
    metadata, tensors = MODELS.MODELS["smollm3-default"]()
    metadata["smollm3.block_count"] = 2
    tensors = [t for t in tensors if not t[0].startswith("blk.") or t[0].split(".")[1] in ("0", "1")]
    outcomes = {}
    for arch in sorted(set(LLAMA_CPP_ARCHITECTURES) - set(ARCHITECTURES)):
        renamed = {k.replace("smollm3.", f"{arch}."): v for k, v in metadata.items()}
        path = tmp_path / f"{arch}.gguf"
        MODELS.write_skeleton(path, renamed | {"general.architecture": arch}, tensors)
        with weightkit.open(path) as m:
            try:
                outcomes[arch] = estimate(m, LlamaCppSettings(ctx_size=4096)).approximate
            except FormatError as e:
                outcomes[arch] = str(e)
    errors = {arch: why for arch, why in outcomes.items() if why is not True}
    assert set(errors) == {a for a, k in LLAMA_CPP_ARCHITECTURES.items() if k.memory == RECURRENT} - set(ARCHITECTURES)
    assert all("ssm.state_size is missing" in why for why in errors.values()), errors
