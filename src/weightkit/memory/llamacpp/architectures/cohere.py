"""Cohere's graph: cohere2 (Command R7B, Command A)."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .decoder import logits, output_rows


def cohere2(b: GraphBuilder) -> Graph:
    """`llama_model_cohere2::graph`: a parallel block (attention and FFN both from one layer norm, both added to
    the residual), sliding-window layers roped and the global ones not, the logits scaled."""
    hp = b.hp
    inp, pos, out_ids = b.decoder_inputs()
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il), rms=False)
        q, k, v = b.qkv(il, cur, hp.head_k(il), hp.n_head[il], hp.n_head_kv[il])
        if hp.is_swa[il]:
            q, k = g.rope(q, pos), g.rope(k, pos)
        attn = b.attn(il, q, k, v, b.w("attn_output.weight", il), b.w("attn_output.bias", il))
        attn, inp, ffn_inp = output_rows(b, il, out_ids, attn, inp, cur)
        cur = b.ffn(ffn_inp, il, biases=False)
        inp = g.add(g.add(cur, inp), attn)
    return logits(b, b.norm(inp, b.w("output_norm.weight"), rms=False))
