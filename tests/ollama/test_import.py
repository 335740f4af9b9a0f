"""`weightkit create --from HF_DIR` as x/create's pipeline: the policies (Ollama's own table cases, recorded by
tests/data/make_ollama_create_cases.py), the plan, the blobs byte for byte (MLX's save_safetensors for the
quantized ones), the config blob, and bad input refused with the store unchanged."""

from __future__ import annotations

import json
import random
import string
import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from weightkit.dtypes import MLXQuantType as Q
from weightkit.errors import FormatError, UnsupportedError
from weightkit.ollama import Store, create_from_checkpoint
from weightkit.ollama.blob_bytes import BlobTensor, go_packed_header, unordered_map_order
from weightkit.ollama.import_arch import IMPORT_POLICIES, import_policy
from weightkit.ollama.import_plan import (
    BlobSpec,
    Classification,
    SourceKind,
    SourceTensor,
    TensorSpec,
    classify,
    draft_policy,
    plan,
    prefix_specs,
    read_inventory,
)
from weightkit.ollama.tensor_blobs import aligned, expert_group_prefix, tensor_quantization, use_more_bits
from weightkit.safetensors import write_checkpoint

CASES = json.loads((Path(__file__).parents[1] / "data" / "ollama_create_cases.json").read_text())


def _q(text: str) -> Q | None:
    return Q(text) if text else None


@pytest.mark.parametrize("case", CASES["policy"], ids=[c["source"] for c in CASES["policy"]])
def test_policy_cases_of_ollama(case):
    policy = import_policy(case["architecture"], case["config"])
    assert policy(case["tensor"], tuple(case["shape"]), Q(case["quantize"])) == _q(case["want"])


def test_alignment_expert_groups_and_stacked_experts_of_ollama():
    for c in CASES["is_aligned"]:
        assert aligned(tuple(c["shape"]), Q(c["quantize"])) == c["want"], c
    for c in CASES["expert_group_prefix"]:
        assert expert_group_prefix(c["tensor"]) == c["want"], c
    for c in CASES["stacked_3d"]:
        assert tensor_quantization(c["tensor"], tuple(c["shape"]), Q(c["quantize"])) == _q(c["want"]), c


def test_use_more_bits_as_ollama_tests_it():
    """TestUseMoreBits (gemma4_test.go): 30 layers."""
    promoted = {i for i in range(30) if use_more_bits(i, 30)}
    assert {0, 1, 2, 26, 27, 28, 29, 5} <= promoted and not promoted & {3, 4, 6, 7}


def test_registry_keys_as_ollama_keys_them():
    """The registrations upstream's tests check (gemma4/glimmer/laguna/nemotron_h _test.go), and the fallback."""
    assert len(IMPORT_POLICIES) == 23
    for arch in ("Gemma4UnifiedForConditionalGeneration", "gemma4_unified", "MuseGlimmerForConditionalGeneration",
                 "LagunaForCausalLM", "NemotronH_Nano_Omni_Reasoning_V3", "Qwen3NextMoeForCausalLM"):  # fmt: skip
        assert arch in IMPORT_POLICIES
    assert import_policy("LlamaForCausalLM", {}) is tensor_quantization
    qwen = import_policy("Qwen3_5ForCausalLM", {})  # qwen35.go: the low-rank a/b projections kept
    assert qwen("model.layers.0.linear_attn.in_proj_a.weight", (64, 2048), Q.INT4) is None
    assert qwen("model.layers.0.linear_attn.in_proj_qkvz.weight", (64, 2048), Q.INT4) is Q.INT4


def test_draft_policy_and_prefix_as_ollama():
    """draft_test.go's TestDraftPolicyQuantizesOutputHead and TestPrefixSpecs."""
    p = draft_policy(tensor_quantization)
    assert p("model.embed_tokens.weight", (4096, 2048), Q.INT8) is Q.INT8  # the head takes the requested type
    assert p("lm_head.weight", (4096, 2048), Q.NVFP4) is Q.NVFP4
    assert p("model.embed_tokens.weight", (4096, 2049), Q.INT8) is None  # groups that do not fit: source precision
    assert p("model.layers.0.mlp.down_proj.weight", (2048, 2048), Q.INT8) is not None  # the wrapped policy's
    source = SourceTensor("model.layers.0.mlp.experts.0.gate_proj.weight", "BF16", (2, 2), "a.safetensors")
    stacked = TensorSpec("model.layers.0.mlp.experts.gate_proj.weight", [source], quantize=Q.INT8)
    specs = [BlobSpec("model.layers.0.mlp.experts", [stacked])]
    (got,) = prefix_specs(specs, "draft.")
    assert got.name == "draft.model.layers.0.mlp.experts"
    assert got.tensors[0].name == "draft.model.layers.0.mlp.experts.gate_proj.weight"
    assert got.tensors[0].quantize is Q.INT8 and got.tensors[0].sources == [source]  # sources keep their names
    assert specs[0].name == "model.layers.0.mlp.experts"  # the input is not changed
    assert specs[0].tensors[0].name == "model.layers.0.mlp.experts.gate_proj.weight"


def _inventory(tmp_path, tensors: dict, config: dict | None = None):
    write_checkpoint(tmp_path / "ckpt", tensors)
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config or {}))
    return read_inventory(tmp_path / "ckpt")


def test_plan_float_expert_groups_as_ollama(tmp_path):
    """plan_test.go's TestPlanFloat*, and laguna_test.go's mixed expert group: a group whose projections take
    one type shares a blob; mixed ones take a blob per projection; pre-stacked experts are ordinary tensors."""
    z = np.zeros((2048, 512), ml_dtypes.bfloat16)
    tensors = {f"model.layers.{layer}.mlp.experts.{e}.{p}.weight": z
               for layer in (1, 5) for e in range(2) for p in ("gate_proj", "down_proj")}  # fmt: skip
    tensors["model.layers.0.mlp.experts.gate_up_proj"] = np.zeros((2, 64, 64), ml_dtypes.bfloat16)
    inv = _inventory(tmp_path, tensors, {"architectures": ["LagunaForCausalLM"], "num_hidden_layers": 40,
                                         "mlp_layer_types": ["dense", "sparse"]})  # fmt: skip
    specs = plan(inv, classify(inv, "mxfp8"))
    assert [s.name for s in specs] == [
        "model.layers.0.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj.weight",
        "model.layers.1.mlp.experts.gate_proj.weight", "model.layers.5.mlp.experts",
    ]  # fmt: skip
    quant = {t.name: t.quantize for s in specs for t in s.tensors}
    assert quant["model.layers.1.mlp.experts.down_proj.weight"] is None
    assert quant["model.layers.1.mlp.experts.gate_proj.weight"] is Q.MXFP8
    assert quant["model.layers.5.mlp.experts.down_proj.weight"] is Q.MXFP8
    stacked = specs[-1].tensors[0]
    assert stacked.transform == "stack_experts" and stacked.out_shape == (2, 2048, 512)


def test_classify_as_ollama(tmp_path):
    """classify_test.go: float sources quantize on request; MLX-quantized ones are copied (and refuse a
    request); block-FP8 becomes mxfp8."""
    f = np.zeros((64, 64), np.float32)
    inv = _inventory(tmp_path / "a", {"a.weight": f})
    assert classify(inv, "Q4") == Classification(SourceKind.FLOAT, Q.INT4)
    assert classify(inv, None) == Classification(SourceKind.FLOAT, None)
    w, s = np.zeros((64, 8), np.uint32), np.zeros((64, 1), ml_dtypes.bfloat16)
    inv = _inventory(tmp_path / "b", {"a.weight": w, "a.scales": s, "a.biases": s},
                     {"quantization": {"bits": 4, "group_size": 64, "mode": "affine"}})  # fmt: skip
    assert classify(inv, "") == Classification(SourceKind.PREQUANTIZED, Q.INT4)
    with pytest.raises(UnsupportedError, match="quantized already"):
        classify(inv, "int8")
    specs = plan(inv, classify(inv, ""))
    assert [(s.name, [t.name for t in s.tensors], s.metadata) for s in specs] == [
        ("a.weight", ["a.weight", "a.weight.scale", "a.weight.bias"], {"quant_type": "int4", "group_size": "64"})
    ]
    e4m3 = np.zeros((256, 128), ml_dtypes.float8_e4m3fn)
    fp8 = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    inv = _inventory(tmp_path / "c", {"a.weight": e4m3, "a.weight_scale_inv": np.ones((2, 1), np.float32)}, fp8)
    assert classify(inv, None) == Classification(SourceKind.BLOCK_FP8, Q.MXFP8)
    with pytest.raises(UnsupportedError, match="converted to mxfp8"):
        classify(inv, "int4")


def test_unordered_map_order_is_mlx_save_order(tmp_path):
    """The data order of MLX's save_safetensors for a map filled in sorted order, as Ollama fills it."""
    mx = pytest.importorskip("mlx.core")
    rng = random.Random(5)
    for n in [*range(1, 32), 60, 130]:
        keys = sorted({"".join(rng.choices(string.ascii_lowercase + "._0123456789", k=rng.randint(1, 40)))
                       for _ in range(n)})  # fmt: skip
        mx.save_safetensors(str(tmp_path / "o.safetensors"), {k: mx.zeros((1,), dtype=mx.uint8) for k in keys})
        raw = (tmp_path / "o.safetensors").read_bytes()
        header = json.loads(raw[8 : 8 + struct.unpack("<Q", raw[:8])[0]])
        header.pop("__metadata__")
        assert sorted(header, key=lambda k: header[k]["data_offsets"][0]) == unordered_map_order(keys), n


@pytest.mark.needs_mlx
@pytest.mark.parametrize("quantize", ["int4", "int8", "nvfp4", "mxfp4", "mxfp8"])
def test_quantized_blobs_are_mlx_bytes(tmp_path, quantize):
    """Every quantized blob is the file MLX's save_safetensors writes for Ollama's arrays: the quantized
    weight, scales and biases of mx.quantize, the blob's metadata, keys inserted in sorted order; per-expert
    weights stacked first, and pre-stacked 3-D experts quantized along their last axis, in every type."""
    import mlx.core as mx

    rng = np.random.default_rng(7)
    bf = ml_dtypes.bfloat16
    tensors = {
        "model.layers.0.self_attn.q_proj.weight": rng.standard_normal((64, 128)).astype(bf),
        "model.layers.0.self_attn.v_proj.weight": rng.standard_normal((64, 128)).astype(bf),
        "model.layers.0.input_layernorm.weight": rng.standard_normal(128).astype(bf),
        "lm_head.weight": rng.standard_normal((32, 128)).astype(bf),
    }
    for e in range(2):
        tensors[f"model.layers.0.mlp.experts.{e}.up_proj.weight"] = rng.standard_normal((64, 128)).astype(bf)
        tensors[f"model.layers.0.mlp.experts.{e}.gate_proj.weight"] = rng.standard_normal((64, 128)).astype(bf)
    tensors["model.layers.1.mlp.experts.gate_up_proj"] = rng.standard_normal((2, 64, 128)).astype(bf)  # pre-stacked
    write_checkpoint(tmp_path / "ckpt", tensors)
    (tmp_path / "ckpt" / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    store = Store(tmp_path / "store")
    manifest = create_from_checkpoint(store, "q", tmp_path / "ckpt", quantize=quantize)
    specs = plan(read_inventory(tmp_path / "ckpt"), classify(read_inventory(tmp_path / "ckpt"), quantize))
    blobs = {layer.name: store.blob_path(layer.digest).read_bytes() for layer in manifest.layers_of("tensor")}
    checked = 0
    for spec in specs:
        if all(t.quantize is None for t in spec.tensors):
            continue
        arrays, md = {}, None
        for t in spec.tensors:
            w = np.stack([tensors[s.name] for s in t.sources]) if len(t.sources) > 1 else tensors[t.sources[0].name]
            w = mx.array(w.astype(np.float32)).astype(mx.bfloat16)
            q = t.quantize
            out = mx.quantize(w, group_size=q.group_size, bits=q.bits, mode=q.mode)
            arrays[t.name], arrays[f"{t.name}.scale"] = out[0], out[1]
            if q.mode == "affine":
                arrays[f"{t.name}.bias"] = out[2]
            md = {"group_size": str(q.group_size), "quant_type": q.value}
        mx.save_safetensors(str(tmp_path / "want.safetensors"), dict(sorted(arrays.items())), metadata=md)
        assert blobs[spec.name] == (tmp_path / "want.safetensors").read_bytes(), spec.name
        checked += 1
    assert checked == 5  # q_proj, v_proj (8-bit or not), lm_head, the experts' blob, the pre-stacked experts


GO_JSON = json.loads((Path(__file__).parents[1] / "data" / "ollama_go_json.json").read_text())


@pytest.mark.parametrize("case", GO_JSON["headers"])
def test_go_packed_header_is_encoding_json(case):
    """The header of a blob made without MLX is Go's json.Marshal of x/safetensors' map, padded to 8 bytes
    (recorded by tests/data/make_ollama_go_json.go)."""
    tensors = [BlobTensor(t["name"], t["dtype"], tuple(t["shape"]), bytes(t["size"])) for t in case["tensors"]]
    header = go_packed_header(tensors, case["metadata"])
    want = case["header"].encode()
    want += b" " * (-len(want) % 8)
    assert header == struct.pack("<Q", len(want)) + want


def test_config_blob_and_layers_as_ollama_create(tmp_path):
    """x/create/client's manifest writer: ConfigV2 with requires 0.19.0, parser/renderer/capabilities by
    architecture; tensor layers then every .json file but the index, sorted."""
    folder = tmp_path / "ckpt"
    write_checkpoint(folder, {"model.layers.0.mlp.up_proj.weight": np.ones((64, 64), ml_dtypes.bfloat16)})
    (folder / "config.json").write_text(json.dumps({"architectures": ["Qwen3_5ForCausalLM"], "vision_config": {}}))
    (folder / "tokenizer_config.json").write_text("{}")
    store = Store(tmp_path / "store")
    manifest = create_from_checkpoint(store, "qwen", folder, quantize="int8")
    assert [layer.name for layer in manifest.layers] == [
        "model.layers.0.mlp.up_proj.weight", "config.json", "tokenizer_config.json"
    ]  # fmt: skip
    assert store.blob_path(manifest.config.digest).read_bytes() == GO_JSON["config_qwen35_int8"].encode()


BAD = {
    "malformed quantization config": (
        {"a.weight": np.zeros((64, 64), np.float32)}, {"quantization_config": {"bits": "four"}}, None,
        "quantization_config.bits"),
    "FP8 scale of the wrong shape": (
        {"a.weight": np.zeros((256, 128), ml_dtypes.float8_e4m3fn), "a.weight_scale_inv": np.ones((3, 3), np.float32)},
        {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}, None, "FP8 scale shape"),
    "FP8 of another block size": (
        {"a.weight": np.zeros((256, 128), ml_dtypes.float8_e4m3fn), "a.weight_scale_inv": np.ones((4, 2), np.float32)},
        {"quantization_config": {"quant_method": "fp8", "weight_block_size": [64, 64]}}, None, "64x64"),
    "E5M2 weights": ({"a.weight": np.zeros((64, 64), ml_dtypes.float8_e5m2)}, {}, None, "F8_E5M2"),
    "unknown quantization": ({"a.weight": np.zeros((64, 64), np.float32)}, {}, "q3", "unknown quantization"),
    "experts of different shapes": (
        {"model.layers.0.mlp.experts.0.up_proj.weight": np.zeros((64, 64), np.float32),
         "model.layers.0.mlp.experts.1.up_proj.weight": np.zeros((32, 64), np.float32)}, {}, None, "expert group"),
}  # fmt: skip


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_input_is_one_error_and_the_store_unchanged(tmp_path, case):
    tensors, config, quantize, message = BAD[case]
    write_checkpoint(tmp_path / "ckpt", tensors)
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config))
    store = Store(tmp_path / "store")
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "store").rglob("*"))
    with pytest.raises((FormatError, UnsupportedError), match=message):
        create_from_checkpoint(store, "bad", tmp_path / "ckpt", quantize=quantize)
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "store").rglob("*")) == before


ARCHS = json.loads((Path(__file__).parents[1] / "data" / "ollama_import_archs.json").read_text())
ARCH_KEYS = [k for k in ARCHS if k != "transformers"]
OTHER_MODALITIES = ("vision", "visual", "audio_tower", "embed_audio", "mlp1.", "sound_")
ROUTING_GATES = (".mlp.gate.weight", ".mixer.gate.weight")
DTYPES = {"bfloat16": "BF16", "float32": "F32", "float16": "F16", "int64": "I64"}


@pytest.mark.parametrize("quantize", ["int4", "nvfp4", "mxfp8"])
@pytest.mark.parametrize("arch", ARCH_KEYS)
def test_registered_architectures_plan_as_ollama(arch, quantize):
    """The checkpoint transformers 5.25 saves for each registered class (tests/data/make_ollama_import_archs.py),
    planned: the registry's policy decides every tensor; each tensor lands in one blob, per-expert ones stacked
    per projection; vision and audio towers and routing gates stay at source precision."""
    from weightkit.ollama.import_plan import Inventory

    rec = ARCHS[arch]
    tensors = {n: SourceTensor(n, DTYPES[d], tuple(s), "model.safetensors") for n, (d, s) in rec["tensors"].items()}
    inv = Inventory(Path("ckpt"), rec["config"], tensors)
    assert inv.architecture == arch and arch in IMPORT_POLICIES
    specs = plan(inv, classify(inv, quantize))
    policy = import_policy(arch, rec["config"])
    covered = [s.name for spec in specs for t in spec.tensors for s in t.sources]
    assert sorted(covered) == sorted(tensors)
    for spec in specs:
        for t in spec.tensors:
            assert t.quantize == policy(t.name, t.out_shape or t.sources[0].shape, Q(quantize))
            if len(t.sources) > 1:
                assert t.transform == "stack_experts" and t.out_shape[0] == len(t.sources)
            if any(m in t.name for m in OTHER_MODALITIES) or t.name.endswith(ROUTING_GATES):
                assert t.quantize is None, t.name
    assert any(t.quantize is not None for spec in specs for t in spec.tensors)


# nemotron_h_test.go's TestNemotronHImportTransformQuantizationPolicy rows, for the tiny checkpoints' 4 layers
# (useMoreBits promotes layers 2 and 3): what nvfp4 makes of each kind of tensor, VL V2 being "M*E-", omni "ME*M"
_LM = "language_model.backbone.layers."
_NEMOTRON_SHARED = {
    _LM + "0.mixer.in_proj.weight": Q.NVFP4,  # mamba in_proj nvfp4
    _LM + "0.mixer.out_proj.weight": Q.NVFP4,  # middle dense down_proj stays nvfp4 (layer 0 of 4 not promoted)
    _LM + "0.mixer.conv1d.weight": None,  # conv kept bf16
    "language_model.backbone.embeddings.weight": Q.MXFP8,  # embedding promoted to mxfp8 from nvfp4
    "language_model.lm_head.weight": Q.MXFP8,  # lm head promoted to mxfp8
    "vision_model.radio_model.model.blocks.0.attn.qkv.weight": None,  # vision kept bf16
    "mlp1.1.weight": None,  # vision projector kept bf16
    "sound_encoder.encoder.layers.0.self_attn.q_proj.weight": None,  # sound encoder kept bf16
    "sound_projection.linear1.weight": None,  # sound projector kept bf16
}  # fmt: skip
NEMOTRON_NVFP4 = {
    "NemotronH_Nano_VL_V2": {
        **_NEMOTRON_SHARED,
        _LM + "1.mixer.q_proj.weight": Q.MXFP8,  # attention ... promoted (on every layer)
        _LM + "1.mixer.o_proj.weight": Q.MXFP8,  # attention o_proj promoted
        _LM + "2.mixer.experts.up_proj.weight": Q.NVFP4,  # expert up_proj nvfp4
        _LM + "2.mixer.experts.down_proj.weight": Q.MXFP8,  # expert down_proj promoted
        _LM + "2.mixer.shared_experts.down_proj.weight": Q.MXFP8,  # shared expert down_proj promoted
        _LM + "2.mixer.gate.weight": None,  # router gate kept bf16
        _LM + "3.mixer.down_proj.weight": Q.MXFP8,  # late dense down_proj promoted
    },
    "NemotronH_Nano_Omni_Reasoning_V3": {
        **_NEMOTRON_SHARED,
        _LM + "1.mixer.experts.up_proj.weight": Q.NVFP4,  # expert up_proj nvfp4
        _LM + "1.mixer.experts.down_proj.weight": Q.NVFP4,  # (layer 1 not promoted: as the middle dense down_proj)
        _LM + "1.mixer.shared_experts.down_proj.weight": Q.NVFP4,
        _LM + "1.mixer.gate.weight": None,  # router gate kept bf16
        _LM + "2.mixer.v_proj.weight": Q.MXFP8,  # attention v_proj promoted
        _LM + "2.mixer.o_proj.weight": Q.MXFP8,  # attention o_proj promoted
        _LM + "3.mixer.out_proj.weight": Q.MXFP8,  # mamba out_proj promoted (a late layer)
    },
}  # fmt: skip


def test_nemotron_h_registration_and_plan_as_ollama():
    """nemotron_h_test.go: the layer count read from llm_config (52 layers: layer 16 stays nvfp4, 51 is
    promoted), and TestNemotronHPlanKeepsUnsupportedModalitiesAtSourcePrecision's plan."""
    config = {"architectures": ["NemotronH_Nano_Omni_Reasoning_V3"], "llm_config": {"num_hidden_layers": 52}}
    policy = import_policy("NemotronH_Nano_Omni_Reasoning_V3", config)
    down = "language_model.backbone.layers.{}.mixer.down_proj.weight"
    assert policy(down.format(16), (32, 32), Q.NVFP4) is Q.NVFP4
    assert policy(down.format(51), (32, 32), Q.NVFP4) is Q.MXFP8
    names = ["language_model.backbone.embeddings.weight", "language_model.backbone.layers.0.mixer.in_proj.weight",
             "vision_model.radio_model.model.patch_generator.proj.weight", "mlp1.0.weight",
             "sound_encoder.encoder.layers.0.self_attn.q_proj.weight", "sound_projection.adapter.weight"]  # fmt: skip
    specs = plan(_header_inventory(dict.fromkeys(names, "BF16"), config), Classification(SourceKind.FLOAT, Q.NVFP4))
    assert [s.name for s in specs] == sorted(names)
    assert all(s.tensors[0].quantize is None for s in specs if not s.name.startswith("language_model."))


@pytest.mark.needs_mlx
@pytest.mark.parametrize("arch", NEMOTRON_NVFP4)
def test_nemotron_h_remote_code_checkpoints_written_as_ollama(tmp_path, arch):
    """The remote-code Nemotron-H VL and omni classes (tests/data/make_ollama_import_archs.py), written from
    numpy at nvfp4: upstream's decisions for each kind of tensor, every blob as Ollama writes it (MLX's bytes for
    the quantized ones, experts stacked per projection; the rest copied with Go's header), towers unchanged, and
    the config blob's parser, renderer and capabilities."""
    import mlx.core as mx

    rng = np.random.default_rng(31)
    rec = ARCHS[arch]
    tensors = {n: (rng.standard_normal(s) if d != "int64" else np.array(7)).astype(ml_dtypes.bfloat16 if d ==
               "bfloat16" else d) for n, (d, s) in rec["tensors"].items()}  # fmt: skip
    write_checkpoint(tmp_path / "ckpt", tensors)
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(rec["config"]))
    store = Store(tmp_path / "store")
    manifest = create_from_checkpoint(store, "nemotron", tmp_path / "ckpt", quantize="nvfp4")
    inv = read_inventory(tmp_path / "ckpt")
    specs = plan(inv, classify(inv, "nvfp4"))
    blobs = {layer.name: store.blob_path(layer.digest).read_bytes() for layer in manifest.layers_of("tensor")}
    assert list(blobs) == [s.name for s in specs]
    planned = {t.name: t for s in specs for t in s.tensors}
    assert {n: planned[n].quantize for n in NEMOTRON_NVFP4[arch]} == NEMOTRON_NVFP4[arch]
    for spec in specs:
        arrays, md = {}, None
        for t in spec.tensors:
            w = np.stack([tensors[s.name] for s in t.sources]) if len(t.sources) > 1 else tensors[t.sources[0].name]
            if t.quantize is None:
                arrays[t.name] = w
                continue
            out = mx.quantize(mx.array(w.astype(np.float32)).astype(mx.bfloat16), group_size=t.quantize.group_size,
                              bits=t.quantize.bits, mode=t.quantize.mode)  # fmt: skip
            arrays[t.name], arrays[f"{t.name}.scale"] = out[0], out[1]
            md = {"group_size": str(t.quantize.group_size), "quant_type": t.quantize.value}
        if md is None:
            (name, a), dtype = next(iter(arrays.items())), inv.tensors[spec.tensors[0].sources[0].name].dtype
            assert blobs[spec.name] == _go_blob([(name, dtype, a.shape, a)], None), spec.name
            continue
        mx.save_safetensors(str(tmp_path / "want.safetensors"), dict(sorted(arrays.items())), metadata=md)
        assert blobs[spec.name] == (tmp_path / "want.safetensors").read_bytes(), spec.name
    (stacked,) = [t for n, t in planned.items() if n.endswith(".mixer.experts.up_proj.weight")]
    assert stacked.transform == "stack_experts" and stacked.out_shape == (4, 256, 512)
    # client/create_test.go's TestNemotronNanoOmniMetadataInference (no chat template)
    config = json.loads(store.blob_path(manifest.config.digest).read_bytes())
    assert (config["parser"], config["renderer"]) == ("nemotron-3-nano", "nemotron-3-nano")
    assert config["capabilities"] == ["completion", "vision", "audio", "tools", "thinking"]


@pytest.mark.needs_mlx
def test_block_fp8_blobs_are_mlx_bytes(tmp_path):
    """A block-FP8 checkpoint (blockfp8.go): each E4M3 weight decoded with its 128x128 scales as MLX decodes it
    (from_fp8, times the block's scale, back to bfloat16), then mxfp8 where the policy quantizes and kept in
    bfloat16 where it does not (the router); per-expert FP8 weights stacked first; scales not stored."""
    import mlx.core as mx

    rng = np.random.default_rng(11)

    def fp8(shape):
        return (rng.standard_normal(shape) * 2).astype(ml_dtypes.float8_e4m3fn)

    def scale(shape):
        return rng.uniform(0.001, 0.01, (-(-shape[0] // 128), -(-shape[1] // 128))).astype(np.float32)

    tensors = {"model.layers.0.self_attn.q_proj.weight": fp8((200, 160)),
               "model.layers.0.mlp.gate.weight": fp8((8, 64)),
               "model.norm.weight": np.ones(64, ml_dtypes.bfloat16)}  # fmt: skip
    for e in range(2):
        tensors[f"model.layers.0.mlp.experts.{e}.up_proj.weight"] = fp8((128, 256))
    for name in [n for n in tensors if n.endswith("proj.weight") or n.endswith("gate.weight")]:
        tensors[name + "_scale_inv"] = scale(tensors[name].shape)
    config = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    write_checkpoint(tmp_path / "ckpt", tensors)
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config))
    store = Store(tmp_path / "store")
    manifest = create_from_checkpoint(store, "fp8", tmp_path / "ckpt")
    blobs = {layer.name: store.blob_path(layer.digest).read_bytes() for layer in manifest.layers_of("tensor")}
    assert list(blobs) == ["model.layers.0.mlp.gate.weight", "model.layers.0.self_attn.q_proj.weight",
                           "model.norm.weight", "model.layers.0.mlp.experts"]  # fmt: skip

    def decoded(names):
        out = []
        for name in names:
            w = mx.from_fp8(mx.array(tensors[name].view(np.uint8)), dtype=mx.bfloat16)
            s = np.repeat(np.repeat(tensors[name + "_scale_inv"], 128, 0), 128, 1)[: w.shape[0], : w.shape[1]]
            out.append((w * mx.array(s)).astype(mx.bfloat16))
        return mx.stack(out) if len(out) > 1 else out[0]

    def saved(arrays, md):
        mx.save_safetensors(str(tmp_path / "want.safetensors"), dict(sorted(arrays.items())), metadata=md)
        return (tmp_path / "want.safetensors").read_bytes()

    mxfp8 = {"group_size": "32", "quant_type": "mxfp8"}
    gate = "model.layers.0.mlp.gate.weight"
    assert blobs[gate] == saved({gate: decoded([gate])}, None)
    q = "model.layers.0.self_attn.q_proj.weight"
    wq, sq = mx.quantize(decoded([q]), group_size=32, bits=8, mode="mxfp8")[:2]
    assert blobs[q] == saved({q: wq, q + ".scale": sq}, mxfp8)
    up = "model.layers.0.mlp.experts.up_proj.weight"
    wu, su = mx.quantize(decoded([f"model.layers.0.mlp.experts.{e}.up_proj.weight" for e in range(2)]), group_size=32,
                         bits=8, mode="mxfp8")[:2]  # fmt: skip
    assert blobs["model.layers.0.mlp.experts"] == saved({up: wu, up + ".scale": su}, mxfp8)
    assert json.loads(store.blob_path(manifest.config.digest).read_bytes())["file_type"] == "mxfp8"


@pytest.mark.needs_mlx
def test_mlx_quantized_source_copied_as_ollama(tmp_path):
    """An MLX-quantized checkpoint (prequant.go's "mlx" pattern): weight, scales and biases fused into one blob
    named by the weight (`.scales` -> `.scale`, `.biases` -> `.bias`), with the config's quant_type and
    group_size; other tensors copied; nothing quantized twice; the model reads back as MLX dequantizes it."""
    import mlx.core as mx

    from weightkit.ollama import open_store_model

    rng = np.random.default_rng(12)
    w = mx.array(rng.standard_normal((64, 128)).astype(np.float32)).astype(mx.bfloat16)
    packed, scales, biases = mx.quantize(w, group_size=64, bits=4, mode="affine")
    folder = tmp_path / "ckpt"
    folder.mkdir()
    norm = mx.ones((128,), dtype=mx.bfloat16)
    mx.save_safetensors(str(folder / "model.safetensors"), {"model.layers.0.mlp.up_proj.weight": packed,
                        "model.layers.0.mlp.up_proj.scales": scales, "model.layers.0.mlp.up_proj.biases": biases,
                        "model.norm.weight": norm})  # fmt: skip
    (folder / "config.json").write_text(json.dumps({"quantization": {"group_size": 64, "bits": 4, "mode": "affine"}}))
    store = Store(tmp_path / "store")
    manifest = create_from_checkpoint(store, "pre", folder)
    layers = {layer.name: store.blob_path(layer.digest).read_bytes() for layer in manifest.layers_of("tensor")}
    assert list(layers) == ["model.layers.0.mlp.up_proj.weight", "model.norm.weight"]
    assert json.loads(store.blob_path(manifest.config.digest).read_bytes())["file_type"] == "int4"
    with open_store_model("pre", store=store) as m:
        want = np.array(mx.dequantize(packed, scales, biases, group_size=64, bits=4).astype(mx.float32))
        assert np.array_equal(np.asarray(m.tensor("model.layers.0.mlp.up_proj.weight"), np.float32), want)
    with pytest.raises(UnsupportedError, match="quantized already"):
        create_from_checkpoint(store, "twice", folder, quantize="int8")


def _header_inventory(dtypes: dict[str, str], config: dict | None = None):
    """prequant_test.go's newInventory: every tensor [128, 128] of the given dtype."""
    from weightkit.ollama.import_plan import Inventory

    return Inventory(Path("ckpt"), config or {}, {n: SourceTensor(n, d, (128, 128), "m") for n, d in dtypes.items()})


def test_prequantized_plans_as_ollama():
    """prequant_test.go: MLX's weights fused with their config's metadata; ModelOpt's and compressed-tensors'
    NVFP4 weights repacked, their scales relabelled, the global scale kept or inverted, activation scales
    dropped, nvfp4 forced (group size 16 defaulted only for compressed-tensors)."""
    pre = Classification(SourceKind.PREQUANTIZED, None)
    inv = _header_inventory({"l.weight": "U32", "l.scales": "BF16", "l.biases": "BF16", "norm.weight": "BF16"},
                            {"quantization": {"bits": 4, "mode": "affine", "group_size": 32}})  # fmt: skip
    specs = plan(inv, pre)
    assert [s.name for s in specs] == ["l.weight", "norm.weight"]
    assert [(t.name, t.transform) for t in specs[0].tensors] == [
        ("l.weight", ""), ("l.weight.scale", ""), ("l.weight.bias", "")
    ]  # fmt: skip
    assert specs[0].metadata == {"quant_type": "int4", "group_size": "32"}
    for extra in ({}, {"l.input_scale": "F32", "l.input_global_scale": "F32"}):
        inv = _header_inventory({"l.weight": "U8", "l.weight_scale": "F8_E4M3", "l.weight_scale_2": "F32", **extra})
        (spec,) = plan(inv, pre)
        weight, scale, glob = spec.tensors
        assert (weight.transform, weight.out_dtype, weight.out_shape) == ("repack_fp4", "U32", (128, 32))
        assert (scale.transform, scale.out_dtype) == ("relabel_u8", "U8")
        assert (glob.name, glob.transform) == ("l.weight.global_scale", "scalar_f32")
        assert spec.metadata == {"quant_type": "nvfp4"}
    inv = _header_inventory({"l.weight_packed": "U8", "l.weight_scale": "F8_E4M3", "l.weight_global_scale": "F32",
                             "l.input_global_scale": "F32"})  # fmt: skip
    (spec,) = plan(inv, pre)
    assert spec.name == "l.weight" and spec.tensors[2].transform == "reciprocal_f32"
    assert spec.metadata == {"quant_type": "nvfp4", "group_size": "16"}


def test_compressed_tensors_nvfp4_blob_bytes(tmp_path):
    """A compressed-tensors NVFP4 weight written as Ollama writes it: Go's packed blob of the weight's bytes as
    U32 words, its E4M3 scales as U8, and the reciprocal of its global scale."""
    rng = np.random.default_rng(13)
    packed = rng.integers(0, 256, (64, 32), dtype=np.uint8)
    scales = rng.integers(0, 127, (64, 4), dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    write_checkpoint(tmp_path / "ckpt", {"l.weight_packed": packed, "l.weight_scale": scales,
                                         "l.weight_global_scale": np.array([4.0], np.float32),
                                         "l.input_global_scale": np.array([1.0], np.float32)})  # fmt: skip
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    store = Store(tmp_path / "store")
    manifest = create_from_checkpoint(store, "nv", tmp_path / "ckpt")
    (layer,) = manifest.layers_of("tensor")
    tensors = [BlobTensor("l.weight", "U32", (64, 8), packed.tobytes()),
               BlobTensor("l.weight.scale", "U8", (64, 4), scales.tobytes()),
               BlobTensor("l.weight.global_scale", "F32", (1,), np.float32(0.25).tobytes())]  # fmt: skip
    want = go_packed_header(tensors, {"quant_type": "nvfp4", "group_size": "16"}) + b"".join(t.data for t in tensors)
    assert (layer.name, store.blob_path(layer.digest).read_bytes()) == ("l.weight", want)
    assert json.loads(store.blob_path(manifest.config.digest).read_bytes())["file_type"] == "nvfp4"
    mx = pytest.importorskip("mlx.core")  # read back as x/mlxrunner's Dequantize: MLX's, times the global scale
    from weightkit.ollama import open_store_model

    words, codes = mx.array(packed.view(np.uint32)), mx.array(scales.view(np.uint8))
    want = mx.dequantize(words, codes, group_size=16, bits=4, mode="nvfp4")
    want = np.array((want * mx.array(np.float32(0.25))).astype(want.dtype).astype(mx.float32))
    with open_store_model("nv", store=store) as m:
        assert list(m.tensors) == ["l.weight"]
        assert np.array_equal(np.asarray(m.tensor("l.weight"), np.float32), want)


# What NVIDIA's ModelOpt writes beside an NVFP4 export: config.json's quantization_config and the
# hf_quant_config.json sidecar (no `bits`, so no quant metadata comes from the config).
MODELOPT_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "NVFP4", "producer": {"name": "modelopt", "version": "0.29.0"},
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"dynamic": False, "num_bits": 4,
                                      "type": "float", "group_size": 16}}},
        "ignore": ["lm_head"],
    },
}  # fmt: skip


def _modelopt_weight(rng, rows: int, cols: int, stack: int = 0) -> dict[str, np.ndarray]:
    """One ModelOpt NVFP4 linear: two FP4 codes a byte, an E4M3 scale per 16 values, the per-tensor second-level
    scale (`weight_scale_2`, a 0-d F32) and the activation scale Ollama drops."""
    lead = (stack,) if stack else ()
    return {
        "weight": rng.integers(0, 256, (*lead, rows, cols // 2), dtype=np.uint8),
        "weight_scale": rng.integers(0, 127, (*lead, rows, cols // 16), dtype=np.uint8).view(ml_dtypes.float8_e4m3fn),
        "weight_scale_2": np.array(rng.uniform(0.001, 0.01), np.float32),
        "input_scale": np.array(0.5, np.float32),
    }


def _modelopt_import(folder: Path, store: Store, tensors: dict) -> dict[str, bytes]:
    write_checkpoint(folder, tensors)
    (folder / "config.json").write_text(json.dumps(MODELOPT_CONFIG))
    sidecar = {"quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}}
    (folder / "hf_quant_config.json").write_text(json.dumps(sidecar))
    manifest = create_from_checkpoint(store, folder.name, folder)
    assert [layer.name for layer in manifest.layers_of("json")] == ["config.json", "hf_quant_config.json"]
    assert json.loads(store.blob_path(manifest.config.digest).read_bytes())["file_type"] == "nvfp4"
    return {layer.name: store.blob_path(layer.digest).read_bytes() for layer in manifest.layers_of("tensor")}


def _go_blob(items: list[tuple[str, str, tuple[int, ...], np.ndarray]], md: dict | None) -> bytes:
    ts = [BlobTensor(n, d, s, np.ascontiguousarray(a).tobytes()) for n, d, s, a in items]
    return go_packed_header(ts, md) + b"".join(t.data for t in ts)


def _modelopt_blob(tensors: dict, base: str) -> bytes:
    w, s, g = (tensors[f"{base}.{k}"] for k in ("weight", "weight_scale", "weight_scale_2"))
    out = f"{base}.weight"
    words = ("U32", (*w.shape[:-1], w.shape[-1] // 4)) if w.ndim == 2 else ("U8", w.shape)
    return _go_blob([(out, *words, w), (f"{out}.scale", "U8", s.shape, s), (f"{out}.global_scale", "F32", (), g)],
                    {"quant_type": "nvfp4"})  # fmt: skip


def test_modelopt_nvfp4_blob_bytes(tmp_path):
    """A ModelOpt NVFP4 checkpoint (prequant.go's "modelopt-nvfp4" row) written as Ollama writes it: one Go
    packed blob per weight, the FP4 bytes relabelled U32 words (a 2-D weight's last axis over 4; a 3-D
    pre-stacked one kept U8, as Ollama keeps it), the E4M3 scales relabelled U8, `weight_scale_2` stored as it is
    as the global scale, the activation scale dropped, metadata nvfp4 with no group size; per-expert weights not
    stacked; the other tensors copied; both .json files kept; read back as MLX's dequantization times the global
    scale."""
    rng = np.random.default_rng(14)
    linears = {"model.layers.0.self_attn.q_proj": (64, 128), "model.layers.0.mlp.experts.0.up_proj": (32, 64),
               "model.layers.0.mlp.experts.1.up_proj": (32, 64)}  # fmt: skip
    tensors = {f"{base}.{k}": v for base, shape in linears.items() for k, v in _modelopt_weight(rng, *shape).items()}
    for name, shape in (("lm_head.weight", (32, 128)), ("model.norm.weight", (128,))):
        tensors[name] = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    store = Store(tmp_path / "store")
    blobs = _modelopt_import(tmp_path / "modelopt", store, tensors)
    assert list(blobs) == ["lm_head.weight", *(f"{b}.weight" for b in sorted(linears)), "model.norm.weight"]
    for base in linears:
        assert blobs[f"{base}.weight"] == _modelopt_blob(tensors, base), base
    for name in ("lm_head.weight", "model.norm.weight"):
        assert blobs[name] == _go_blob([(name, "BF16", tensors[name].shape, tensors[name])], None)
    stacked_base = "model.layers.1.mlp.experts.down_proj"
    stacked = {f"{stacked_base}.{k}": v for k, v in _modelopt_weight(rng, 32, 64, 2).items()}
    blobs = _modelopt_import(tmp_path / "stacked", store, stacked)
    assert list(blobs) == ["model.layers.1.mlp.experts.down_proj.weight"]
    assert blobs["model.layers.1.mlp.experts.down_proj.weight"] == _modelopt_blob(stacked, stacked_base)
    mx = pytest.importorskip("mlx.core")
    from weightkit.ollama import open_store_model

    q = "model.layers.0.self_attn.q_proj"
    words, codes = (
        mx.array(tensors[f"{q}.weight"].view(np.uint32)),
        mx.array(tensors[f"{q}.weight_scale"].view(np.uint8)),
    )
    want = mx.dequantize(words, codes, group_size=16, bits=4, mode="nvfp4")
    want = np.array((want * mx.array(tensors[f"{q}.weight_scale_2"])).astype(want.dtype).astype(mx.float32))
    with open_store_model("modelopt", store=store) as m:
        assert np.array_equal(np.asarray(m.tensor(f"{q}.weight"), np.float32), want)


MODELOPT_BAD = {  # (the tensors changed, config.json, the message): Ollama refuses these too
    "a global scale not F32": ({"l.weight_scale_2": np.array(0.5, ml_dtypes.bfloat16)}, {}, "must be F32"),
    "a global scale of two values": ({"l.weight_scale_2": np.ones(2, np.float32)}, {}, "one value"),
    # ModelOpt's FP8 (per-tensor E4M3 weights, quant_algo FP8) is read as block-FP8, which needs a block size
    "ModelOpt FP8": ({"l.weight": np.zeros((64, 64), ml_dtypes.float8_e4m3fn),
                      "l.weight_scale": np.array(0.5, np.float32)},
                     {"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}}, "weight_block_size"),
}  # fmt: skip


@pytest.mark.parametrize("case", MODELOPT_BAD, ids=list(MODELOPT_BAD))
def test_modelopt_bad_input_is_refused_and_the_store_unchanged(tmp_path, case):
    changed, config, message = MODELOPT_BAD[case]
    tensors = {f"l.{k}": v for k, v in _modelopt_weight(np.random.default_rng(15), 64, 64).items()}
    tensors["a.weight"] = np.ones((64, 64), ml_dtypes.bfloat16)  # a blob that would come first
    tensors.update(changed)
    write_checkpoint(tmp_path / "ckpt", tensors)
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config))
    store = Store(tmp_path / "store")
    with pytest.raises((FormatError, UnsupportedError), match=message):
        create_from_checkpoint(store, "bad", tmp_path / "ckpt")
    assert not [p for p in (tmp_path / "store").rglob("*") if p.is_file() and p.parent.name != ".weightkit"]


FP8_128 = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
MLX_INT4 = {"quantization": {"bits": 4, "mode": "affine", "group_size": 32}}
CLASSIFY = {  # classify_test.go's TestClassify: (config, tensors, requested, kind, quantization)
    "float, no quantize": ({}, {"model.embed.weight": "BF16", "model.layers.0.weight": "BF16"}, "", "float", None),
    "float, quantize int4": ({}, {"model.layers.0.weight": "BF16"}, "int4", "float", "int4"),
    "float, quantize alias fp8 resolves to int8": ({}, {"model.layers.0.weight": "F32"}, "fp8", "float", "int8"),
    "mlx prequantized (.scales)": (
        MLX_INT4, {"model.layers.0.weight": "U32", "model.layers.0.scales": "BF16"}, "", "prequantized", "int4"),
    "mlx prequantized without quantization metadata": (
        {}, {"model.layers.0.weight": "U32", "model.layers.0.scales": "BF16"}, "", "prequantized", None),
    "modelopt nvfp4 without config sidecar": (
        {}, {"model.layers.0.weight": "U8", "model.layers.0.weight_scale": "F8_E4M3"}, "", "prequantized", "nvfp4"),
    "compressed-tensors nvfp4 (.weight_packed)": ({}, {"model.layers.0.weight_packed": "U8",
                                                       "model.layers.0.weight_scale": "F8_E4M3"}, "", "prequantized",
                                                  "nvfp4"),
    "mixed prequantized formats have no single file type": (
        MLX_INT4, {"model.layers.0.weight": "U32", "model.layers.0.scales": "BF16",
                   "model.layers.1.weight_packed": "U8", "model.layers.1.weight_scale": "F8_E4M3"},
        "", "prequantized", None),
    "block-fp8 auto-converts to mxfp8": (
        FP8_128, {"model.layers.0.weight": "F8_E4M3", "model.layers.0.weight_scale_inv": "F32"}, "", "block-fp8",
        "mxfp8"),
}  # fmt: skip
CLASSIFY_ERRORS = {  # classify_test.go's TestClassifyErrors: (config, tensors, requested)
    "invalid quantize type": ({}, {"model.layers.0.weight": "BF16"}, "int3"),
    "mlx prequantized rejects requantize": (
        {}, {"model.layers.0.weight": "U32", "model.layers.0.scales": "BF16"}, "int4"),
    "modelopt nvfp4 rejects requantize": (
        {}, {"model.layers.0.weight": "U8", "model.layers.0.weight_scale": "F8_E4M3"}, "nvfp4"),
    "block-fp8 rejects quantize flag": (
        FP8_128, {"model.layers.0.weight": "F8_E4M3", "model.layers.0.weight_scale_inv": "F32"}, "nvfp4"),
    "block-fp8 missing block size": (
        {}, {"model.layers.0.weight": "F8_E4M3", "model.layers.0.weight_scale_inv": "F32"}, ""),
    "block-fp8 unsupported block size": (
        {"quantization_config": {"quant_method": "fp8", "weight_block_size": [64, 64]}},
        {"model.layers.0.weight": "F8_E4M3", "model.layers.0.weight_scale_inv": "F32"}, ""),
    "e5m2 fp8 unsupported": ({}, {"model.layers.0.weight": "F8_E5M2"}, ""),
}  # fmt: skip


@pytest.mark.parametrize("case", CLASSIFY, ids=list(CLASSIFY))
def test_classify_cases_of_ollama(case):
    config, dtypes, requested, kind, quantization = CLASSIFY[case]
    got = classify(_header_inventory(dtypes, config), requested)
    assert got == Classification(SourceKind(kind), _q(quantization or ""))


@pytest.mark.parametrize("case", CLASSIFY_ERRORS, ids=list(CLASSIFY_ERRORS))
def test_classify_errors_of_ollama(case):
    config, dtypes, requested = CLASSIFY_ERRORS[case]
    with pytest.raises(UnsupportedError):
        classify(_header_inventory(dtypes, config), requested)


def test_reading_the_folder_as_ollama(tmp_path):
    """inventory_test.go: the index's shards and only its tensors; without an index model*.safetensors only (a
    consolidated file skipped); refused: a shard the index names missing, a shard path leaving the folder, both
    model.safetensors and shards, a tensor in two shards, no weights."""
    from safetensors.numpy import save_file

    def folder(name: str, files: dict, index: dict | None = None) -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text("{}")
        for file, names in files.items():
            save_file({n: np.zeros((4, 4), np.float32) for n in names}, str(d / file))
        if index is not None:
            (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))
        return d

    inv = read_inventory(folder("indexed", {"layers-0.safetensors": ["model.layers.0.weight", "unindexed.weight"],
                                            "outside.safetensors": ["model.embed.weight"]},
                                {"model.layers.0.weight": "layers-0.safetensors",
                                 "model.embed.weight": "outside.safetensors"}))  # fmt: skip
    assert sorted(inv.tensors) == ["model.embed.weight", "model.layers.0.weight"]
    assert inv.tensors["model.layers.0.weight"].file == "layers-0.safetensors"
    consolidated = {"model.safetensors": ["model.layers.0.weight"],
                    "consolidated-00001-of-00001.safetensors": ["layers.0.weight"]}  # fmt: skip
    inv = read_inventory(folder("consolidated", consolidated))
    assert list(inv.tensors) == ["model.layers.0.weight"]
    refused = {
        "incomplete": folder("incomplete", {"model-00001-of-00002.safetensors": ["model.a.weight"]},
                             {"model.a.weight": "model-00001-of-00002.safetensors",
                              "model.b.weight": "model-00002-of-00002.safetensors"}),
        "invalid shard path": folder("unsafe", {}, {"model.weight": "../outside.safetensors"}),
        "ambiguous": folder("ambiguous", {"model.safetensors": ["a.weight"],
                                          "model-00001-of-00001.safetensors": ["b.weight"]}),
        "duplicate tensor": folder("duplicate", {"model-00001-of-00002.safetensors": ["a.weight"],
                                                 "model-00002-of-00002.safetensors": ["a.weight"]}),
        "no model weights": folder("none", {"consolidated.safetensors": ["a.weight"]}),
    }  # fmt: skip
    for message, path in refused.items():
        with pytest.raises(FormatError, match=message):
            read_inventory(path)


def _planned(dtypes, config=None, quantize=None, kind="float", shapes=None):
    inv = _header_inventory(dtypes, config)
    for name, shape in (shapes or {}).items():
        inv.tensors[name] = inv.tensors[name].__class__(name, dtypes[name], shape, "m")
    return plan(inv, Classification(SourceKind(kind), _q(quantize or "")), tensor_quantization)


def test_plan_cases_of_ollama():
    """plan_test.go: sorted one-tensor blobs; the generic rule's promotions; per-expert projections stacked
    (separate blobs when their types differ); pre-stacked experts left alone; clashing output names refused."""
    dense = {n: "BF16" for n in ("model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
                                 "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.v_proj.weight",
                                 "model.layers.0.mlp.down_proj.weight")}  # fmt: skip
    specs = _planned(dense)
    assert [s.name for s in specs] == sorted(dense) and all(s.tensors[0].quantize is None for s in specs)
    for quant, eight in (("nvfp4", "mxfp8"), ("mxfp4", "mxfp8"), ("int4", "int8")):
        got = {s.name: s.tensors[0].quantize for s in _planned(dense, quantize=quant)}
        assert got == {"model.embed_tokens.weight": None, "model.layers.0.input_layernorm.weight": None,
                       "model.layers.0.self_attn.q_proj.weight": Q(quant),
                       "model.layers.0.self_attn.v_proj.weight": Q(eight),
                       "model.layers.0.mlp.down_proj.weight": Q(eight)}  # fmt: skip
    experts = {f"model.layers.0.mlp.experts.{e}.{p}.weight": "BF16" for e in (0, 1) for p in ("gate_proj", "down_proj")}
    specs = _planned({**experts, "model.layers.0.mlp.gate.weight": "BF16",
                      "model.layers.0.input_layernorm.weight": "BF16"}, quantize="int4")  # fmt: skip
    by_name = {s.name: s for s in specs}
    assert "model.layers.0.mlp.experts" not in by_name
    assert {"model.layers.0.mlp.gate.weight", "model.layers.0.input_layernorm.weight"} <= set(by_name)
    (gate,) = by_name["model.layers.0.mlp.experts.gate_proj.weight"].tensors
    assert (gate.transform, gate.out_shape, gate.quantize) == ("stack_experts", (2, 128, 128), Q.INT4)
    assert [s.name for s in gate.sources] == [f"model.layers.0.mlp.experts.{e}.gate_proj.weight" for e in (0, 1)]
    assert by_name["model.layers.0.mlp.experts.down_proj.weight"].tensors[0].quantize is Q.INT8
    stacked = {
        "model.layers.0.mlp.experts.gate_up_proj.weight": (8, 256, 128),
        "model.layers.0.mlp.experts.down_proj.weight": (8, 128, 128),
        "model.layers.0.mlp.gate.weight": (8, 128),
    }
    specs = {s.name: s for s in _planned(dict.fromkeys(stacked, "BF16"), quantize="int4", shapes=stacked)}
    assert set(specs) == set(stacked)
    assert specs["model.layers.0.mlp.experts.gate_up_proj.weight"].tensors[0].quantize is Q.INT4
    assert specs["model.layers.0.mlp.experts.down_proj.weight"].tensors[0].quantize is Q.INT8
    mismatched = {
        "model.layers.0.mlp.experts.0.gate_proj.weight": (128, 128),
        "model.layers.0.mlp.experts.1.gate_proj.weight": (128, 64),
    }
    with pytest.raises(FormatError, match="expert group"):
        _planned(dict.fromkeys(mismatched, "BF16"), quantize="int4", shapes=mismatched)
    with pytest.raises(FormatError, match="clash"):
        _planned({"model.a.weight": "U32", "model.a.scales": "BF16", "model.a.weight_packed": "U8",
                  "model.a.weight_scale": "F8_E4M3"}, kind="prequantized")  # fmt: skip


def test_block_fp8_plans_as_ollama():
    """blockfp8_test.go (with scales that tile their weights, which weightkit checks when planning): FP8 weights
    decoded and quantized to mxfp8, their scales folded in; other tensors copied; a pre-stacked FP8 expert
    tensor decoded as one; per-expert FP8 weights stacked, the N weights then the N scales."""
    shapes = {"model.layers.0.self_attn.q_proj.weight": (256, 256),
              "model.layers.0.self_attn.q_proj.weight_scale_inv": (2, 2),
              "model.layers.0.mlp.down_proj.weight": (256, 256),
              "model.layers.0.mlp.down_proj.weight_scale_inv": (2, 2), "model.layers.0.input_layernorm.weight": (256,),
              "model.embed_tokens.weight": (256, 256), "lm_head.weight": (256, 256)}  # fmt: skip
    dtypes = {n: "F8_E4M3" if n.endswith("proj.weight") else "F32" if "scale" in n or "norm" in n else "BF16"
              for n in shapes}  # fmt: skip
    specs = {s.name: s for s in _planned(dtypes, quantize="mxfp8", kind="block-fp8", shapes=shapes)}
    assert set(specs) == {n for n in shapes if "scale" not in n}
    (q,) = specs["model.layers.0.self_attn.q_proj.weight"].tensors
    assert (q.transform, q.quantize, q.out_dtype) == ("decode_fp8", Q.MXFP8, "BF16")
    assert [s.name for s in q.sources] == ["model.layers.0.self_attn.q_proj.weight",
                                           "model.layers.0.self_attn.q_proj.weight_scale_inv"]  # fmt: skip
    for name in ("model.layers.0.input_layernorm.weight", "lm_head.weight"):
        (t,) = specs[name].tensors
        assert (t.transform, t.quantize, t.out_dtype) == ("", None, None)
    shapes = {
        "model.layers.0.mlp.experts.gate_up_proj.weight": (8, 512, 256),
        "model.layers.0.mlp.experts.gate_up_proj.weight_scale_inv": (8, 4, 2),
    }
    (spec,) = _planned({"model.layers.0.mlp.experts.gate_up_proj.weight": "F8_E4M3",
                        "model.layers.0.mlp.experts.gate_up_proj.weight_scale_inv": "F32"},
                       quantize="mxfp8", kind="block-fp8", shapes=shapes)  # fmt: skip
    assert (spec.tensors[0].transform, spec.tensors[0].quantize, spec.tensors[0].out_shape) == (
        "decode_fp8", Q.MXFP8, (8, 512, 256))  # fmt: skip
    names = [f"model.layers.0.mlp.experts.{e}.gate_proj.weight" for e in (0, 1)]
    shapes = {**dict.fromkeys(names, (256, 256)), **{n + "_scale": (2, 2) for n in names}}
    dtypes = {**dict.fromkeys(names, "F8_E4M3"), **{n + "_scale": "BF16" for n in names}}
    (spec,) = _planned(dtypes, quantize="mxfp8", kind="block-fp8", shapes=shapes)
    (t,) = spec.tensors
    assert spec.name == "model.layers.0.mlp.experts" and t.name == "model.layers.0.mlp.experts.gate_proj.weight"
    assert (t.transform, t.quantize, t.out_dtype, t.out_shape) == (
        "decode_stack_fp8",
        Q.MXFP8,
        "F8_E4M3",
        (2, 256, 256),
    )
    assert [s.name for s in t.sources] == [*names, *(n + "_scale" for n in names)]


def test_policy_config_read_as_ollama_reads_it(tmp_path):
    """gemma4_test.go's registration cases: the layer count from text_config, the model_type key, and a field of
    the wrong type refused (as Go's decoder refuses it), naming config.json; glimmer_test.go's plan keeps vision."""
    layers = {"text_config": {"num_hidden_layers": 48}}
    for config in ({"architectures": ["Gemma4UnifiedForConditionalGeneration"], **layers},
                   {"model_type": "gemma4_unified", **layers}):  # fmt: skip
        inv = _header_inventory({"model.layers.5.self_attn.v_proj.weight": "BF16"}, config)
        (spec,) = plan(inv, classify(inv, "int4"))
        assert spec.tensors[0].quantize is Q.INT8  # layer 5 of 48 takes more bits (5 < 48 // 8)
    inv = _header_inventory({"a.weight": "BF16"}, {"architectures": ["Gemma4UnifiedForConditionalGeneration"],
                                                   "num_hidden_layers": "oops"})  # fmt: skip
    with pytest.raises(FormatError, match=r"config\.json.*num_hidden_layers"):
        plan(inv, classify(inv, "int4"))
    names = ["model.language_model.layers.0.self_attn.q_proj.weight", "model.vision_tower.layers.0.attn.q_proj.weight",
             "model.vision_adapter.fc1.weight", "model.vision_projection.weight"]  # fmt: skip
    inv = _header_inventory(dict.fromkeys(names, "BF16"), {"architectures": ["MuseGlimmerForConditionalGeneration"],
                                                            "text_config": {"num_hidden_layers": 52}})  # fmt: skip
    got = {s.name: s.tensors[0].quantize for s in plan(inv, classify(inv, "nvfp4"))}
    assert got == {names[0]: Q.MXFP8, names[1]: None, names[2]: None, names[3]: None}
