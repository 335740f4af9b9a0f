"""The Gemma family's graphs: Gemma 2, Gemma 3, EmbeddingGemma, Gemma 3n and Gemma 4."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import I32, Graph, Tensor
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


def gemma_embedding(b: GraphBuilder) -> Graph:
    """`llama_model_gemma_embedding::graph` (EmbeddingGemma): Gemma 3's block over the batch alone (no cache, not
    causal, the sliding-window layers under their own mask), the normed hidden state the embedding, no logits."""
    hp = b.hp
    inp = g.scale(b.inp_embd(b.w("token_embd.weight")))
    pos = b.inp_pos()
    mask, mask_swa = b.attn_inp_no_cache()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        q, k, v = b.qkv(il, cur, hp.head_k(il), hp.n_head[il], hp.n_head_kv[il])
        q = g.scale(g.rope(b.norm(q, b.w("attn_q_norm.weight", il)), pos))
        k = g.rope(b.norm(k, b.w("attn_k_norm.weight", il)), pos)
        for t in (q, k, v):
            b.expand(t)
        cur = b.mm(b.w("attn_output.weight", il), b.attn_mha(q, k, v, mask_swa if hp.is_swa[il] else mask))
        cur, inp = output_rows(b, il, out_ids, cur, inp)
        sa_out = g.add(b.norm(cur, b.w("post_attention_norm.weight", il)), inp)
        cur = b.ffn(b.norm(sa_out, b.w("ffn_norm.weight", il)), il, biases=False)
        inp = g.add(b.norm(cur, b.w("post_ffw_norm.weight", il), il=-1), sa_out)
    return b.finish(b.norm(inp, b.w("output_norm.weight"), il=-1), None)


def _slice(x: Tensor, i: int) -> Tensor:
    """The `i`th 2-D slice of a 3-D tensor (`gemma3n_view_2d_slice`)."""
    return g.view(x, (x.ne[0], x.ne[1]), (x.nb[1],))


def _fused_qkv(b: GraphBuilder, il: int, cur: Tensor) -> Tensor | None:
    """The product with a fused QKV matrix, where the layer has one."""
    wqkv = b.w("attn_qkv.weight", il)
    return None if wqkv is None else b.mm(wqkv, cur)


def _query(b: GraphBuilder, il: int, cur: Tensor, head: int, qkv: Tensor | None) -> Tensor:
    """Q alone, from its own matrix or the first rows of the fused product `qkv`, reshaped to heads."""
    if qkv is None:
        q = b.mm(b.w("attn_q.weight", il), cur)
    else:
        q = g.cont(g.view(qkv, (head * b.hp.n_head[il], b.n_tokens), (qkv.nb[1],)))
    return g.reshape(q, head, b.hp.n_head[il], b.n_tokens)


def _per_layer_inputs(b: GraphBuilder, inp: Tensor, n_per_layer: int) -> Tensor:
    """`build_inp_per_layer` and `project_per_layer_inputs`: each token's per-layer embedding rows plus a projection
    of its embedding, [n_per_layer, n_tokens, n_layer]."""
    n_layer, n_tokens = b.hp.n_layer, b.n_tokens
    tokens = g.graph_input(I32, (n_tokens,), "inp_tokens")
    selected = g.get_rows(b.w("per_layer_token_embd.weight"), tokens)
    selected = b.expand(g.scale(g.reshape(selected, n_per_layer, n_layer, n_tokens)))
    proj = g.scale(b.mm(b.w("per_layer_model_proj.weight"), inp))
    proj = b.norm(g.reshape(proj, n_per_layer, n_layer, n_tokens), b.w("per_layer_proj_norm.weight"))
    return g.cont(g.permute(g.scale(g.add(proj, selected)), 0, 2, 1, 3))


def _per_layer_embedding(b: GraphBuilder, il: int, cur: Tensor, per_layer: Tensor) -> Tensor:
    """A layer's per-layer input gated by `cur` and projected back to the embedding (normed)."""
    cur = g.unary(b.mm(b.w("inp_gate.weight", il), cur), "gelu")
    cur = b.mm(b.w("proj.weight", il), g.mul(cur, _slice(per_layer, il)))
    return b.norm(cur, b.w("post_norm.weight", il))


def _ffn_with_experts(b: GraphBuilder, il: int, attn_out: Tensor) -> Tensor:
    """Gemma 4's FFN with experts (26B-A4B): the dense FFN (llama.cpp's shared expert) and the experts side by side,
    each normed before and after, summed; the router's logits from the RMS-normed, scaled layer input."""
    hp = b.hp
    dense = b.ffn(b.norm(attn_out, b.w("ffn_norm.weight", il)), il, biases=False)
    dense = b.norm(dense, b.w("post_ffw_norm_1.weight", il))
    cur = b.norm(attn_out, b.w("pre_ffw_norm_2.weight", il))
    router = g.mul(g.scale(g.rms_norm(attn_out)), b.w("ffn_gate_inp.scale", il))
    logits = b.mm(b.w("ffn_gate_inp.weight", il), router)
    experts = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used, logits=logits)
    return g.add(dense, b.norm(experts, b.w("post_ffw_norm_2.weight", il)))


def gemma4(b: GraphBuilder) -> Graph:
    """`llama_model_gemma4::graph`: Gemma 3's block with V RMS-normed too, the last layers reading earlier layers'
    KV caches (and, where a layer has no V projection, its K standing for V), per-layer embedding inputs, a
    per-layer output scale, and experts beside the dense FFN where a layer has a router."""
    hp = b.hp
    inp = g.scale(b.inp_embd(b.w("token_embd.weight")))
    pos = b.inp_pos()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    per_layer = None
    if hp.n_embd_per_layer:
        per_layer = _per_layer_inputs(b, inp, hp.n_embd_per_layer)
    for il in b.each_layer():
        head, n_tokens = hp.head_k(il), b.n_tokens
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        qkv = _fused_qkv(b, il, cur)
        q = g.rope(b.norm(_query(b, il, cur, head, qkv), b.w("attn_q_norm.weight", il)), pos)
        k = v = None
        if hp.has_kv(il):
            if qkv is not None:
                k, v = (g.cont(g.view(qkv, (hp.n_embd_k_gqa(il), n_tokens), (qkv.nb[1],))) for _ in "kv")
            else:
                k = b.mm(b.w("attn_k.weight", il), cur)
                wv = b.w("attn_v.weight", il)
                v = b.mm(wv, cur) if wv is not None else k
            k = g.reshape(k, head, hp.n_head_kv[il], n_tokens)
            v = g.rms_norm(g.reshape(v, head, hp.n_head_kv[il], n_tokens))
            k = g.rope(b.norm(k, b.w("attn_k_norm.weight", il)), pos)
        cur = b.attn(il, q, k, v, b.w("attn_output.weight", il), None)
        attn_out = g.add(b.norm(cur, b.w("post_attention_norm.weight", il)), inp)
        if f"blk.{il}.ffn_gate_inp.weight" in b.tensors:
            cur = _ffn_with_experts(b, il, attn_out)
        else:
            cur = b.ffn(b.norm(attn_out, b.w("ffn_norm.weight", il)), il, biases=False)
        cur = g.add(b.norm(cur, b.w("post_ffw_norm.weight", il), il=-1), attn_out)
        if per_layer is not None:
            cur = g.add(cur, _per_layer_embedding(b, il, cur, per_layer))
        if (scale := b.w("layer_output_scale.weight", il)) is not None:
            cur = g.mul(cur, scale)
        inp = cur
    hidden = b.norm(inp, b.w("output_norm.weight"))
    embd = g.get_rows(hidden, out_ids)
    logits = b.mm(b.output_weight(), embd)
    if hp.flags.get("final_softcap"):
        logits = g.scale(g.unary(g.scale(logits), "tanh"))
    return b.finish(embd, logits, hidden=hidden)


#: Gemma 3n's AltUp streams, the active one, per-layer input width and sparse-FFN layers: llama_hparams' defaults
#: and the graph's constants, which llama.cpp does not read from the file
N_ALTUP, ALTUP_ACTIVE, N_EMBD_ALTUP, N_LAYER_SPARSITY = 4, 0, 256, 10


def _magnitude(x: Tensor) -> Tensor:
    return g.sqrt(g.sum_rows(g.sqr(x)))


def _rest(x: Tensor) -> Tensor:
    """The AltUp streams after the first, a 3-D view."""
    return g.view(x, (x.ne[0], x.ne[1], x.ne[2] - 1), (x.nb[1], x.nb[2]))


def _altup_router(b: GraphBuilder, il: int, x: Tensor) -> Tensor:
    """`altup_compute_router_modalities`: [n_altup, n_tokens]."""
    router = g.scale(b.norm(x, b.w("altup_router_norm.weight", il)))
    return g.unary(g.mul_mat(b.w("altup_router.weight", il), router), "tanh")


def _altup_predict(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    coefs = b.mm(b.w("altup_predict_coef.weight", il), _altup_router(b, il, _slice(cur, ALTUP_ACTIVE)))
    coefs = g.reshape(coefs, N_ALTUP, N_ALTUP, b.n_tokens)
    predictions = g.mul_mat(g.cont(g.permute(cur, 1, 2, 0, 3)), coefs)
    return g.add(g.cont(g.permute(predictions, 0, 2, 1, 3)), cur)


def _altup_correct(b: GraphBuilder, il: int, predictions: Tensor, activated: Tensor) -> Tensor:
    modalities = _altup_router(b, il, activated)
    innovation = g.sub(activated, _slice(predictions, ALTUP_ACTIVE))
    coefs = g.scale(b.mm(b.w("altup_correct_coef.weight", il), modalities))
    coefs = g.cont(g.transpose(coefs), 1, b.n_tokens, N_ALTUP)
    innovation = g.repeat(innovation, b.hp.n_embd, b.n_tokens, N_ALTUP, 1)
    return g.add(g.mul(innovation, coefs), predictions)


def _laurel(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    tmp = b.mm(b.w("laurel_r.weight", il), b.mm(b.w("laurel_l.weight", il), cur))
    return g.add(b.norm(tmp, b.w("laurel_post_norm.weight", il)), cur)


def _gaussian_topk(x: Tensor) -> Tensor:
    """The activations above mean + 1.645 standard deviations, per token."""
    mean = g.mean(x)
    std = g.sqrt(g.scale(g.sum_rows(g.sqr(g.sub(x, mean)))))
    return g.unary(g.sub(x, g.add(mean, g.scale(std))), "relu")


def gemma3n(b: GraphBuilder) -> Graph:
    """`llama_model_gemma3n::graph`: AltUp (four streams of the embedding, one active, predicted and corrected
    around each layer), LAuReL beside attention, per-layer embedding inputs, V RMS-normed, a sparse FFN gate in
    the first layers, the last layers reading earlier layers' KV caches, soft-capped logits."""
    hp = b.hp
    n_embd, n_tokens = hp.n_embd, b.n_tokens
    inp = g.scale(b.inp_embd(b.w("token_embd.weight")))
    pos = b.inp_pos()
    b.attn_inp_kv()
    per_layer = _per_layer_inputs(b, inp, N_EMBD_ALTUP)
    added = g.mul_mat(b.w("altup_proj.weight"), g.repeat(inp, n_embd, n_tokens, N_ALTUP - 1, 1))
    added = g.div(g.mul(added, _magnitude(inp)), _magnitude(added))
    inp = g.concat(inp, added, 2)
    for il in b.each_layer():
        head = hp.head_k(il)
        predictions = _altup_predict(b, il, inp)
        active = _slice(predictions, ALTUP_ACTIVE)
        cur = b.norm(active, b.w("attn_norm.weight", il))
        laurel = _laurel(b, il, cur)
        if hp.has_kv(il):
            q, k, v = b.qkv(il, cur, head, hp.n_head[il], hp.n_head_kv[il])
            q = b.norm(q, b.w("attn_q_norm.weight", il))
            k = b.norm(k, b.w("attn_k_norm.weight", il))
            v = g.rms_norm(v)
            q, k = g.rope(q, pos), g.rope(k, pos)
        else:
            q = _query(b, il, cur, head, _fused_qkv(b, il, cur))
            q, k, v = g.rope(b.norm(q, b.w("attn_q_norm.weight", il)), pos), None, None
        cur = b.attn(il, q, k, v, b.w("attn_output.weight", il), None)
        cur = g.add(b.norm(cur, b.w("post_attention_norm.weight", il)), active)
        attn_laurel = g.scale(g.add(cur, laurel))
        cur = b.norm(attn_laurel, b.w("ffn_norm.weight", il))
        up, gate = b.mm(b.w("ffn_up.weight", il), cur), b.mm(b.w("ffn_gate.weight", il), cur)
        if il < N_LAYER_SPARSITY:
            gate = _gaussian_topk(gate)
        cur = b.mm(b.w("ffn_down.weight", il), g.mul(up, g.unary(gate, "gelu")))
        cur = g.add(b.norm(cur, b.w("post_ffw_norm.weight", il), il=-1), attn_laurel)
        corrected = _altup_correct(b, il, predictions, cur)
        first = g.mul(_slice(corrected, ALTUP_ACTIVE), b.w("altup_correct_scale.weight", il))
        first = _per_layer_embedding(b, il, first, per_layer)
        inp = g.concat(_slice(corrected, 0), g.add(_rest(corrected), first), 2)
    unembd = g.mul_mat(b.w("altup_unembd_proj.weight"), _rest(inp))
    unembd = g.div(g.mul(unembd, _magnitude(_slice(inp, ALTUP_ACTIVE))), _magnitude(unembd))
    cur = _slice(inp, 0)
    for i in range(N_ALTUP - 1):
        cur = g.add(cur, _slice(unembd, i))
    cur = g.get_rows(g.scale(cur), b.inp_out_ids())
    embd = b.norm(cur, b.w("output_norm.weight"))
    logits = g.scale(g.unary(g.scale(b.mm(b.output_weight(), embd)), "tanh"))
    return b.finish(embd, logits)
