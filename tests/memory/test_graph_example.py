"""The spec's worked example (ollama-memory-estimation.md): Command-R 35B at 32K context on a 24 GB GPU.

The model is Command-R 08-2024 (35B): 40 layers, embedding 8192, 64 heads, 8 KV heads, a 256,000-token
vocabulary. The spec's table gives KV 4.88 and graph (partial) 5.01 "GB"; those are bytes in units of
2**40 / 1000 (GiB times 1000/1024): 5 GiB of KV is 4.88, and the 5,507,123,200-byte graph is 5.01.
"""

from __future__ import annotations

import time

import weightkit
from weightkit.memory.ollama.graph import graph_size, kv_cache_sizes, layer_sizes

from .test_graph import u32s, write_model

COMMAND_R = {
    "block_count": 40, "embedding_length": 8192, "attention.head_count": 64, "attention.head_count_kv": 8,
    "context_length": 131072,
}  # fmt: skip


def test_command_r_35b_at_32k(tmp_path):
    path = write_model(tmp_path / "command-r.gguf", "command-r", COMMAND_R, vocab=256000)
    with weightkit.open(path) as m:
        est = graph_size(m, 32768, 512, 1, "f16", False)
    # KV per layer: C * (Dk + Dv) * Hkv * 2 bytes, Dk = Dv = 8192 / 64 = 128
    per_layer = 32768 * (128 + 128) * 8 * 2
    assert per_layer == 134_217_728  # 128 MiB
    assert est.kv == (per_layer,) * 40
    assert est.kv_total == 40 * per_layer == 5_368_709_120  # 5 GiB
    # full = max(4B(E+V), 4B(2 + 4E + C(1+H)))
    full = max(4 * 512 * (8192 + 256000), 4 * 512 * (2 + 4 * 8192 + 32768 * (1 + 64)))
    assert full == 2048 * 2_162_690 == 4_429_189_120
    # partial = max(4B(E+V) + E*V*105/128, 4B(1 + 2E + C(1+H)) + 4EC + E*E*9/16)
    logits = 4 * 512 * (8192 + 256000) + 8192 * 256000 * 105 // 128
    attention = 4 * 512 * (1 + 2 * 8192 + 32768 * 65) + 4 * 8192 * 32768 + 8192 * 8192 * 9 // 16
    assert logits == 541_065_216 + 1_720_320_000
    assert attention == 4_395_632_640 + 1_073_741_824 + 37_748_736 == 5_507_123_200
    assert (est.full_offload, est.partial_offload) == (full, attention)

    # the spec's table
    unit = 2**40 / 1000
    kv_gb, graph_gb = round(est.kv_total / unit, 2), round(est.partial_offload / unit, 2)
    assert (kv_gb, graph_gb) == (4.88, 5.01)
    vram, buffer, weights = 24, 0.5, 19
    available = round(vram - kv_gb - graph_gb - buffer, 2)
    assert available == 13.61
    assert round(100 * available / weights, 1) == 71.6


def test_speed_with_many_layers_and_a_large_vocabulary(tmp_path):
    kv = {**COMMAND_R, "block_count": 128, "attention.head_count_kv": u32s([8, 16] * 64)}
    path = write_model(tmp_path / "big.gguf", "llama", kv, vocab=262144)
    with weightkit.open(path) as m:
        start = time.perf_counter()
        est = graph_size(m, 32768)
        sizes = kv_cache_sizes(m, 32768)
        layer_sizes(m)
        elapsed = time.perf_counter() - start
    assert est.kv == tuple(sizes) == (32768 * 256 * 8 * 2, 32768 * 256 * 16 * 2) * 64
    assert elapsed < 0.25, elapsed
