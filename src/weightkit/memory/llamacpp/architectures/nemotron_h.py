"""Nemotron-H's graph (nemotron_h): Mamba-2, attention and feed-forward layers, each its own block."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .mamba import mamba2_layer


def nemotron_h(b: GraphBuilder) -> Graph:
    """`llama_model_nemotron_h::graph`: each layer one pre-normed mixer and a residual: a Mamba-2 layer (recurrent),
    attention without rope (a layer with no FFN), or a squared-ReLU FFN; the output rows taken after the final norm,
    whose whole output stays an output too (the NextN head's seed)."""
    hp = b.hp
    inp = b.inp_embd(b.w("token_embd.weight"))
    b.rs_inp()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        if hp.is_recurrent[il]:
            cur = mamba2_layer(b, il, cur)
        elif hp.n_ff[il] == 0:
            q, k, v = b.qkv(il, cur, hp.head_k(il), hp.n_head[il], hp.n_head_kv[il])
            cur = b.attn(il, q, k, v, b.w("attn_output.weight", il), b.w("attn_output.bias", il))
        else:
            cur = b.ffn(cur, il, act="relu_sqr")
        inp = g.add(cur, inp)
    hidden = b.norm(inp, b.w("output_norm.weight"), il=-1)
    embd = g.get_rows(hidden, out_ids)
    return b.finish(embd, b.mm(b.output_weight(), embd), hidden)
