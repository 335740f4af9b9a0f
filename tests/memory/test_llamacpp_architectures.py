"""Each architecture the llama.cpp engine knows is one complete entry: a graph builder, switches that agree with
each other, a skeleton model of real shapes in tests/data/memory_models.py and llama.cpp's numbers recorded for it
(which test_llamacpp.py compares with, byte for byte)."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

import weightkit
from weightkit.errors import FormatError, UnsupportedError
from weightkit.memory.llamacpp import architectures, graph_builder, hparams
from weightkit.memory.llamacpp.architectures import ARCHITECTURES, LlamaCppArchitecture, architecture, read_hparams
from weightkit.memory.llamacpp.architectures.entry import DSA, RECURRENT
from weightkit.memory.llamacpp.hparams import LlamaCppHParams

from ..scripts import load_script

DATA = Path(__file__).parents[1] / "data"
RECORD = json.loads((DATA / "llama_memory.json").read_text())
MODELS = load_script(DATA / "memory_models.py")
SKELETONS = {name: MODELS.architecture(name) for name in MODELS.MODELS}


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_every_entry_is_complete(name):
    entry = ARCHITECTURES[name]
    assert isinstance(entry, LlamaCppArchitecture)
    graph = inspect.signature(entry.graph)
    assert list(graph.parameters) == ["b"] and graph.return_annotation == "Graph", graph
    assert entry.graph.__module__.startswith("weightkit.memory.llamacpp.architectures."), entry.graph.__module__
    assert entry.recurrent in (None, *RECURRENT)
    assert entry.dsa in (None, *DSA) and (entry.dsa is None or entry.mla), "DSA's attention is MLA's"
    assert not entry.wkv or entry.recurrent == "all", "RWKV's state is a recurrent one"
    assert set(entry.flag_defaults) <= set(entry.flags), "a default for a flag the entry does not read"
    assert set(entry.flags) <= _flags_read(), "a flag no graph reads"
    recorded = [model for model, arch in SKELETONS.items() if arch == name and model in RECORD]
    assert recorded, f"{name}: no skeleton model with llama.cpp's numbers recorded (tests/data/make_llama_memory.py)"


def _flags_read() -> set[str]:
    """The flags the graph builders and hparams read (`hp.flags.get(...)` / `flags.get(...)` in their source)."""
    sources = [inspect.getsource(m) for m in (graph_builder, hparams)]
    folder = Path(architectures.__file__).parent
    sources += [p.read_text() for p in folder.glob("*.py")]
    return {m for s in sources for m in re.findall(r"flags\.get\(\"(\w+)\"", s)}


def test_an_architecture_llama_cpp_does_not_know_is_refused_naming_it():
    with pytest.raises(UnsupportedError, match=r"llama.cpp does not know the architecture 'rwkv9'"):
        architecture("rwkv9")


def test_read_hparams_names_a_missing_architecture(tmp_path):
    metadata, tensors = MODELS.MODELS["qwen3-8b"]()
    del metadata["general.architecture"]
    MODELS.write_skeleton(tmp_path / "m.gguf", metadata, tensors)
    with weightkit.open(tmp_path / "m.gguf") as m, pytest.raises(FormatError, match=r"general\.architecture is"):
        read_hparams(m)


def test_each_entry_reads_its_own_switches(tmp_path):
    """The same file read as two entries differ only where their switches do: qwen3moe reads the expert keys,
    qwen3 does not."""
    path = MODELS.write_model("qwen3-30b-a3b", tmp_path)
    with weightkit.open(path) as m:
        moe = architecture("qwen3moe").read_hparams(m, "qwen3moe")
        dense = LlamaCppArchitecture(ARCHITECTURES["qwen3"].graph).read_hparams(m, "qwen3moe")
    assert isinstance(moe, LlamaCppHParams) and moe.n_ff_exp > 0 and dense.n_ff_exp == 0
    assert (moe.n_expert, moe.n_head_kv) == (dense.n_expert, dense.n_head_kv)


def test_gemma4_refuses_what_llama_cpp_refuses_and_models_its_experts(tmp_path):
    """Without its sliding-window pattern llama.cpp refuses a gemma4 file; one with experts (26B-A4B) is estimated
    exactly, as any other (its numbers: test_llamacpp.py)."""
    from weightkit.memory.llamacpp import LlamaCppSettings, estimate

    metadata, tensors = MODELS.MODELS["gemma4-default"]()
    MODELS.write_skeleton(tmp_path / "nopattern.gguf", {k: v for k, v in metadata.items() if "window_pattern" not in k},
                          tensors)  # fmt: skip
    with weightkit.open(tmp_path / "nopattern.gguf") as m, pytest.raises(FormatError, match="sliding_window_pattern"):
        read_hparams(m)
    with weightkit.open(MODELS.write_model("gemma4-26b-a4b", tmp_path)) as m:
        hp = read_hparams(m)
        est = estimate(m, LlamaCppSettings(ctx_size=4096))
    assert (hp.n_expert, hp.n_expert_used, hp.n_ff_exp) == (128, 8, 704)
    assert not est.approximate


def test_recurrent_layers_without_their_array_come_from_the_interval(tmp_path):
    """Without `attention.recurrent_layers` llama.cpp marks every layer but each `full_attention_interval`-th, never
    the NextN block: the converter's array over again. An interval of 0 (llama.cpp divides by it) is refused."""
    with weightkit.open(MODELS.write_model("qwen3_5-default", tmp_path)) as m:
        listed = read_hparams(m).is_recurrent
    metadata, tensors = MODELS.MODELS["qwen3_5-default"]()
    del metadata["qwen35.attention.recurrent_layers"]
    MODELS.write_skeleton(tmp_path / "interval.gguf", metadata, tensors)
    with weightkit.open(tmp_path / "interval.gguf") as m:
        assert read_hparams(m).is_recurrent == listed and listed.count(False) == 9
    metadata["qwen35.full_attention_interval"] = MODELS.Value(0, MODELS.U32)
    MODELS.write_skeleton(tmp_path / "zero.gguf", metadata, tensors)
    with weightkit.open(tmp_path / "zero.gguf") as m, pytest.raises(FormatError, match=r"full_attention_interval is 0"):
        read_hparams(m)


def test_sparse_attention_indexers_and_what_llama_cpp_requires(tmp_path):
    """GLM-DSA's layers index as `attention.indexer.types` says, and without it as llama.cpp's defaults say: GLM-5.2's
    pattern (21 of 78 layers) for a model trained on 2**20 tokens, every layer for a shorter one; the indexer cache
    holds those layers alone. deepseek32 files without the routing function or the indexer's keys are refused."""
    from weightkit.memory.llamacpp.cache import make_memory
    from weightkit.memory.llamacpp.context import ContextParams, make_context

    with weightkit.open(MODELS.write_model("glm_moe_dsa-shared-indexers", tmp_path)) as m:
        listed = read_hparams(m)
    lid = make_memory(listed, make_context(listed, ContextParams(n_ctx=4096))).caches[1]
    assert listed.is_indexer_full[:78].count(True) == 21 == len(lid.layers) and lid.k_rows[0] == 128
    for name, full in (("glm_moe_dsa-shared-indexers", listed.is_indexer_full), ("glm_moe_dsa-default", (True,) * 79)):
        metadata, tensors = MODELS.MODELS[name]()
        del metadata["glm-dsa.attention.indexer.types"]
        MODELS.write_skeleton(tmp_path / f"{name}-untyped.gguf", metadata, tensors)
        with weightkit.open(tmp_path / f"{name}-untyped.gguf") as m:
            assert read_hparams(m).is_indexer_full[:78] == full[:78], name
    metadata, tensors = MODELS.MODELS["deepseek_v32-12-layers-64-experts"]()
    for key in ("deepseek32.expert_gating_func", "deepseek32.attention.indexer.top_k"):
        MODELS.write_skeleton(tmp_path / "missing.gguf", {k: v for k, v in metadata.items() if k != key}, tensors)
        with weightkit.open(tmp_path / "missing.gguf") as m, pytest.raises(FormatError, match=rf"{key} is missing"):
            read_hparams(m)
