"""Ollama's estimate for the real Gemma 3 270M (Q4_K_M) file, worked out by hand from its metadata.

gemma3: 18 layers, embedding E = 640, H = 4 heads, Hkv = 1 KV head, key and value length 256, sliding
window 512, vocabulary V = 262,144 tokens. Layers 5, 11 and 17 ((i + 1) % 6 == 0) are global and hold
the whole context; the other 15 slide over parallel * 512 + batch tokens.
"""

from __future__ import annotations

import pytest

import weightkit
from weightkit.memory.ollama.graph import graph_size, kv_cache_sizes, layer_sizes

GLOBAL = (5, 11, 17)


@pytest.fixture(scope="module")
def gemma(gemma_path):
    with weightkit.open(gemma_path) as m:
        yield m


def expected_kv(global_layer: int, sliding_layer: int) -> list[int]:
    return [global_layer if i in GLOBAL else sliding_layer for i in range(18)]


def test_gemma3_at_2048(gemma):
    # B = 512, C = 2048, f16
    global_kv = 2048 * (256 + 256) * 1 * 2  # 2_097_152
    sliding_kv = (1 * 512 + 512) * (256 + 256) * 1 * 2  # 1_048_576
    est = graph_size(gemma, 2048, 512, 1, "f16")
    assert list(est.kv) == expected_kv(2_097_152, 1_048_576) == expected_kv(global_kv, sliding_kv)
    assert est.kv_total == 3 * 2_097_152 + 15 * 1_048_576 == 22_020_096
    # full = max(4B(E+V), 4B(2 + C + CH + 2E + 2 Dk H))
    vocab_full = 4 * 512 * (640 + 262144)  # 538_181_632
    attn_full = 4 * 512 * (2 + 2048 + 2048 * 4 + 2 * 640 + 2 * 256 * 4)  # 2048 * 13_570 = 27_791_360
    assert est.full_offload == max(vocab_full, attn_full) == 538_181_632
    # partial = max(4EB + E*V*105/128 + 4VB, 4B(2E + 1 + 2 Dk H + C + CH) + 4 Dk C * 8 + E Dk H * 9/16)
    vocab_partial = 4 * 640 * 512 + 640 * 262144 * 105 // 128 + 4 * 262144 * 512
    assert vocab_partial == 1_310_720 + 137_625_600 + 536_870_912 == 675_807_232
    attn_partial = 4 * 512 * (1280 + 1 + 2048 + 2048 + 8192) + 4 * 256 * 2048 * 8 + 640 * 256 * 4 * 9 // 16
    assert attn_partial == 27_789_312 + 16_777_216 + 368_640
    assert est.partial_offload == 675_807_232


def test_gemma3_at_32k_with_two_sequences(gemma):
    # C = 32768 * 2 = 65536; sliding layers hold 2 * 512 + 512 = 1536 tokens
    est = graph_size(gemma, 32768, 512, 2, "f16")
    global_kv = 65536 * 512 * 1 * 2  # 67_108_864
    sliding_kv = 1536 * 512 * 1 * 2  # 1_572_864
    assert list(est.kv) == expected_kv(67_108_864, 1_572_864) == expected_kv(global_kv, sliding_kv)
    assert est.kv_total == 3 * 67_108_864 + 15 * 1_572_864 == 224_919_552
    # now the attention graphs beat the vocabulary ones
    attn_full = 4 * 512 * (2 + 65536 + 65536 * 4 + 1280 + 2048)
    assert attn_full == 2048 * 331_010 == 677_908_480
    assert est.full_offload == attn_full
    attn_partial = 4 * 512 * (1280 + 1 + 2048 + 65536 + 65536 * 4) + 4 * 256 * 65536 * 8 + 368_640
    assert attn_partial == 677_906_432 + 536_870_912 + 368_640 == 1_215_145_984
    assert est.partial_offload == attn_partial


def test_gemma3_kv_q8_0(gemma):
    # one byte per element: global 2048 * 512, sliding 1024 * 512
    assert kv_cache_sizes(gemma, 2048, 1, "q8_0") == expected_kv(1_048_576, 524_288)


def test_gemma3_layer_sizes(gemma):
    sizes = layer_sizes(gemma)
    # blk.0 by Ollama's type table (elements * bytes per block / block size)
    blk0 = (
        256 * 640 * 22 // 32  # attn_k, Q5_0: 112_640
        + 256 * 4  # attn_k_norm, F32
        + 640 * 4  # attn_norm
        + 640 * 1024 * 144 // 256  # attn_output, Q4_K: 368_640
        + 1024 * 640 * 22 // 32  # attn_q, Q5_0: 450_560
        + 256 * 4  # attn_q_norm
        + 256 * 640 * 34 // 32  # attn_v, Q8_0: 174_080
        + 640 * 2048 * 210 // 256  # ffn_down, Q6_K: 1_075_200
        + 2048 * 640 * 22 // 32  # ffn_gate, Q5_0: 901_120
        + 640 * 4  # ffn_norm
        + 2048 * 640 * 22 // 32  # ffn_up, Q5_0
        + 640 * 4  # post_attention_norm
        + 640 * 4  # post_ffw_norm
    )
    assert sizes.block(0) == blk0 == 3_995_648
    # no output.weight: the output layer is output_norm (F32) + token_embd (Q8_0)
    assert sizes.output == 640 * 4 + 262144 * 640 * 34 // 32 == 2_560 + 178_257_920
    # every group is the sum of its tensors' bytes in the file (all of its types are whole blocks)
    assert set(sizes.groups) == {f"blk.{i}" for i in range(18)} | {"output_norm", "token_embd"}
    for group, size in sizes.groups.items():
        prefix = group + "."
        assert size == sum(t.nbytes for n, t in gemma.tensors.items() if n.startswith(prefix)), group
