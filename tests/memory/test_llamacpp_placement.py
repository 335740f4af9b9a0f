"""Layer placement and weights per device: against llama.cpp itself on RPC devices (GPU-type devices backed by
the CPU backend), and worked by hand from llama.cpp's code for what only real GPUs do (CUDA's row padding).

`llama_model_base::load_tensors` (src/llama-model.cpp): the split points are the cumulative shares (the
`--tensor-split` values, or each GPU's free memory) divided by their sum, in float32; with n = n_gpu_layers
(-1: every layer and the output layer) and L = n_layer, layers from i_gpu_start = max(L + 1 - n, 0) on go to a
GPU, layer il to the first GPU whose split point is above float(il - i_gpu_start) / min(n, L + 1)
(`std::upper_bound`); layer L is the output layer. The token embeddings stay on the CPU (`LLM_TENSOR_LAYER_INPUT`).
Each buffer sums its tensors' allocation sizes rounded up to the buffer type's alignment
(`ggml_backend_alloc_ctx_tensors_from_buft`): 32 bytes on the CPU, 128 on CUDA, whose allocation pads a
quantized tensor's rows to 512 elements (`ggml_backend_cuda_buffer_type_get_alloc_size`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import weightkit
from weightkit.dtypes import GGMLType
from weightkit.errors import ArgumentError
from weightkit.memory import GPU
from weightkit.memory.llamacpp import LlamaCppSettings, estimate, place_layers, read_hparams
from weightkit.memory.llamacpp.placement import weights_per_device
from weightkit.model import TensorInfo

from ..scripts import load_script

GIB = 1 << 30
DATA = Path(__file__).parents[1] / "data"
MODELS = load_script(DATA / "memory_models.py")


@pytest.fixture(scope="module")
def hp(tmp_path_factory):
    """Llama 3.1 8B: 32 layers, so 33 with the output layer."""
    with weightkit.open(MODELS.write_model("llama-3.1-8b", tmp_path_factory.mktemp("m"))) as m:
        return read_hparams(m)


def cuda(free_gib: float) -> GPU:
    return GPU("0", "CUDA", int(free_gib * GIB))


def runs(placement) -> list[tuple[int, int, int]]:
    """(device, first layer, last layer) runs of the layers, the output layer (32) included."""
    out: list[tuple[int, int, int]] = []
    for il in range(len(placement.layers) + 1):
        device = placement.device_of(il)
        if out and out[-1][0] == device:
            out[-1] = (device, out[-1][1], il)
        else:
            out.append((device, il, il))
    return out


def test_split_by_free_memory(hp):
    # splits [24/32, 32/32] = [0.75, 1]; il/33 < 0.75 for il <= 24
    p = place_layers(hp, [cuda(24), cuda(8)])
    assert runs(p) == [(0, 0, 24), (1, 25, 32)] and p.offloaded == 33


def test_partial_offload_takes_the_last_layers(hp):
    # -ngl 10: i_gpu_start = 33 - 10 = 23, so layers 23..31 and the output layer
    p = place_layers(hp, [cuda(24)], n_gpu_layers=10)
    assert runs(p) == [(-1, 0, 22), (0, 23, 32)] and p.offloaded == 10
    # -ngl 32: everything but layer 0
    assert runs(place_layers(hp, [cuda(24)], n_gpu_layers=32)) == [(-1, 0, 0), (0, 1, 32)]
    assert runs(place_layers(hp, [cuda(24)], n_gpu_layers=0)) == [(-1, 0, 32)]
    assert runs(place_layers(hp, [], n_gpu_layers=-1)) == [(-1, 0, 32)]  # no GPU: act_gpu_layers = 0


def test_tensor_split_overrides_free_memory(hp):
    # -ts 1,3: splits [0.25, 1]; il/33 < 0.25 for il <= 8
    assert runs(place_layers(hp, [cuda(24), cuda(8)], tensor_split=(1, 3))) == [(0, 0, 8), (1, 9, 32)]
    # -ts 0,1: the first split point is 0, never above a position: all on the second GPU
    assert runs(place_layers(hp, [cuda(24), cuda(8)], tensor_split=(0, 1))) == [(1, 0, 32)]
    # -ts 1 with two GPUs: the missing share is 0
    assert runs(place_layers(hp, [cuda(24), cuda(8)], tensor_split=(1,))) == [(0, 0, 32)]


def test_partial_offload_splits_only_the_offloaded_layers(hp):
    # -ngl 20 over two equal GPUs: i_gpu_start 13, positions (il - 13)/20 against [0.5, 1]: 13..22 and 23..32
    assert runs(place_layers(hp, [cuda(8), cuda(8)], n_gpu_layers=20)) == [(-1, 0, 12), (0, 13, 22), (1, 23, 32)]


def test_split_mode_none_uses_the_main_gpu(hp):
    assert runs(place_layers(hp, [cuda(24), cuda(8)], split_mode="none", main_gpu=1)) == [(1, 0, 32)]
    assert runs(place_layers(hp, [cuda(24), cuda(8)], split_mode="none", main_gpu=-1)) == [(-1, 0, 32)]
    with pytest.raises(ArgumentError, match="--main-gpu 2: there are 2 GPUs"):
        place_layers(hp, [cuda(24), cuda(8)], split_mode="none", main_gpu=2)
    with pytest.raises(ArgumentError, match="--tensor-split has 3 parts for 2 GPUs"):
        place_layers(hp, [cuda(24), cuda(8)], tensor_split=(1, 1, 1))


def _info(name: str, dtype: GGMLType, shape: tuple[int, ...], nbytes: int) -> TensorInfo:
    return TensorInfo(name, dtype, shape, 0, nbytes, 0)


def test_weights_per_device_follow_their_layers(hp):
    tensors = {
        "token_embd.weight": _info("token_embd.weight", GGMLType.Q4_K, (128256, 4096), 128256 * 2304),
        "blk.0.attn_q.weight": _info("blk.0.attn_q.weight", GGMLType.Q4_0, (4096, 4096), 4096 * 2304),
        "blk.31.ffn_norm.weight": _info("blk.31.ffn_norm.weight", GGMLType.F32, (4100,), 4100 * 4),
        "output_norm.weight": _info("output_norm.weight", GGMLType.F32, (4096,), 4096 * 4),
        "output.weight": _info("output.weight", GGMLType.Q6_K, (128256, 4096), 128256 * 3360),
    }
    on_cpu = place_layers(hp, [cuda(24)], n_gpu_layers=0)
    total = 128256 * 2304 + 4096 * 2304 + 16416 + 4096 * 4 + 128256 * 3360  # 4100 floats: 16400 -> 16416
    assert weights_per_device(hp, tensors, on_cpu) == {-1: total}
    # -ngl 1: only the output layer (output_norm, output) on the GPU, 128-byte aligned
    out_only = place_layers(hp, [cuda(24)], n_gpu_layers=1)
    assert weights_per_device(hp, tensors, out_only) == {
        -1: 128256 * 2304 + 4096 * 2304 + 16416,
        0: 4096 * 4 + 128256 * 3360,
    }
    # all layers: layer 0's and 31's tensors too; the F32 norm's 16400 bytes round up to 16512
    everything = place_layers(hp, [cuda(24)])
    assert weights_per_device(hp, tensors, everything) == {
        -1: 128256 * 2304,
        0: 4096 * 2304 + 16512 + 4096 * 4 + 128256 * 3360,
    }


def test_cuda_pads_quantized_rows_to_512_elements(hp):
    # a Q4_0 matrix of 4128-element rows: 4128 % 512 = 32, so 480 elements (15 blocks of 18 bytes) are added
    ragged = _info("blk.5.ffn_down.weight", GGMLType.Q4_0, (4096, 4128), 4096 * 4128 // 32 * 18)
    everything = place_layers(hp, [cuda(24)])
    padded = 4096 * 4128 // 32 * 18 + 480 // 32 * 18
    assert weights_per_device(hp, {ragged.name: ragged}, everything) == {0: -(-padded // 128) * 128}
    metal = place_layers(hp, [GPU("0", "Metal", 24 * GIB)])
    assert weights_per_device(hp, {ragged.name: ragged}, metal) == {0: 4096 * 4128 // 32 * 18}


def test_a_tied_output_is_copied_to_the_output_layers_gpu(hp):
    embd = _info("token_embd.weight", GGMLType.Q4_K, (128256, 4096), 128256 * 2304)
    tensors = {embd.name: embd}
    assert weights_per_device(hp, tensors, place_layers(hp, [cuda(24)])) == {-1: embd.nbytes, 0: embd.nbytes}
    assert weights_per_device(hp, tensors, place_layers(hp, [cuda(24)], n_gpu_layers=0)) == {-1: embd.nbytes}


DEVICES = json.loads((DATA / "llama_devices.json").read_text())


@pytest.fixture(scope="module")
def device_model(tmp_path_factory, gemma_path):
    folder = tmp_path_factory.mktemp("skeletons")
    return lambda name: gemma_path if name == "gemma-3-270m" else MODELS.write_model(name, folder)


@pytest.mark.parametrize("name", sorted(DEVICES))
def test_matches_llama_cpp_on_several_devices(device_model, name):
    """What libllama put on RPC devices (GPU-type devices backed by the CPU backend: tools/llama_devices_oracle.py,
    recorded by tests/data/make_llama_devices.py): each layer's device, and each device's weights, KV cache,
    compute buffer and planned compute buffer, byte for byte."""
    wrong = []
    with weightkit.open(device_model(name)) as m:
        for case in DEVICES[name]:
            settings = LlamaCppSettings(**case["settings"])
            gpus = [GPU(str(i), "RPC", free) for i, free in enumerate(case["free"])]
            real, planned = estimate(m, settings, gpus), estimate(m, settings, gpus, planned=True)
            got = {
                "layers": [real.placement.device_of(il) for il in range(len(case["layers"]))],
                "devices": [{"weights": d.weights, "kv": d.kv, "compute": d.compute, "planned": p.compute}
                            for d, p in zip(real.devices, planned.devices, strict=True)],
            }  # fmt: skip
            if got != {"layers": case["layers"], "devices": case["devices"]}:
                wrong.append((case["settings"], got, case))
    assert not wrong, wrong[0]


#: what each recorded model stands for in the placement over devices: how its layers, caches and graph split
COVERS = {
    "llama-3.1-8b": "dense decoder, rope frequencies in every layer's buffer",
    "llama-3.1-70b": "dense decoder of 80 layers",
    "mistral-nemo-12b": "dense decoder, head size apart from the width",
    "qwen2.5-7b": "Q/K/V biases",
    "qwen3-8b": "Q/K norms",
    "phi-4": "fused QKV",
    "gemma-2-9b": "sliding window every other layer, soft-caps",
    "gemma-3-12b": "sliding window five layers in six",
    "gemma-3-270m": "a real GGUF (tied output)",
    "all-minilm-l6-v2": "encoder: token-type and position embeddings on the CPU, the embedding norm on layer 0",
    "cohere2-32-layers": "sliding window, parallel attention and FFN",
    "gemma3n-default": "per-layer inputs, AltUp on the output layer, layers reusing another's KV cache",
    "gemma4-26b-a4b": "experts beside a dense FFN, rope frequencies only in the full-attention layers",
    "qwen3-30b-a3b": "experts (--cpu-moe, --n-cpu-moe, -ot)",
    "gpt-oss-20b": "experts with biases, attention sinks",
    "deepseek-v2-lite": "MLA, dense-first experts",
    "mistral4-default": "MLA with experts",
    "llama4-default": "chunked attention, interleaved experts",
    "qwen3_5_moe-default": "gated delta net hybrid with experts",
    "granite-4.0-h-tiny": "Mamba-2 hybrid with experts",
    "falcon_h1-0.5b": "Mamba-2 beside attention in every layer (flash attention auto off with the cache on the CPU)",
    "lfm2-1.2b": "short-convolution hybrid, its final norm token_embd_norm on the output layer",
    "nemotron_h-nano-9b-v2": "Mamba-2, attention and FFN-only layers",
    "kimi_linear-48b-a3b": "KDA hybrid with rope-less MLA and experts",
    "deepseek_v32-12-layers-64-experts": "sparse attention's indexer cache, a NextN layer skipped but its expert bias",
    "qwen3_vl-4b": "M-RoPE and deepstack inputs, tied output",
    "glm-4.5-air": "dense-first experts, a NextN layer skipped",
    "hunyuan_v1_moe-a13b": "experts with a shared expert in every layer",
    "mamba-2.8b": "recurrent state only (Mamba)",
    "mamba2-2.7b": "recurrent state only (Mamba-2)",
    "rwkv6-finch-1.6b": "RWKV-6 token shifts and WKV state",
    "rwkv7-goose-1.5b": "RWKV-7",
}


def test_the_device_record_covers_placements():
    cases = [c for record in DEVICES.values() for c in record]
    assert set(DEVICES) == set(COVERS) and len(cases) >= 100
    kinds = {key for c in cases for key in c["settings"]}
    assert {"tensor_split", "split_mode", "n_gpu_layers", "no_kv_offload", "cpu_moe", "n_cpu_moe",
            "override_tensor", "flash_attn"} <= kinds  # fmt: skip
    assert any(len(c["free"]) == 3 for c in cases)
    assert any(-1 in c["layers"] and max(c["layers"]) == 1 for c in cases)  # CPU and both GPUs
    assert any(d["compute"] != d["planned"] for c in cases for d in c["devices"])  # pinned norms, pipelines


def test_flash_attention_auto_resolves_off_where_llama_cpp_turns_it_off(device_model):
    """falcon_h1-0.5b with -nkvo: llama.cpp logs "layer 0 is assigned to device RPC0 but Flash Attention is assigned
    to device CPU" and turns it off (the recorded compute buffers are those of the graphs without it)."""
    gpus = [GPU("0", "RPC", 24 * GIB), GPU("1", "RPC", 8 * GIB)]
    with weightkit.open(device_model("falcon_h1-0.5b")) as m:
        off = estimate(m, LlamaCppSettings(ctx_size=8192, parallel=1, no_kv_offload=True), gpus)
        on = estimate(m, LlamaCppSettings(ctx_size=8192, parallel=1), gpus)
    assert not off.context.flash_attn and any("auto resolves to off" in n for n in off.notes)
    assert on.context.flash_attn and any("auto resolves to on" in n for n in on.notes)
