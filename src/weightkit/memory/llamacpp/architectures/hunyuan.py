"""Hunyuan's graphs: `hunyuan-moe` (Hunyuan-A13B) and `hunyuan-dense` (Hunyuan 0.5B-7B, which llama.cpp runs on
`hunyuan_vl`'s graph)."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .decoder import logits, output_rows


def _hunyuan(b: GraphBuilder, *, experts: bool) -> Graph:
    """The llama-style block with Q and K roped, then K and Q RMS-normed per head (in that order); with `experts`,
    the shared expert and the routed experts side by side, their outputs added."""
    hp = b.hp
    inp, pos, out_ids = b.decoder_inputs()
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        q, k, v = b.qkv(il, cur, hp.head_k(il), hp.n_head[il], hp.n_head_kv[il])
        q, k = g.rope(q, pos), g.rope(k, pos)
        k = b.norm(k, b.w("attn_k_norm.weight", il))
        q = b.norm(q, b.w("attn_q_norm.weight", il))
        cur = b.attn(il, q, k, v, b.w("attn_output.weight", il), None)
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w("ffn_norm.weight", il))
        if experts:
            shared = b.ffn(cur, il, biases=False, suffix="_shexp")
            cur = g.add(b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used), shared)
        else:
            cur = b.ffn(cur, il, biases=False)
        inp = g.add(cur, ffn_inp)
    return logits(b, b.norm(inp, b.w("output_norm.weight")))


def hunyuan_moe(b: GraphBuilder) -> Graph:
    """`llama_model_hunyuan_moe::graph`."""
    return _hunyuan(b, experts=True)


def hunyuan_dense(b: GraphBuilder) -> Graph:
    """`llama_model_hunyuan_vl::graph`, which `hunyuan-dense` runs (M-RoPE only where the file has sections, which
    changes no shape)."""
    return _hunyuan(b, experts=False)
