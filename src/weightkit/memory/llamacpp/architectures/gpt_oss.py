"""gpt-oss's graph."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .decoder import attention


def gpt_oss(b: GraphBuilder) -> Graph:
    """`llama_model_openai_moe::graph`: attention sinks, experts with biases and the clamped SwiGLU, the output
    rows picked after the last layer."""
    hp = b.hp
    inp, pos, out_ids = b.decoder_inputs()
    for il in b.each_layer():
        cur = attention(b, il, b.norm(inp, b.w("attn_norm.weight", il)), pos, sinks=True)
        ffn_inp = g.add(cur, inp)
        cur = b.norm(ffn_inp, b.w("post_attention_norm.weight", il))
        cur = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used, gating="softmax_weight", norm_w=False, biases=True)
        inp = g.add(cur, ffn_inp)
    embd = b.norm(g.get_rows(inp, out_ids), b.w("output_norm.weight"))
    return b.finish(embd, b.mm(b.output_weight(), embd), hidden=inp)
