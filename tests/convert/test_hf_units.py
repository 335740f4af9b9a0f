"""The pieces of the HF converter against gguf-py (the `gguf` test dependency), over many inputs: the model-id
heuristics, size labels, BF16; and the `convert` command's JSON answer."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
from gguf.metadata import Metadata as GGUFMetadata
from gguf.utility import size_label as gguf_size_label
from hypothesis import given, settings
from hypothesis import strategies as st

from weightkit import quant
from weightkit.cli import main
from weightkit.convert.hf.metadata import id_to_title, parse_model_id, size_label

IDS = [
    "meta-llama/Meta-Llama-3-8B-Instruct", "mistralai/Mistral-7B-Instruct-v0.2", "Qwen/Qwen2.5-0.5B", "model",
    "Tiny-Llama-3-8B-Instruct", "nreimers/MiniLM-L6-H384-uncased", "bigscience/bloom-7b1", "tiny-mistral-v0.1",
    "google/gemma-2-9b-it", "TheBloke/Mistral-7B-Instruct-v0.2-GGUF", "a b c", "./local/path", "Phi-3-mini-128k",
    "x-small-v2.1-Q4_K_M", "deepseek-ai/DeepSeek-V2-Lite-Chat", "org/8x7B-MoE-iter300", "-lead--trail-", "Q8_0",
    "ibm/granite-3.0-2b-instruct-lora", "allenai/OLMo-7B-0724-hf", "org/model-BF16-32k-large",
]  # fmt: skip
PARAMS = [0, 16_500_000, 7_240_000_000, 22_565_376, -100_000, 46_700_000_000]


@pytest.mark.parametrize("total", PARAMS)
@pytest.mark.parametrize("model_id", IDS)
def test_model_id_heuristics_match_gguf_py(model_id, total):
    ours = parse_model_id(model_id, total)
    theirs = GGUFMetadata.get_model_id_components(model_id, total)
    assert (ours.name, ours.organization, ours.basename, ours.finetune, ours.version, ours.size_label) == theirs
    assert id_to_title(model_id) == GGUFMetadata.id_to_title(model_id)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["7B", "8x7b", "v2", "chat", "Instruct", "mini", "q4_0", "fp16", "x", "Llama", "3",
                                 "1.5", "7b1", "128k", "iter3", "lora", "", "A3B"]), max_size=6),
       st.sampled_from(PARAMS))  # fmt: skip
def test_model_id_heuristics_on_random_names(parts, total):
    model_id = "-".join(parts) or "m"
    ours = parse_model_id(model_id, total)
    theirs = GGUFMetadata.get_model_id_components(model_id, total)
    assert (ours.name, ours.organization, ours.basename, ours.finetune, ours.version, ours.size_label) == theirs


SIZES = [(22_565_376, 0, 0, 0), (999, 0, 0, 0), (8_030_261_248, 0, 0, 0), (10**12 + 1, 0, 0, 0),
         (46_702_792_704, 1_602_048_000, 45_100_744_704, 8)]  # fmt: skip


@pytest.mark.parametrize("counts", SIZES)
def test_size_label_matches_gguf_py(counts):
    assert size_label(*counts) == gguf_size_label(*counts)


def test_bf16_matches_gguf_py_on_every_class_of_float():
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**32, size=1 << 16, dtype=np.uint64).astype(np.uint32)
    bits[:8] = [0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FFFFFFF, 0xFFC00001, 0x00008000, 0x3F808000]
    x = bits.view(np.float32).reshape(64, -1)
    ours = np.asarray(quant.quantize(x, "BF16")).tobytes()
    assert ours == gguf.quants.quantize(x, gguf.GGMLQuantizationType.BF16).tobytes()


def test_q8_0_matches_gguf_py():
    """gguf-py's numpy Q8_0 (round half away from zero, float32 math, float16 scale), on all-zero blocks,
    exact halves and random scales."""
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((64, 256)) * rng.choice([1e-6, 1e-2, 1.0, 300.0], size=(64, 1))).astype(np.float32)
    x[0, :32] = 0
    x[1, :32] = np.arange(32) - 16.5
    x[2, :32] = np.float32(127) * np.arange(32) / np.float32(254)
    ours = np.asarray(quant.quantize(x, "Q8_0")).tobytes()
    assert ours == gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0).tobytes()


def test_cli_convert_json(hf_checkpoints, tmp_path, capsys):
    out = tmp_path / "bert.gguf"
    with pytest.raises(SystemExit) as done:
        main(["convert", str(hf_checkpoints["tiny-bert"]), str(out), "--outtype", "q8_0", "--json"])
    assert done.value.code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["architecture"] == "bert" and doc["hf_architecture"] == "BertModel"
    assert doc["outtype"] == "q8_0" and doc["file_type"] == 7 and doc["bytes"] == out.stat().st_size
    assert doc["tensors"]["token_embd.weight"] == {"type": "Q8_0", "shape": [30522, 64]}
    assert doc["tensors"]["position_embd.weight"]["type"] == "F32"  # kept in F32 whatever the outtype
    assert sum(doc["tensor_types"].values()) == len(doc["tensors"])
