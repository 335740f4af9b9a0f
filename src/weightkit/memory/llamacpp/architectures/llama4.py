"""Llama 4's graph."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from ..hparams import SWA_NONE
from .decoder import logits, output_rows

NO_ROPE_STEP = 4  # every fourth layer attends without rope (`n_no_rope_layer_step`)
EXPERTS_WITHOUT_KQ_NORM = 128  # Maverick (17B-128E) does not norm Q and K (`use_kq_norm`)


def llama4(b: GraphBuilder) -> Graph:
    """`llama_model_llama4::graph`: chunked attention in three of four layers, the fourth without rope and with
    its queries scaled by the attention temperature; Q and K RMS-normed after rope (but in Maverick); experts
    (every `interleave_moe_layer_step`-th layer) weighing their inputs, beside a shared expert."""
    hp = b.hp
    inp, pos, out_ids = b.decoder_inputs()
    attn_scale = b.inp_attn_scale()
    no_rope_step = hp.n_layer if hp.swa_type == SWA_NONE else NO_ROPE_STEP
    kq_norm = hp.n_expert != EXPERTS_WITHOUT_KQ_NORM
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        q, k, v = b.qkv(il, cur, hp.head_k(il), hp.n_head[il], hp.n_head_kv[il])
        use_rope = (il + 1) % no_rope_step != 0
        if use_rope:
            q, k = g.rope(q, pos), g.rope(k, pos)
            if kq_norm:
                q, k = g.rms_norm(q), g.rms_norm(k)
        else:
            q = g.mul(q, attn_scale)
        cur = b.attn(il, q, k, v, b.w("attn_output.weight", il), b.w("attn_output.bias", il))
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w("ffn_norm.weight", il))
        if b.w("ffn_gate_inp.weight", il) is None:
            cur = b.ffn(cur, il)
        else:
            moe = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used, gating="sigmoid", norm_w=False, weights_first=True)
            cur = g.add(moe, b.ffn(cur, il, biases=False, suffix="_shexp"))
        inp = g.add(cur, ffn_inp)
    return logits(b, b.norm(inp, b.w("output_norm.weight")))
