"""GLM-4.5's graph (`glm4moe`)."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .decoder import attention, logits, output_rows
from .deepseek import GATING, SIGMOID, expert_ffn


def glm4moe(b: GraphBuilder) -> Graph:
    """`llama_model_glm4_moe::graph`: Q/K norms where the file has them, a norm after attention, dense leading
    layers, then routed experts (sigmoid-gated unless the file says otherwise) beside a shared expert. The NextN
    block is not built here (its own MTP graph runs it), and has no cache in the main context."""
    hp = b.hp
    inp, pos, out_ids = b.decoder_inputs()
    gating = GATING[int(hp.flags.get("expert_gating_func", 0)) or SIGMOID]
    for il in b.each_layer():
        qk_norm = b.w("attn_q_norm.weight", il) is not None
        cur = attention(b, il, b.norm(inp, b.w("attn_norm.weight", il)), pos, qk_norm=qk_norm, bias_out=False)
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w("post_attention_norm.weight", il))
        cur = expert_ffn(b, il, cur, gating, norm_w=bool(hp.flags.get("expert_weights_norm")))
        inp = g.add(cur, ffn_inp)
    return logits(b, b.norm(inp, b.w("output_norm.weight")))
