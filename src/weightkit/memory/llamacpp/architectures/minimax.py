"""MiniMax-M2's graph (`minimax-m2`)."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .decoder import logits, output_rows
from .deepseek import GATING


def minimax_m2(b: GraphBuilder) -> Graph:
    """`llama_model_minimax_m2::graph`: Q and K RMS-normed across the whole projection before the heads are split
    (partial rope), and routed experts chosen with a score-correction bias (sigmoid-gated as the file says)."""
    hp = b.hp
    inp, pos, out_ids = b.decoder_inputs()
    gating = GATING[int(hp.flags.get("expert_gating_func", 0))]
    head = hp.head_k_full
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        q, k, v = (b.mm(b.w(f"attn_{name}.weight", il), cur) for name in "qkv")
        q = g.reshape(b.norm(q, b.w("attn_q_norm.weight", il)), head, hp.n_head[il], b.n_tokens)
        k = g.reshape(b.norm(k, b.w("attn_k_norm.weight", il)), head, hp.n_head_kv[il], b.n_tokens)
        v = g.reshape(v, head, hp.n_head_kv[il], b.n_tokens)
        cur = b.attn(il, g.rope(q, pos), g.rope(k, pos), v, b.w("attn_output.weight", il), None)
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w("ffn_norm.weight", il))
        cur = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used, gating=gating,
                        exp_probs_b=b.w("exp_probs_b.bias", il))  # fmt: skip
        inp = g.add(cur, ffn_inp)
    return logits(b, b.norm(inp, b.w("output_norm.weight")))
