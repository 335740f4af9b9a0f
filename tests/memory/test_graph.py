"""Ollama's GraphSize, architecture by architecture, on tiny GGUF files made with weightkit's writer.

Every expected number is worked out by hand below from Ollama's formulas (fs/ggml/ggml.go at
f63eea3d273816ffc27fbeb0662ab44d236abc45), written as the arithmetic with the model's numbers filled
in: B is the batch, C the context times parallel, E the embedding length, H / Hkv the largest head /
KV head counts, Dk / Dv the key / value head sizes, V the vocabulary, L the layers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import weightkit
from weightkit.gguf import GGUFValueType, GGUFWriter, Value
from weightkit.memory.ollama.graph import GraphEstimate, graph_size, kv_cache_sizes

T = GGUFValueType
MiB = 1 << 20


def u32(x: int) -> Value:
    return Value(x, T.UINT32)


def u32s(xs) -> Value:
    return Value(np.asarray(xs, np.uint32), T.ARRAY, T.UINT32)


def i32s(xs) -> Value:
    return Value(np.asarray(xs, np.int32), T.ARRAY, T.INT32)


def write_model(path, arch: str, kv: dict[str, Any], *, vocab: int | None = 1000, tensors=(), extra=None):
    """A GGUF with `general.architecture`, `<arch>.<key>` for each of `kv` (ints as UINT32), a vocabulary
    of `vocab` tokens, and zero-filled tensors given as (name, numpy shape, GGML type)."""
    with GGUFWriter(path) as w:
        w.set("general.architecture", arch)
        for key, value in kv.items():
            w.set(f"{arch}.{key}", value if isinstance(value, Value) else u32(value))
        for key, value in (extra or {}).items():
            w.set(key, value)
        if vocab is not None:
            w.set("tokenizer.ggml.tokens", [f"t{i}" for i in range(vocab)])
        planned = [w.add_tensor_info(name, shape, dtype) for name, shape, dtype in tensors]
        for t in planned:  # every info first, then the data in order
            w.write_tensor(t.name, bytes(t.nbytes))
    return path


def builder(tmp_path):
    """Yields build(arch, kv, ...) -> an opened model; closes them all when resumed."""
    opened = []

    def make(arch: str, kv: dict[str, Any], **kw):
        path = write_model(tmp_path / f"m{len(opened)}.gguf", arch, kv, **kw)
        model = weightkit.open(path)
        opened.append(model)
        return model

    yield make
    for m in opened:
        m.close()


@pytest.fixture
def build(tmp_path):
    """build(arch, kv, ...) -> an opened model (closed after the test)."""
    yield from builder(tmp_path)


def check(est: GraphEstimate, kv: list[int], full: int, partial: int) -> None:
    assert list(est.kv) == kv
    assert est.kv_total == sum(kv)
    assert est.full_offload == full
    assert est.partial_offload == partial


# -- llama ---------------------------------------------------------------------------------------------

LLAMA = {"block_count": 4, "embedding_length": 4096, "attention.head_count": 32, "attention.head_count_kv": 8}


@pytest.mark.parametrize("arch", ["llama", "llama4"])
def test_llama_dense(build, arch):
    m = build(arch, LLAMA)
    # E=4096, H=32, Hkv=8, Dk=Dv=E/H=128, V=1000, B=512, C=2048, f16 (2 bytes)
    kv = 2048 * (128 + 128) * 8 * 2
    assert kv == 8_388_608
    full = max(4 * 512 * (1 + 4 * 4096 + 2048 * (1 + 32)), 4 * 512 * (4096 + 1000))
    assert full == 171_968_512  # 2048 * 83969
    attn = 4 * 512 * (1 + 4096 + max(2048, 4096)) + 4096 * 4096 * 9 // 16 + 4 * 2048 * (512 * 32 + 128 * 8)
    logit = 4 * 512 * (4096 + 1000) + 4096 * 1000 * 105 // 128
    assert (attn, logit) == (16_779_264 + 9_437_184 + 142_606_336, 10_436_608 + 3_360_000)
    partial = 4 * 512 * 4096 + max(attn, logit)
    assert partial == 177_211_392
    est = graph_size(m, 2048, 512, 1, "f16")
    check(est, [kv] * 4, full, partial)
    assert (est.graphsize_full_offload, est.graphsize_partial_offload) == (full, partial)
    assert not est.uses_fallback


def test_llama_parallel_and_cache_types(build):
    m = build("llama", LLAMA)
    # C = 1024 * 3 = 3072; per layer C * 256 * 8 * bytes
    for cache, per_element in [("f16", 2), ("q8_0", 1), ("f32", 4)]:
        assert kv_cache_sizes(m, 1024, 3, cache) == [3072 * 256 * 8 * per_element] * 4
    assert kv_cache_sizes(m, 1024, 3, "q4_0") == [3072 * 256 * 8 // 2] * 4  # 0.5 byte per element
    assert kv_cache_sizes(m, 1024, 3, "") == [3072 * 256 * 8 * 2] * 4  # Ollama's unset type is f16
    est = graph_size(m, 1024, 512, 3, "q8_0")
    assert est.full_offload == max(4 * 512 * (1 + 4 * 4096 + 3072 * 33), 4 * 512 * 5096) == 4 * 512 * 117761


MOE = {
    "block_count": 2, "embedding_length": 256, "attention.head_count": 8, "attention.head_count_kv": 2,
    "feed_forward_length": 1024,
}  # fmt: skip


def test_llama_moe_stacked_experts(build):
    # Mixtral 8x22B style: blk.0.ffn_gate_exps.weight, 8 experts x 1024 x 256 in Q8_0
    gate = ("blk.0.ffn_gate_exps.weight", (8, 1024, 256), "Q8_0")
    m = build("llama", MOE, tensors=[gate])
    size = 8 * 1024 * 256 * 34 // 32  # Ollama: elements * 34 bytes / 32 per block
    assert size == 2_228_224
    # E=256, H=8, Hkv=2, Dk = 256/8 = 32, ff=1024, V=1000, B=512
    for ctx, partial in [
        (256, 12_062_720),  # the expert-weights term wins
        (1024, 19_267_584),  # the attention term wins
    ]:
        experts = 3 * size + 4 * 512 * (2 * 1024 + 2 + 256 + ctx + 32 * 2)
        attention = 4 * (ctx * 512 * 8 + ctx * 32 * 2 + 512 * 1024 + 32 * 2 * 512)
        assert max(experts, attention) == partial
        full = max(4 * 512 * (1 + 4 * 256 + ctx * 9), 4 * 512 * (256 + 1000))
        est = graph_size(m, ctx)
        check(est, [ctx * 64 * 2 * 2] * 2, full, partial)
    assert 3 * size + 4 * 512 * (2048 + 2 + 256 + 256 + 64) == 6_684_672 + 5_378_048


def test_llama_moe_expert_tensors(build):
    # Mixtral 8x7B style: blk.0.ffn_gate.0.weight; Ollama reads its GGUF Shape[1] (numpy shape[0]) = 512
    m = build("llama", MOE, tensors=[("blk.0.ffn_gate.0.weight", (512, 256), "F16")])
    # E=256, H=8, Hkv=2, Dk=32, W=512, V=1000, B=512, C=1024
    full = 4 * 512 * (2 + 3 * 256 + 1024 * (1 + 8) + 2 * 2 + 512)
    assert full == 2048 * 10502 == 21_508_096
    p1 = 4 * 512 * (3 + 32 * 2 + 256 + 1024 * 9 + 512) + (256 * 256 + 3 * 256 * 2 * 512) * 9 // 16
    p2 = 4 * 512 * (1 + 2 * 256 + 1024 * 9) + 256 * (6 * 1024 * 2 // 8 + 256 * 9 // 16)
    assert (p1, p2) == (20_584_448 + 479_232, 19_924_992 + 430_080)
    check(graph_size(m, 1024), [1024 * 64 * 2 * 2] * 2, full, p1)


# -- mllama ----------------------------------------------------------------------------------------------

MLLAMA = {
    "block_count": 4, "embedding_length": 512, "attention.head_count": 8, "attention.head_count_kv": 2,
    "attention.cross_attention_layers": i32s([1, 3]),
}  # fmt: skip


@pytest.mark.parametrize(("rope_name", "rope_count"), [("rope_freqs.weights", 32), ("rope_freqs.weight", 0)])
def test_mllama(build, rope_name, rope_count):
    # Ollama looks for the name part "weights" under rope_freqs: the real name ".weight" counts 0
    m = build("mllama", MLLAMA, tensors=[(rope_name, (32,), "F32")])
    # E=512, H=8, Hkv=2, Dk=Dv=64, V=1000, B=512, C=1024
    self_attn = 1024 * 128 * 2 * 2  # 524_288
    cross = 2 * 128 * 4 * 1601 * 4  # Hkv * (Dk + Dv) * sizeof(f32) * vision tokens * tiles = 6_557_696
    full = max(4 * 512 * (2 + 3 * 512 + 64 * 8 + 1024 * 9), 4 * 512 * (512 + 1000))
    assert full == 2048 * 11266 == 23_072_768
    partial = max(
        4 * (512 * (2 * 512 + 1 + 1024 * 9 + 64 * 8) + rope_count + 64 * 1024 * 2),
        4 * 512 * 1512 + 512 * 1000 * 105 // 128,
    )
    assert partial == 4 * (5_505_536 + rope_count + 131_072)
    check(graph_size(m, 1024), [self_attn, cross, self_attn, cross], full, partial)


# -- gemma family -------------------------------------------------------------------------------------------

GEMMA = {
    "block_count": 2, "embedding_length": 256, "attention.head_count": 4, "attention.head_count_kv": 2,
    "attention.key_length": 64, "attention.value_length": 64,
}  # fmt: skip
# E=256, H=4, Hkv=2, Dk=Dv=64, V=1000, B=512, C=1024
GEMMA_FULL = max(4 * 512 * (256 + 1000), 4 * 512 * (2 + 1024 + 1024 * 4 + 2 * 256 + 2 * 64 * 4))
GEMMA_PARTIAL = max(
    4 * 256 * 512 + 256 * 1000 * 105 // 128 + 4 * 1000 * 512,
    4 * 512 * (2 * 256 + 1 + 2 * 64 * 4 + 1024 + 1024 * 4) + 4 * 64 * 1024 * 8 + 256 * 64 * 4 * 9 // 16,
)


@pytest.mark.parametrize("arch", ["gemma", "gemma2"])
def test_gemma_and_gemma2(build, arch):
    assert GEMMA_FULL == 2048 * 6146 == 12_587_008
    assert GEMMA_PARTIAL == 12_584_960 + 2_097_152 + 36_864 == 14_718_976
    m = build(arch, GEMMA)
    check(graph_size(m, 1024), [1024 * 128 * 2 * 2] * 2, GEMMA_FULL, GEMMA_PARTIAL)


def test_gemma3n_is_four_times(build):
    m = build("gemma3n", GEMMA)
    check(graph_size(m, 1024), [1024 * 128 * 2 * 2] * 2, 4 * 12_587_008, 4 * 14_718_976)


def test_gemma3_sliding_window(build):
    m = build("gemma3", {**GEMMA, "block_count": 13, "attention.sliding_window": 128})
    # parallel 2: C = 2 * 512 = 1024; sliding layers hold 2 * 128 + 512 = 768 tokens
    sliding = 768 * (64 + 64) * 2 * 2  # 393_216
    full_ctx = 1024 * (64 + 64) * 2 * 2  # 524_288: layers 5 and 11, where (i + 1) % 6 == 0
    kv = [sliding] * 5 + [full_ctx] + [sliding] * 5 + [full_ctx] + [sliding]
    check(graph_size(m, 512, 512, 2), kv, GEMMA_FULL, GEMMA_PARTIAL)
    # q4_0: half a byte per element
    assert kv_cache_sizes(m, 512, 2, "q4_0")[:6] == [768 * 128 * 2 // 2] * 5 + [1024 * 128 * 2 // 2]


# -- the others with a case of their own ---------------------------------------------------------------------

SMALL = {"block_count": 2, "embedding_length": 512, "attention.head_count": 8, "attention.head_count_kv": 2}
# E=512, H=8, Hkv=2, Dk=Dv=64, V=1000, B=512, C=1024: KV per layer 1024 * 128 * 2 * 2
SMALL_KV = [524_288] * 2


def test_command_r_small(build):
    m = build("command-r", SMALL)
    full = max(4 * 512 * (512 + 1000), 4 * 512 * (2 + 4 * 512 + 1024 * 9))
    partial = max(
        4 * 512 * 1512 + 512 * 1000 * 105 // 128,
        4 * 512 * (1 + 2 * 512 + 1024 * 9) + 4 * 512 * 1024 + 512 * 512 * 9 // 16,
    )
    assert (full, partial) == (2048 * 11266, 2048 * 10241 + 2_097_152 + 147_456)
    check(graph_size(m, 1024), SMALL_KV, full, partial)


def test_qwen2(build):
    m = build("qwen2", SMALL)
    full = max(4 * 512 * 1512, 4 * 512 * (1 + 2 * 512 + 1024 + 1024 * 8))
    partial = max(4 * 512 * 1512 + 420_000, 4 * (512 * (1 + 2 * 512 + 1024 * 9) + 512 * (1 + 1024)))
    assert (full, partial) == (20_973_568, 4 * (5_243_392 + 524_800))
    check(graph_size(m, 1024), SMALL_KV, full, partial)


def test_phi2(build):
    m = build("phi2", SMALL)
    full = max(4 * 512 * 1512, 4 * 512 * (1 + 4 * 512 + 1024 + 1024 * 8))
    partial = max(4 * 512 * (2 * 512 + 1000) + 512 * 1000 * 105 // 128, 4 * 512 * (2 + 3 * 512 + 1024 + 1024 * 8))
    assert (full, partial) == (2048 * 11265, 2048 * 10754)
    check(graph_size(m, 1024), SMALL_KV, full, partial)


def test_stablelm(build):
    m = build("stablelm", SMALL)
    full = 4 * 512 * (1024 * (1 + 8) + 3 * 512 + 2)
    assert full == 22_024_192
    check(graph_size(m, 1024), SMALL_KV, full, full)  # the attention graph is larger than the vocabulary's
    full16 = 4 * 512 * (16 * 9 + 1536 + 2)  # at context 16 the vocabulary graph wins the partial
    vocab = 4 * 512 * (1000 + 2 * 512)
    assert (full16, vocab) == (3_444_736, 4_145_152)
    check(graph_size(m, 16), [16 * 128 * 2 * 2] * 2, full16, vocab)


def test_deepseek2(build):
    kv = {
        "block_count": 2, "embedding_length": 512, "attention.head_count": 16, "attention.head_count_kv": 16,
        "attention.key_length": 192, "attention.value_length": 128,
    }  # fmt: skip
    m = build("deepseek2", kv)
    # E=512, Hkv=16, Dk=192, Dv=128, V=1000, B=512, C=1024
    full = max(4 * 512 * (3 * 512 + 1000), 4 * 512 * (3 * 512 + 2 + 1024 * (1 + 16) + 2 * 192 * 16))
    partial = max(
        4 * 512 * (3 * 512 + 1000) + 512 * 1000 * 105 // 128,
        4 * 512 * (2 * 512 + 1 + 2 * 192 * 16 + 1024 + 1024 * 16) + 4 * 192 * 1024 * 16 + 512 * 192 * 16 * 9 // 16,
    )
    assert (full, partial) == (51_384_320, 50_333_696 + 12_582_912 + 884_736)
    check(graph_size(m, 1024), [1024 * (192 + 128) * 16 * 2] * 2, full, partial)


def test_chatglm_without_and_with_qkv_bias(build):
    base_full = 4 * 512 * (512 + 1000)
    base_partial = base_full + 512 * 1000 * 105 // 128
    assert (base_full, base_partial) == (3_096_576, 3_516_576)
    check(graph_size(build("chatglm", SMALL), 1024), SMALL_KV, base_full, base_partial)

    m = build("chatglm", SMALL, tensors=[("blk.0.attn_qkv.bias", (768,), "F32")])  # S = 512 + 2 * 2 * 64
    full = max(base_full, 4 * 512 * (2 + 2 * 512 + 1024 + 1024 * 8 + 64 * 8 + 768))
    attention = 4 * 512 * (1 + 2 * 512 + 64 * 8 + 1024 + 1024 * 8) + 4 * 64 * 1024 + 4 * 1024 * 64 + 4 * 768
    partial = max(base_partial, attention)
    assert (full, partial) == (23_597_056, 22_022_144 + 524_288 + 3_072)
    check(graph_size(m, 1024), SMALL_KV, full, partial)


GPTOSS = {
    "block_count": 4, "embedding_length": 256, "attention.head_count": 16, "attention.head_count_kv": 2,
    "attention.key_length": 64, "attention.value_length": 64,
}  # fmt: skip


@pytest.mark.parametrize("arch", ["gptoss", "gpt-oss"])
def test_gptoss(build, arch):
    m = build(arch, GPTOSS)
    # per token: (Dk + Dv) * Hkv * 2 bytes = 128 * 2 * 2 = 512; even layers 4096 + B tokens, odd ones C
    even, odd = 512 * (4096 + 512), 512 * 8192
    # the graph uses the default estimate's total: every layer at C = 8192 tokens
    default_total = 4 * (8192 * 128 * 2 * 2)
    partial = 2 * 16 // 2 * default_total // 6
    assert (even, odd, default_total, partial) == (2_359_296, 4_194_304, 16_777_216, 44_739_242)
    est = graph_size(m, 8192)
    check(est, [even, odd, even, odd], partial, partial)  # full is 0 in GraphSize; server.go copies partial
    assert (est.graphsize_full_offload, est.graphsize_partial_offload) == (0, partial)
    # flash attention: (4 * parallel + C >> 10 + 110) MiB
    est = graph_size(m, 8192, flash_attention=True)
    check(est, [even, odd, even, odd], (4 + 8 + 110) * MiB, (4 + 8 + 110) * MiB)
    # parallel 2: C = 16384, even layers 2 * 4096 + 512 tokens
    est = graph_size(m, 8192, 512, 2, "f16", True)
    check(est, [512 * 8704, 512 * 16384] * 2, (8 + 16 + 110) * MiB, 134 * MiB)


# -- the fallback, recurrent layers, per-layer head counts ---------------------------------------------------


def test_fallback_architecture(build):
    m = build("olmo", {**SMALL, "block_count": 3})
    # KV 3 * 524_288 = 1_572_864; partial = (H / Hkv_min) * total / 6 = 4 * 1_572_864 / 6; full = partial
    est = graph_size(m, 1024)
    check(est, [524_288] * 3, 1_048_576, 1_048_576)
    assert (est.graphsize_full_offload, est.graphsize_partial_offload) == (0, 0) and est.uses_fallback


def test_fallback_truncates_left_to_right(build):
    m = build("olmo", {"block_count": 1, "embedding_length": 600, "attention.head_count": 12,
                       "attention.head_count_kv": 5})  # fmt: skip
    # Dk = Dv = 600 / 12 = 50; KV = 100 * (50 + 50) * 5 * 2 = 100_000
    # gqa = 12 / 5 = 2 (truncated); partial = 2 * 100_000 / 6 = 33_333 (not 12 / 5 * 100_000 / 6 = 40_000)
    est = graph_size(m, 100)
    check(est, [100_000], 33_333, 33_333)


SSM = {"ssm.conv_kernel": 4, "ssm.state_size": 16, "ssm.inner_size": 512, "ssm.group_count": 1}


@pytest.mark.parametrize("heads_kv", [i32s([0, 2, 0, 2]), u32s([0, 2, 0, 2])])
def test_recurrent_layers(build, heads_kv):
    m = build("hybrid", {"block_count": 4, "embedding_length": 256, "attention.head_count": 8,
                         "attention.head_count_kv": heads_kv, **SSM})  # fmt: skip
    # recurrent (Hkv 0): ((4 - 1) * (512 + 2 * 1 * 16) + 16 * 512) * 4 bytes (f32 whatever the cache type)
    recurrent = (3 * 544 + 8192) * 4
    assert recurrent == 39_296
    # attention: Dk = Dv = 256 / 8 = 32; C * 64 * 2 heads * bytes
    for cache, attn in [("f16", 1024 * 64 * 2 * 2), ("q8_0", 1024 * 64 * 2), ("q4_0", 1024 * 64)]:
        assert kv_cache_sizes(m, 1024, 1, cache) == [recurrent, attn, recurrent, attn]
    est = graph_size(m, 1024)
    # fallback: Hkv_min = 0 counts as 1, so partial = 8 * total / 6
    total = 2 * 39_296 + 2 * 262_144
    check(est, [recurrent, 262_144, recurrent, 262_144], 8 * total // 6, 8 * total // 6)
    assert 8 * total // 6 == 803_840


def test_recurrent_without_conv_kernel_and_zero_heads(build):
    kv = {"block_count": 3, "embedding_length": 256, "attention.head_count": u32s([0, 8, 8]),
          "attention.head_count_kv": 2, "ssm.state_size": 16, "ssm.inner_size": 512,
          "attention.key_length": 32, "attention.value_length": 32}  # fmt: skip
    m = build("hybrid", kv)
    # layer 0 has no heads: recurrent, conv kernel absent (0) so only the state: 16 * 512 * 4
    assert kv_cache_sizes(m, 100) == [16 * 512 * 4, 100 * 64 * 2 * 2, 100 * 64 * 2 * 2]
    # without key_length, Dk = E / smallest head count (0) = 0: the attention layers cache nothing
    m = build("hybrid", {k: v for k, v in kv.items() if k not in ("attention.key_length", "attention.value_length")})
    assert kv_cache_sizes(m, 100) == [16 * 512 * 4, 0, 0]


def test_per_layer_head_count_arrays(build):
    # head_count_kv [4, 2] on 4 layers: padded with 1 -> [4, 2, 1, 1]; but max 4, min 2 (the array as stored)
    kv = {"block_count": 4, "embedding_length": 512, "attention.head_count": i32s([8]),
          "attention.head_count_kv": u32s([4, 2])}  # fmt: skip
    m = build("olmo", kv)
    # head_count [8] is one value: broadcast; Dk = 512 / 8 = 64
    sizes = [100 * 128 * h * 2 for h in (4, 2, 1, 1)]
    est = graph_size(m, 100)
    # fallback: 8 / min(4, 2) = 4; 4 * total / 6
    check(est, sizes, 4 * sum(sizes) // 6, 4 * sum(sizes) // 6)
    # more values than layers: the extra ones count for the max/min, not for the layers
    m = build("olmo", {**kv, "attention.head_count_kv": u32s([2, 2, 2, 2, 1])})
    est = graph_size(m, 100)
    check(est, [100 * 128 * 2 * 2] * 4, 8 * 204_800 // 6, 8 * 204_800 // 6)


def test_negative_int32_heads_wrap_like_go(build):
    # Ollama converts int32 -1 with uint32(v): 4294967295 KV heads
    m = build("olmo", {"block_count": 1, "embedding_length": 64, "attention.head_count": 1,
                       "attention.head_count_kv": i32s([-1])})  # fmt: skip
    assert kv_cache_sizes(m, 1) == [1 * (64 + 64) * 4294967295 * 2]


def test_uint64_wraps_and_float_rounding(build):
    kv = {"block_count": 1, "embedding_length": 16, "attention.head_count": 1, "attention.head_count_kv": 1,
          "attention.key_length": 8, "attention.value_length": 8}  # fmt: skip
    m = build("olmo", kv)
    # C * 16 * 1 wraps: (2**61 + 3) * 16 = 2**65 + 48 = 48 (mod 2**64); * 2 bytes = 96
    assert kv_cache_sizes(m, 2**61 + 3) == [96]
    # past 2**53 the float64 step rounds: (2**53 + 1) * 1 -> 2**53 (ties to even), * 2 = 2**54, not 2**54 + 2
    m = build("olmo", {**kv, "attention.key_length": 1, "attention.value_length": 0})
    assert kv_cache_sizes(m, 2**53 + 1) == [2**54]
    # context times parallel wraps too: 2**62 * 4 = 0
    assert kv_cache_sizes(m, 2**62, 4) == [0]


def test_graph_arithmetic_wraps(build):
    m = build("command-r", SMALL)
    ctx = 2**60
    # full = max(4*B*(E+V), 4*B*(2 + 4*E + C*(1+H))): C * 9 = 9 * 2**60 still fits, 2048 * (2050 + 9 * 2**60)
    # = 4_198_400 + 9 * 2**71 wraps to 4_198_400
    attention = (4 * 512 * (2 + 4 * 512 + ctx * 9)) % 2**64
    assert attention == 4_198_400
    assert graph_size(m, ctx).full_offload == max(4 * 512 * (512 + 1000), attention) == 4_198_400
