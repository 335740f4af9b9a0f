"""llama-server's --fit against llama.cpp's own: what llama-fit-params (common/fit.cpp) chose for skeleton GGUFs on
RPC devices advertising chosen free memory (tests/data/llama_fit.json, recorded by tests/data/make_llama_fit.py):
the context, the layers on the GPUs, the tensor split and, for models with experts, the tensor overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import weightkit
from weightkit.errors import ArgumentError
from weightkit.memory import GPU, LlamaCppSettings
from weightkit.memory.llamacpp import fit
from weightkit.memory.llamacpp.fitting import fit_settings

from ..scripts import load_script

DATA = Path(__file__).parents[1] / "data"
RECORD = json.loads((DATA / "llama_fit.json").read_text())
GIB = 1 << 30
MODELS = load_script(DATA / "memory_models.py")


@pytest.fixture(scope="module")
def skeleton(tmp_path_factory):
    folder = tmp_path_factory.mktemp("skeletons")
    return lambda name: MODELS.write_model(name, folder)


def _printed(settings: LlamaCppSettings, n_gpus: int) -> dict:
    """The settings as llama-fit-params prints them (-ts without trailing zeros, and only for several GPUs)."""
    split = [int(x) for x in settings.tensor_split] if n_gpus > 1 else []
    while split and split[-1] == 0:
        split.pop()
    return {
        "ctx_size": settings.ctx_size,
        "n_gpu_layers": settings.n_gpu_layers,
        "tensor_split": split if len(split) > 1 else [],
        "overrides": [list(pair) for pair in settings.override_tensor],
    }


@pytest.mark.parametrize("name", sorted(RECORD))
def test_fit_chooses_what_llama_cpp_chooses(skeleton, name):
    wrong = []
    with weightkit.open(skeleton(name)) as m:
        for case in RECORD[name]:
            gpus = [GPU(str(i), "RPC", free) for i, free in enumerate(case["free"])]
            settings, _ = fit_settings(m, LlamaCppSettings(**case["settings"]), gpus, margins=case["margin"])
            expected = {key: case[key] for key in ("ctx_size", "n_gpu_layers", "tensor_split", "overrides")}
            if _printed(settings, len(gpus)) != expected:
                wrong.append((case["free"], case["args"], _printed(settings, len(gpus)), expected))
    assert not wrong, wrong


#: the 2026 families the fit is checked on beside the older ones
NEWER_FAMILIES = {
    "gemma4-26b-a4b": "experts beside a dense FFN, sliding windows",
    "qwen3_5_moe-default": "gated delta-net hybrid with experts",
    "cohere2-32-layers": "sliding windows",
    "nemotron_h-nano-9b-v2": "Mamba-2 hybrid, a 2**20-token context",
    "lfm2-1.2b": "short-convolution hybrid",
}


def test_the_fit_record_covers_the_paths():
    cases = [c for record in RECORD.values() for c in record]
    assert len(cases) >= 30
    assert any(c["overrides"] for c in cases)  # experts kept off the GPUs
    assert any(c["ctx_size"] == 4096 and c["n_gpu_layers"] == 0 for c in cases)  # nothing fits
    assert any(len(c["free"]) == 3 for c in cases) and any(c["margin"] != GIB for c in cases)
    assert any("-ngl" in c["args"] for c in cases) and any("-c" in c["args"] for c in cases)
    assert set(NEWER_FAMILIES) <= set(RECORD)


def test_fit_estimate_and_notes(skeleton):
    with weightkit.open(skeleton("llama-3.1-8b")) as m:
        est = fit(m, LlamaCppSettings(), [GPU("0", "CUDA", 6 * GIB), GPU("1", "CUDA", 4 * GIB)])
        assert est.context.n_ctx < 131072 and est.fits
        assert any("context lowered from 131072" in n for n in est.notes)
        roomy = fit(m, LlamaCppSettings(ctx_size=8192), [GPU("0", "CUDA", 80 * GIB)])
        assert "it fits as it is" in roomy.notes[0] and roomy.context.n_ctx == 8192
        fixed = fit(m, LlamaCppSettings(ctx_size=65536, n_gpu_layers=33), [GPU("0", "CUDA", 4 * GIB)])
        assert any("-ngl 33 was given" in n for n in fixed.notes)
        host = fit(m, LlamaCppSettings(), [], host_memory=16 * GIB)
        assert host.context.n_ctx < 131072 and "context lowered" in host.notes[0]
        nothing = fit(m, LlamaCppSettings(), [])
        assert "nothing to fit to" in nothing.notes[0]
        with pytest.raises(ArgumentError, match="--fit-target"):
            fit(m, LlamaCppSettings(), [GPU("0", "CUDA", 4 * GIB)] * 2, margins=[GIB])
