"""Falcon-H1's graph (falcon-h1): attention and a Mamba-2 mixer side by side in every layer."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .decoder import attention, logits
from .mamba import mamba2_layer


def falcon_h1(b: GraphBuilder) -> Graph:
    """`llama_model_falcon_h1::graph`: the layer's input normed twice (once for attention, once for the Mamba-2
    mixer), the two outputs summed into the residual, then a pre-norm gated FFN (its norm `ffn_norm`, without a
    `.weight` suffix)."""
    inp = b.inp_embd(b.w("token_embd.weight"))
    pos = b.inp_pos()
    b.rs_inp()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        attn = attention(b, il, b.norm(inp, b.w("attn_norm.weight", il)), pos, bias_out=False)
        ssm = mamba2_layer(b, il, b.norm(inp, b.w("attn_norm.weight", il)))
        ffn_inp = g.add(g.add(attn, ssm), inp)
        if il == b.hp.n_layer - 1:
            ffn_inp = g.get_rows(ffn_inp, out_ids)
        cur = b.ffn(b.norm(ffn_inp, b.w("ffn_norm", il)), il)
        inp = g.add(cur, ffn_inp)
    return logits(b, b.norm(inp, b.w("output_norm.weight")))
