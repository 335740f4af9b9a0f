"""`--mmproj`: a vision or audio projector's memory against libmtmd itself (tests/data/mmproj_memory.json, recorded by
tests/data/make_mmproj_memory.py from skeleton projector files the reference converter wrote): weights and compute
buffer to the byte where clip's warmup graph is reproduced (Gemma 3, Gemma 4, Qwen2-VL, Qwen2.5-VL, Qwen3-VL,
Mistral Small 3.1, Pixtral 12B; Qwen2-Audio, Voxtral, Audio Flamingo 3, Gemma 4's audio encoder), the weights to the
byte and the compute buffer marked derived elsewhere; where llama-server puts it and how its fit counts it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import weightkit
from weightkit.cli import main
from weightkit.errors import FormatError
from weightkit.memory import GPU, LlamaCppSettings
from weightkit.memory.llamacpp import estimate, estimate_projector, fit
from weightkit.memory.llamacpp.projector import GRAPHS, fit_margins

from ..scripts import load_script

DATA = Path(__file__).parents[1] / "data"
RECORD = json.loads((DATA / "mmproj_memory.json").read_text())
MiB = 1 << 20
MODELS = load_script(DATA / "memory_models.py")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("projectors")


@pytest.mark.parametrize("name", sorted(RECORD))
def test_matches_libmtmd(folder, name):
    with weightkit.open(MODELS.write_model(name, folder)) as m:
        for case in RECORD[name]:
            est = estimate_projector(m, flash_attn=case["flash_attn_type"])
            # per encoder: "896 x 896" (an image) or "3000" (audio frames)
            logged = case["warmup"].split(", ")
            warmup = ", ".join(w.replace(" x ", "x") + " image" if " x " in w else f"{w} audio frames" for w in logged)
            assert (est.device, est.flash_attn, est.warmup) == (-1, case["flash_attn"], warmup)
            used = case["usage"]["CPU"]
            # the weights as clip counts them, whatever the graph: the rest is the compute buffers clip logs (each
            # to the hundredth of a MiB)
            assert abs((used - est.counted) / MiB - case["compute_mib"]["CPU"]) <= 0.005 * len(logged) + 1e-9
            if all(t in GRAPHS for t in est.projector_types):
                assert est.compute_exact
                assert est.fit_bytes == used
            else:
                assert not est.compute_exact


def test_placement_and_buffer(folder):
    """On the first GPU unless --no-mmproj-offload; CUDA aligns each tensor to 128 bytes in its buffer."""
    gpus = [GPU("0", "CUDA", 24 << 30), GPU("1", "CUDA", 24 << 30)]
    with weightkit.open(MODELS.write_model("mmproj-qwen2_5_vl", folder)) as m:
        on_gpu = estimate_projector(m, gpus)
        on_cpu = estimate_projector(m, gpus, offload=False)
        alone = estimate_projector(m)
        sizes = [info.nbytes for info in m.tensors.values()]
    assert (on_gpu.device, on_cpu.device, alone.device) == (0, -1, -1)
    assert on_cpu.weights == sum(-(-n // 32) * 32 for n in sizes) > on_cpu.counted == sum(sizes)
    assert on_gpu.weights == sum(-(-n // 128) * 128 for n in sizes)
    assert not on_gpu.compute_exact  # a CUDA device's own graph optimization is not modelled


def test_added_to_its_device(folder):
    gpus = [GPU("0", "CUDA", 24 << 30)]
    settings = LlamaCppSettings(ctx_size=4096)
    with weightkit.open(MODELS.write_model("mmproj-gemma3", folder)) as p:
        projector = estimate_projector(p, gpus)
    with weightkit.open(MODELS.write_model("gemma-3-12b", folder)) as m:
        plain = estimate(m, settings, gpus)
        both = estimate(m, settings, gpus, projector=projector)
    assert both.projector == projector
    assert [d.total for d in both.devices] == [plain.devices[0].total + projector.total, plain.devices[1].total]


def test_fit_keeps_it_free(folder):
    """llama-server adds what mtmd_get_memory_usage reports to the fit target of the projector's device (the GPUs
    first among ggml's devices, the CPU after them)."""
    gpus = [GPU("0", "CUDA", 12 << 30)]
    with weightkit.open(MODELS.write_model("mmproj-gemma3", folder)) as p:
        on_gpu, on_cpu = estimate_projector(p, gpus), estimate_projector(p, gpus, offload=False)
        host = estimate_projector(p)
    assert fit_margins(1 << 30, on_gpu, 1) == [(1 << 30) + on_gpu.fit_bytes]
    assert fit_margins([1 << 30, 2 << 30], on_gpu, 2) == [(1 << 30) + on_gpu.fit_bytes, 2 << 30]
    assert fit_margins(1 << 30, on_cpu, 1) == [1 << 30]
    assert fit_margins(1 << 30, host, 0) == [(1 << 30) + host.fit_bytes]
    with weightkit.open(MODELS.write_model("gemma-3-12b", folder)) as m:
        plain = fit(m, LlamaCppSettings(), gpus)
        fitted = fit(m, LlamaCppSettings(), gpus, projector=on_gpu)
    assert fitted.context.n_ctx < plain.context.n_ctx and fitted.projector == on_gpu


def test_not_a_projector(folder):
    with weightkit.open(MODELS.write_model("gemma-3-12b", folder)) as m, pytest.raises(FormatError, match="'clip'"):
        estimate_projector(m)


def test_unknown_projector_type(folder):
    metadata, tensors = MODELS.PROJECTORS["mmproj-gemma3"]()
    metadata["clip.projector_type"] = "gemma99"
    path = folder / "unknown.gguf"
    MODELS.write_skeleton(path, metadata, tensors)
    with weightkit.open(path) as m, pytest.raises(FormatError, match="unknown projector type 'gemma99'"):
        estimate_projector(m)


def _run(*args: str) -> int:
    with pytest.raises(SystemExit) as exit:
        main(["estimate", *args])
    return exit.value.code


def test_cli(folder, capsys):
    model = str(MODELS.write_model("gemma-3-12b", folder))
    projector = str(MODELS.write_model("mmproj-gemma3", folder))
    with weightkit.open(projector) as p:
        expected = estimate_projector(p, flash_attn="off")
    assert _run(model, "--mmproj", projector, "-c", "4096", "-fa", "off", "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["projector"] | {"types": ["gemma3"], "device": "CPU", "total": expected.total} == doc["projector"]
    assert doc["devices"][-1]["projector"] == expected.total
    assert _run(model, "--mmproj", projector, "-c", "4096", "--gpu", "24GiB", "--no-mmproj-offload") == 0
    assert "+ mmproj on CPU" in capsys.readouterr().out
    assert _run(model, "--mmproj", model) != 0
    assert "not a projector file" in capsys.readouterr().err
