"""Phi-3's graph (Phi-4 too)."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .decoder import attention, logits, output_rows


def phi3(b: GraphBuilder) -> Graph:
    """`llama_model_phi3::graph`: fused QKV, and one up projection holding the gate (`ggml_swiglu`)."""
    hp = b.hp
    inp, pos, out_ids = b.decoder_inputs()
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il), b.w("attn_norm.bias", il))
        cur = attention(b, il, cur, pos, scale_q=True)
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        residual = g.add(cur, residual)
        cur = b.norm(residual, b.w("ffn_norm.weight", il), b.w("ffn_norm.bias", il))
        if b.w("ffn_gate_inp.weight", il) is None:
            cur = b.mm(b.w("ffn_down.weight", il), g.glu(b.mm(b.w("ffn_up.weight", il), cur)))
        else:
            cur = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used)
        inp = g.add(residual, cur)
    embd = b.norm(inp, b.w("output_norm.weight"), b.w("output_norm.bias"))
    return logits(b, embd, bias=True)
