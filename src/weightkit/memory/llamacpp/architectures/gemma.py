"""Gemma 2 and Gemma 3's graphs."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .decoder import attention, output_rows


def _gemma(b: GraphBuilder, *, qk_norm: bool) -> Graph:
    """Scaled embeddings, norms after attention and feed-forward as well as before, GELU gating, soft-capped
    logits; per-head Q/K norms where `qk_norm`."""
    hp = b.hp
    inp, pos, out_ids = b.decoder_inputs()
    inp = g.scale(inp)
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        cur = attention(b, il, cur, pos, qk_norm=qk_norm, scale_q=True, bias_out=False)
        cur, inp = output_rows(b, il, out_ids, cur, inp)
        sa_out = g.add(b.norm(cur, b.w("post_attention_norm.weight", il)), inp)
        cur = b.ffn(b.norm(sa_out, b.w("ffn_norm.weight", il)), il, biases=False)
        inp = g.add(b.norm(cur, b.w("post_ffw_norm.weight", il)), sa_out)
    embd = b.norm(inp, b.w("output_norm.weight"))
    logits = b.mm(b.output_weight(), embd)
    if hp.flags.get("final_softcap"):
        logits = g.scale(g.unary(g.scale(logits), "tanh"))
    return b.finish(embd, logits)


def gemma2(b: GraphBuilder) -> Graph:
    """`llama_model_gemma2::graph`."""
    return _gemma(b, qk_norm=False)


def gemma3(b: GraphBuilder) -> Graph:
    """`llama_model_gemma3::graph`: Gemma 2's, with per-head Q/K norms."""
    return _gemma(b, qk_norm=True)
