"""DeepSeek-V2's graph (and every model llama.cpp runs as deepseek2: DeepSeek-V3, Kimi K2, ...), and DeepSeek-V3.2's
sparse attention (`deepseek32`, and GLM-5's `glm-dsa`)."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph, Tensor
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
        cur = expert_ffn(b, il, cur, gating, norm_w=bool(hp.flags.get("expert_weights_norm")))
        inp = g.add(cur, ffn_inp)
    return logits(b, b.norm(inp, b.w("output_norm.weight")))


def expert_ffn(b: GraphBuilder, il: int, cur: Tensor, gating: str, *, norm_w: bool) -> Tensor:
    """DeepSeek's feed-forward, which GLM-4.5 and Kimi-Linear share: a dense one in the leading layers, else the
    routed experts (their weights normed where `norm_w`, scaled, the selection biased where the layer has
    `exp_probs_b`) beside the shared expert."""
    hp = b.hp
    if il < hp.n_layer_dense_lead:
        return b.ffn(cur, il, biases=False)
    moe = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used, gating=gating, norm_w=norm_w,
                    w_scale=float(hp.flags.get("expert_weights_scale", 0.0)),
                    exp_probs_b=b.w("exp_probs_b.bias", il))  # fmt: skip
    return g.add(moe, b.ffn(cur, il, biases=False, suffix="_shexp"))


def deepseek32(b: GraphBuilder) -> Graph:
    """`llama_model_deepseek32::graph` (and `llama_model_glm_dsa::graph`): DeepSeek-V3's blocks with sparse
    attention. Each layer's lightning indexer scores every cached key (its own cache of one head per cell, the
    queries and keys Hadamard-rotated) and keeps the `indexer_top_k` best cells per token, to which the MLA
    attention is then masked; a layer without an indexer of its own (GLM-5.2's shared ones) reuses the last
    one's choice. The NextN block is not built here (its own MTP graph runs it) and has no cache in the main
    context."""
    hp = b.hp
    rope, rank = hp.n_rot, hp.n_lora_kv
    head_k, n_tokens = hp.head_k_mla, b.n_tokens
    nope = head_k - rope
    inp = b.inp_embd(b.w("token_embd.weight"))
    pos = b.inp_pos()
    b.attn_inp_k_dsa()
    out_ids = b.inp_out_ids()
    gating = GATING[int(hp.flags.get("expert_gating_func", 0)) or SIGMOID]
    top_k = None
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        qr = b.norm(b.mm(b.w("attn_q_a.weight", il), cur), b.w("attn_q_a_norm.weight", il))
        if hp.is_indexer_full[il]:
            top_k = _indexer_top_k(b, il, cur, qr, pos)
        q = b.mm(b.w("attn_q_b.weight", il), qr)
        row = g.row_size(q.type, head_k)
        q_nope = g.view(q, (nope, hp.n_head[il], n_tokens), (row, row * hp.n_head[il]))
        q_pe = g.view(q, (rope, hp.n_head[il], n_tokens), (row, row * hp.n_head[il]))
        kv_pe = b.mm(b.w("attn_kv_a_mqa.weight", il), cur)
        row = g.row_size(kv_pe.type, rank + rope)
        kv = g.view(kv_pe, (rank, n_tokens), (row,))
        k_pe = g.view(kv_pe, (rope, 1, n_tokens), (row, row))
        q_pe, k_pe = g.rope(q_pe, pos), g.rope(k_pe, pos)
        kv = b.norm(kv, b.w("attn_kv_a_norm.weight", il))
        absorbed = g.permute(b.mm(b.w("attn_k_b.weight", il), g.permute(q_nope, 0, 2, 1, 3)), 0, 2, 1, 3)
        q = g.concat(absorbed, q_pe, 0)
        kv = g.reshape(kv, rank, 1, n_tokens)
        cur = b.attn_dsa(il, q, g.concat(kv, k_pe, 0), kv, b.w("attn_output.weight", il),
                         b.w("attn_v_b.weight", il), top_k)  # fmt: skip
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w("ffn_norm.weight", il))
        cur = expert_ffn(b, il, cur, gating, norm_w=bool(hp.flags.get("expert_weights_norm")))
        inp = g.add(cur, ffn_inp)
    embd = b.norm(inp, b.w("output_norm.weight"))
    return b.finish(embd, b.mm(b.output_weight(), embd), embd)


def _indexer_top_k(b: GraphBuilder, il: int, cur: Tensor, qr: Tensor, pos: Tensor) -> Tensor:
    """The lightning indexer of a layer: its key for each token stored, every cached key scored for each token
    (the fused `ggml_lightning_indexer`), and the indices of the best `indexer_top_k` cells (all, if fewer)."""
    hp, n_tokens = b.hp, b.n_tokens
    n_head, head = hp.indexer_n_head, hp.indexer_head_size
    q = g.rope(g.reshape(b.mm(b.w("indexer.attn_q_b.weight", il), qr), head, n_head, n_tokens), pos)
    k = b.mm(b.w("indexer.attn_k.weight", il), cur)
    k = b.norm(k, b.w("indexer.k_norm.weight", il), b.w("indexer.k_norm.bias", il), rms=False)
    k = g.rope(g.reshape(k, head, 1, n_tokens), pos)
    rotation = b.indexer_rotation()
    q, k = g.mul_mat(rotation, q), g.mul_mat(rotation, k)
    b.indexer_store(il, k)
    weights = b.mm(b.w("indexer.proj.weight", il), cur)
    keys, mask = b.indexer_keys(il), b.indexer_mask()
    n_stream = keys.ne[3]
    q = g.view(q, (q.ne[0], q.ne[1], q.ne[2] // n_stream, n_stream), (q.nb[1], q.nb[2], q.nb[3] // n_stream))
    weights = g.view(weights, (weights.ne[0], weights.ne[1] // n_stream, weights.ne[2], n_stream),
                     (weights.nb[1], weights.nb[2] // n_stream, weights.nb[3] // n_stream))  # fmt: skip
    score = g.lightning_indexer(q, keys, g.scale(weights), mask)
    return g.cont(g.top_k(score, min(score.ne[0], hp.indexer_top_k)))
