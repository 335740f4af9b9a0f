"""`weightkit estimate`: Ollama's settings resolution, and the command on the real Gemma file."""

from __future__ import annotations

import json

import pytest

import weightkit
from weightkit.cli.estimate import parse_gpu, parse_size
from weightkit.errors import ArgumentError, WeightkitError
from weightkit.memory import GPU, OllamaSettings, estimate
from weightkit.memory.ollama import default_context, graph_size, layer_sizes, resolve

GIB = 1 << 30


def test_sizes_and_gpus():
    assert parse_size("24GiB") == 24 * GIB and parse_size("16GB") == 16 * 10**9 and parse_size("512MiB") == 512 << 20
    assert parse_size("1.5GiB") == 3 * GIB // 2 and parse_size("1000") == 1000
    gpu = parse_gpu(1, "Metal:64GiB")
    assert (gpu.id, gpu.library, gpu.free, gpu.integrated) == ("1", "Metal", 64 * GIB, False)
    assert parse_gpu(0, "Vulkan:8GiB:integrated").integrated
    with pytest.raises(WeightkitError):
        parse_size("lots")
    with pytest.raises(WeightkitError):
        parse_gpu(0, "TPU:8GiB")


def test_default_context_follows_vram_tiers():
    assert default_context([], 0) == 4096
    assert default_context([GPU("0", "CUDA", 24 * GIB, total=24 * GIB)], 0) == 32768
    assert default_context([GPU("0", "CUDA", 24 * GIB, total=24 * GIB)], 2 * GIB) == 4096  # overhead counted
    assert default_context([GPU(str(i), "CUDA", 24 * GIB, total=24 * GIB) for i in range(2)], 0) == 262144


def test_settings_from_flags_environment_and_model(gemma_path):
    with weightkit.open(gemma_path) as m:
        env = {"OLLAMA_CONTEXT_LENGTH": "8192", "OLLAMA_NUM_PARALLEL": "2", "OLLAMA_KV_CACHE_TYPE": "q8_0"}
        s = resolve(m, [], OllamaSettings(environ=env))
        assert (s.context, s.parallel, s.kv_cache_type) == (8192, 2, "f16")  # q8_0 needs flash attention
        assert any("flash attention" in n for n in s.notes)
        s = resolve(m, [], OllamaSettings(environ={**env, "OLLAMA_FLASH_ATTENTION": "1"}))
        assert (s.kv_cache_type, s.flash_attention) == ("q8_0", True)
        s = resolve(m, [], OllamaSettings(context=1 << 20, batch=4096, parallel=1, environ=env))
        assert s.context == 32768 and s.batch == 4096  # capped at the trained context
        s = resolve(m, [], OllamaSettings(context=256, environ={}))
        assert (s.batch, s.parallel, s.kv_cache_type) == (256, 1, "f16")  # batch never above the context
        s = resolve(m, [], OllamaSettings(environ={"OLLAMA_KV_CACHE_TYPE": "q5_1"}))
        assert s.kv_cache_type == "f16" and any("q5_1" in n for n in s.notes)  # Ollama: unknown means f16


@pytest.mark.parametrize(
    ("options", "message"),
    [({"context": 0}, "context must be"), ({"batch": -1}, "batch must be"), ({"parallel": True}, "parallel must be"),
     ({"num_gpu": -2}, "num_gpu must be"), ({"kv_cache_type": "zz"}, "kv_cache_type 'zz'")],
)  # fmt: skip
def test_bad_settings_are_argument_errors(options, message):
    with pytest.raises(ArgumentError, match=message):
        OllamaSettings(**options)


def test_estimate_adds_up(gemma_path):
    with weightkit.open(gemma_path) as m:
        gpus = [GPU("0", "CUDA", 24 * GIB, total=24 * GIB)]
        est = estimate(m, OllamaSettings(context=8192, environ={}), gpus)
        g = graph_size(m, 8192)
        sizes = layer_sizes(m)
        assert est.graph == g and est.layout.fully_offloaded and est.gpu_share == 1.0
        on_gpu = est.layout.gpus[0]
        assert on_gpu.weights == sum(sizes.block(i) for i in range(18)) + sizes.output
        assert on_gpu.kv == g.kv_total and on_gpu.graph == g.full_offload
        assert est.layout.vram == on_gpu.weights + on_gpu.kv + on_gpu.graph and est.layout.ram == 0


@pytest.mark.slow
def test_command(gemma_path, weightkit_cli):
    def run(*args):
        return weightkit_cli("estimate", gemma_path, "--engine", "ollama", *args)

    r = run("--ctx", "2048,32768", "--gpu", "CUDA:24GiB", "--json")
    assert r.returncode == 0, r.stderr
    docs = json.loads(r.stdout)
    assert [d["context"] for d in docs] == [2048, 32768]
    assert all(d["layers_on_gpu"] == d["layers_total"] == 19 for d in docs)
    assert docs[1]["kv_cache"] > docs[0]["kv_cache"]
    table = run("--ctx", "4096", "--gpu", "24GiB", "--gpu", "8GiB", "--ram", "32GiB")
    assert table.returncode == 0 and "GPU 0 CUDA" in table.stdout and "VRAM total" in table.stdout
    assert "100%" in table.stdout
    cpu_only = json.loads(run("--ctx", "4096", "--json").stdout)[0]
    assert cpu_only["layers_on_gpu"] == 0 and cpu_only["vram"] == 0
    bad = run("--gpu", "lots")
    assert bad.returncode == 2 and "cannot read the size" in bad.stderr
