"""Layer weights as Ollama groups and sizes them (GroupLayers, Tensor.Size, server.go's output layer)."""

from __future__ import annotations

import weightkit
from weightkit import GGMLType, TensorInfo
from weightkit.memory.ollama.graph import group_layers, layer_sizes, tensor_size

from .test_graph import write_model

TENSORS = [
    ("token_embd.weight", (1000, 256), "Q8_0"),  # 256_000 elements * 34 / 32 = 272_000
    ("output_norm.weight", (256,), "F32"),  # 1_024
    ("output.weight", (1000, 256), "Q6_K"),  # 256_000 * 210 / 256 = 210_000
    ("blk.0.attn_q.weight", (256, 256), "Q4_K"),  # 65_536 * 144 / 256 = 36_864
    ("blk.0.attn_norm.weight", (256,), "F32"),  # 1_024
    ("blk.1.ffn_up.weight", (512, 256), "IQ4_XS"),  # 131_072 * 136 / 256 = 69_632
    ("blk.1.ffn_down.weight", (256, 512), "TQ1_0"),  # Ollama has no size for TQ1_0: 0 (the file holds 27_648)
    ("blk.2.ffn_gate_exps.weight", (2, 64, 64), "MXFP4"),  # 8_192 * 17 / 32 = 4_352
    ("v.blk.0.attn_k.weight", (64, 64), "F16"),  # 8_192
    ("v.patch_embd.weight", (64, 48), "F32"),  # 12_288
    ("v.position_embd.weight", (16, 64), "F16"),  # 2_048
    ("mm.0.weight", (64, 64), "BF16"),  # 8_192
    ("mm.0.bias", (64,), "F32"),  # 256
    ("mm.input_projection.weight", (32, 64), "F32"),  # 8_192: "mm" joins whatever part follows it
    ("enc.blk.2.attn.weight", (32,), "F32"),  # 128
    ("rope_freqs.weight", (32,), "F32"),  # 128
]


def test_layer_sizes(tmp_path):
    path = write_model(tmp_path / "m.gguf", "llama", {"block_count": 3}, tensors=TENSORS)
    with weightkit.open(path) as m:
        sizes = layer_sizes(m)
        assert m.tensors["blk.1.ffn_down.weight"].nbytes == 512 * 256 // 256 * 54  # what the file holds
    assert sizes.groups == {
        "token_embd": 272_000,
        "output_norm": 1_024,
        "output": 210_000,
        "blk.0": 36_864 + 1_024,
        "blk.1": 69_632 + 0,
        "blk.2": 4_352,
        "v.blk.0": 8_192,
        "v": 12_288 + 2_048,
        "mm.0": 8_192 + 256,
        "mm.input_projection": 8_192,
        "enc.blk.2": 128,
        "rope_freqs": 128,
    }
    assert sizes.output == 1_024 + 210_000  # output_norm + output
    assert [sizes.block(i) for i in range(4)] == [37_888, 69_632, 4_352, 0]


def test_output_layer_falls_back_to_token_embd(tmp_path):
    tied = [t for t in TENSORS if t[0] != "output.weight"]
    path = write_model(tmp_path / "tied.gguf", "llama", {"block_count": 3}, tensors=tied)
    with weightkit.open(path) as m:
        assert layer_sizes(m).output == 1_024 + 272_000  # output_norm + token_embd
    only_embd = [t for t in tied if t[0] != "output_norm.weight"]
    path = write_model(tmp_path / "bare.gguf", "llama", {"block_count": 3}, tensors=only_embd)
    with weightkit.open(path) as m:
        assert layer_sizes(m).output == 272_000


def info(name: str, shape=(4,), dtype=GGMLType.F32) -> TensorInfo:
    return TensorInfo(name, dtype, shape, 0, 0)


def test_group_layers_names():
    names = [
        "token_embd.weight", "blk.0.attn_k.weight", "blk.0.ffn_gate.0.weight", "mm.0.bias", "mm.0.weight",
        "v.blk.0.attn_k.weight", "v.patch_embd.weight", "v.position_embd.gate", "blk.0", "foo", "a.mm.b",
    ]  # fmt: skip
    groups = group_layers({n: info(n) for n in names})
    assert {g: sorted(layer) for g, layer in groups.items()} == {
        "token_embd": ["weight"],
        "blk.0": ["attn_k.weight", "ffn_gate.0.weight"],
        "mm.0": ["bias", "weight"],
        "v.blk.0": ["attn_k.weight"],
        "v": ["patch_embd.weight", "position_embd.gate"],
        "blk": ["0"],  # nothing after the number: not joined
        "foo": [""],
        "a": ["mm.b"],  # "mm" is the last-but-one part: not joined
    }


def test_tensor_size_is_ollamas():
    # Ollama: elements * type size / block size in uint64; Q4_0 is 18 bytes per 32
    assert tensor_size(info("x", (3, 64), GGMLType.Q4_0)) == 192 * 18 // 32 == 108
    assert tensor_size(info("x", (256,), GGMLType.IQ1_M)) == 56  # 256 / 8 + 256 / 16 + 256 / 32
    assert tensor_size(info("x", (256,), GGMLType.NVFP4)) == 0  # not in Ollama's table
    assert tensor_size(info("x", (), GGMLType.F32)) == 4  # no dimensions: one element
    # the element count wraps in uint64: 2**62 * 8 = 2**65 -> 0
    assert tensor_size(info("x", (2**62, 8), GGMLType.F32)) == 0
