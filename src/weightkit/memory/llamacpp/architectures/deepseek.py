"""DeepSeek-V2's graph (and every model llama.cpp runs as deepseek2: DeepSeek-V3, Kimi K2, ...)."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .decoder import logits, output_rows

SIGMOID = 2
GATING = {0: "softmax", 1: "softmax", SIGMOID: "sigmoid", 3: "softmax_weight"}  # `expert_gating_func` -> moe_ffn's


def deepseek2(b: GraphBuilder) -> Graph:
    """`llama_model_deepseek2::graph`: multi-head latent attention (the compressed KV and the rope part cached,
    the no-rope queries absorbed into the latent space), the queries scaled by the attention temperature where the
    file sets one (Mistral Large 3), dense leading layers, routed and shared experts (Mistral 4's with one fused
    gate-and-up matrix)."""
    hp = b.hp
    rope, rank = hp.n_rot, hp.n_lora_kv
    head_k = hp.head_k_mla if hp.is_mla else hp.head_k_full
    head_v = hp.head_v_mla if hp.is_mla else hp.head_v_full
    nope = head_k - rope
    inp, pos, out_ids = b.decoder_inputs()
    gating = GATING[int(hp.flags.get("expert_gating_func", 0))]
    q_scales = b.inp_attn_scale() if hp.flags.get("attn_temperature_scale") else None
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        if (wq := b.w("attn_q.weight", il)) is not None:
            q = b.mm(wq, cur)
        else:
            q = b.mm(b.w("attn_q_b.weight", il), b.norm(b.mm(b.w("attn_q_a.weight", il), cur),
                                                       b.w("attn_q_a_norm.weight", il)))  # fmt: skip
        q = g.reshape(q, head_k, hp.n_head[il], b.n_tokens)
        kv_pe = b.mm(b.w("attn_kv_a_mqa.weight", il), cur)
        row = g.row_size(kv_pe.type, rank + rope)
        kv = g.view(kv_pe, (rank, b.n_tokens), (row,))
        k_pe = g.rope(g.view(kv_pe, (rope, 1, b.n_tokens), (row, row)), pos)
        kv = b.norm(kv, b.w("attn_kv_a_norm.weight", il))
        if hp.is_mla:
            q_nope = g.view(q, (nope, hp.n_head[il], b.n_tokens), (q.nb[1], q.nb[2]))
            q_pe = g.rope(g.view(q, (rope, hp.n_head[il], b.n_tokens), (q.nb[1], q.nb[2])), pos)
            absorbed = g.permute(b.mm(b.w("attn_k_b.weight", il), g.permute(q_nope, 0, 2, 1, 3)), 0, 2, 1, 3)
            q = g.concat(absorbed, q_pe, 0)
            if q_scales is not None:
                q = g.mul(q, q_scales)
            kv = g.reshape(kv, rank, 1, b.n_tokens)
            cur = b.attn_k_only(il, q, g.concat(kv, k_pe, 0), kv, b.w("attn_output.weight", il),
                                b.w("attn_v_b.weight", il))  # fmt: skip
        else:
            kv = b.mm(b.w("attn_kv_b.weight", il), kv)
            row = g.row_size(kv.type, nope + head_v)
            k_nope = g.view(kv, (nope, hp.n_head[il], b.n_tokens), (row, row * hp.n_head[il]))
            v = g.cont(g.view(kv, (head_v, hp.n_head[il], b.n_tokens), (row, row * hp.n_head[il])))
            q = g.rope(q, pos)
            k = g.concat(k_nope, g.repeat(k_pe, rope, hp.n_head[il], b.n_tokens, 1), 0)
            if q_scales is not None:
                q = g.mul(q, q_scales)
            cur = b.attn(il, q, k, v, b.w("attn_output.weight", il), None)
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w("ffn_norm.weight", il))
        if il < hp.n_layer_dense_lead:
            cur = b.ffn(cur, il, biases=False)
        else:
            moe = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used, gating=gating,
                            norm_w=bool(hp.flags.get("expert_weights_norm")),
                            w_scale=float(hp.flags.get("expert_weights_scale", 0.0)),
                            exp_probs_b=b.w("exp_probs_b.bias", il))  # fmt: skip
            cur = g.add(moe, b.ffn(cur, il, biases=False, suffix="_shexp"))
        inp = g.add(cur, ffn_inp)
    return logits(b, b.norm(inp, b.w("output_norm.weight")))
