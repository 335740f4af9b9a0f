"""Each architecture's graph, as its `src/models/<arch>.cpp` builds it (`graph::graph`), written with the
building blocks of `GraphBuilder`. `GRAPHS` maps a GGUF architecture name to its builder.

Only what changes the allocation is kept: which nodes exist, their shapes and order. Scalars (rope frequencies,
attention scales) and weights never reach the allocator, so a builder passes over them.
"""

from __future__ import annotations

from collections.abc import Callable

from . import ggml as g
from .ggml import Graph, Tensor
from .graph import GraphBuilder


def _rows(b: GraphBuilder, il: int, out_ids: Tensor, *tensors: Tensor) -> list[Tensor]:
    """In the last layer only the output rows go on (`ggml_get_rows(cur, inp_out_ids)`)."""
    if il != b.hp.n_layer - 1:
        return list(tensors)
    return [g.get_rows(t, out_ids) for t in tensors]


def _attention(b: GraphBuilder, il: int, cur: Tensor, pos: Tensor, *, qk_norm: bool = False,
               scale_q: bool = False, bias_out: bool = True, sinks: bool = False) -> Tensor:  # fmt: skip
    """Q, K, V projections (optionally RMS-normed per head), rope, and `build_attn`."""
    hp = b.hp
    q, k, v = b.qkv(il, cur, hp.head_k(il), hp.n_head[il], hp.n_head_kv[il])
    if qk_norm:
        q = g.rope(b.norm(q, b.w("attn_q_norm.weight", il)), pos)
        k = g.rope(b.norm(k, b.w("attn_k_norm.weight", il)), pos)
    else:
        q, k = g.rope(q, pos), g.rope(k, pos)
    if scale_q:
        q = g.scale(q)
    wo_b = b.w("attn_output.bias", il) if bias_out else None
    return b.attn(il, q, k, v, b.w("attn_output.weight", il), wo_b, b.w("attn_sinks.weight", il) if sinks else None)


def _logits(b: GraphBuilder, embd: Tensor, *, bias: bool = False) -> Graph:
    logits = b.mm(b.output_weight(), embd)
    if bias and (out_b := b.w("output.bias")) is not None:
        logits = g.add(logits, out_b)
    return b.finish(embd, logits)


def _decoder(b: GraphBuilder, *, qk_norm: bool, ffn_biases: bool, output_bias: bool) -> Graph:
    """The llama-style block: pre-norm attention, pre-norm feed-forward (or experts), residuals."""
    hp = b.hp
    inp = b.inp_embd(b.w("token_embd.weight"))
    pos = b.inp_pos()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        cur = _attention(b, il, b.norm(inp, b.w("attn_norm.weight", il)), pos, qk_norm=qk_norm)
        cur, residual = _rows(b, il, out_ids, cur, inp)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w("ffn_norm.weight", il))
        if b.w("ffn_gate_inp.weight", il) is None:
            cur = b.ffn(cur, il, biases=ffn_biases)
        else:
            cur = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used)
        inp = g.add(cur, ffn_inp)
    return _logits(b, b.norm(inp, b.w("output_norm.weight")), bias=output_bias)


def llama(b: GraphBuilder) -> Graph:
    """`llama_model_llama::graph`: Llama 2/3, Mistral, and Mixtral-style experts."""
    return _decoder(b, qk_norm=False, ffn_biases=True, output_bias=False)


def qwen2(b: GraphBuilder) -> Graph:
    return _decoder(b, qk_norm=False, ffn_biases=False, output_bias=True)


def qwen3(b: GraphBuilder) -> Graph:
    """`llama_model_qwen3::graph` and `qwen3moe`: per-head RMS norms on Q and K."""
    return _decoder(b, qk_norm=True, ffn_biases=False, output_bias=False)


def gemma(b: GraphBuilder) -> Graph:
    """`llama_model_gemma2::graph` and `gemma3` (which adds per-head Q/K norms): scaled embeddings, norms after
    attention and feed-forward as well as before, GELU gating, soft-capped logits."""
    hp = b.hp
    gemma3 = hp.arch == "gemma3"
    inp = g.scale(b.inp_embd(b.w("token_embd.weight")))
    pos = b.inp_pos()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        cur = _attention(b, il, cur, pos, qk_norm=gemma3, scale_q=True, bias_out=False)
        cur, inp = _rows(b, il, out_ids, cur, inp)
        sa_out = g.add(b.norm(cur, b.w("post_attention_norm.weight", il)), inp)
        cur = b.ffn(b.norm(sa_out, b.w("ffn_norm.weight", il)), il, biases=False)
        inp = g.add(b.norm(cur, b.w("post_ffw_norm.weight", il)), sa_out)
    embd = b.norm(inp, b.w("output_norm.weight"))
    logits = b.mm(b.output_weight(), embd)
    if hp.flags.get("final_softcap"):
        logits = g.scale(g.unary(g.scale(logits), "tanh"))
    return b.finish(embd, logits)


def gpt_oss(b: GraphBuilder) -> Graph:
    """`llama_model_openai_moe::graph`: attention sinks, experts with biases and the clamped SwiGLU, the output
    rows picked after the last layer."""
    hp = b.hp
    inp = b.inp_embd(b.w("token_embd.weight"))
    pos = b.inp_pos()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        cur = _attention(b, il, b.norm(inp, b.w("attn_norm.weight", il)), pos, sinks=True)
        ffn_inp = g.add(cur, inp)
        cur = b.norm(ffn_inp, b.w("post_attention_norm.weight", il))
        cur = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used, gating="softmax_weight", norm_w=False, biases=True)
        inp = g.add(cur, ffn_inp)
    embd = b.norm(g.get_rows(inp, out_ids), b.w("output_norm.weight"))
    return b.finish(embd, b.mm(b.output_weight(), embd), hidden=inp)


def phi3(b: GraphBuilder) -> Graph:
    """`llama_model_phi3::graph`: fused QKV, and one up projection holding the gate (`ggml_swiglu`)."""
    hp = b.hp
    inp = b.inp_embd(b.w("token_embd.weight"))
    pos = b.inp_pos()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il), b.w("attn_norm.bias", il))
        cur = _attention(b, il, cur, pos, scale_q=True)
        cur, residual = _rows(b, il, out_ids, cur, inp)
        residual = g.add(cur, residual)
        cur = b.norm(residual, b.w("ffn_norm.weight", il), b.w("ffn_norm.bias", il))
        if b.w("ffn_gate_inp.weight", il) is None:
            cur = b.mm(b.w("ffn_down.weight", il), g.glu(b.mm(b.w("ffn_up.weight", il), cur)))
        else:
            cur = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used)
        inp = g.add(residual, cur)
    embd = b.norm(inp, b.w("output_norm.weight"), b.w("output_norm.bias"))
    return _logits(b, embd, bias=True)


_GATING = {0: "softmax", 1: "softmax", 2: "sigmoid", 3: "softmax_weight"}


def deepseek2(b: GraphBuilder) -> Graph:
    """`llama_model_deepseek2::graph`: multi-head latent attention (the compressed KV and the rope part cached,
    the no-rope queries absorbed into the latent space), dense leading layers, routed and shared experts."""
    hp = b.hp
    rope, rank = hp.n_rot, hp.n_lora_kv
    head_k = hp.head_k_mla if hp.is_mla else hp.head_k_full
    head_v = hp.head_v_mla if hp.is_mla else hp.head_v_full
    nope = head_k - rope
    inp = b.inp_embd(b.w("token_embd.weight"))
    pos = b.inp_pos()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    gating = _GATING[int(hp.flags.get("expert_gating_func", 0))]
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
            cur = b.attn(il, q, k, v, b.w("attn_output.weight", il), None)
        cur, residual = _rows(b, il, out_ids, cur, inp)
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
    return _logits(b, b.norm(inp, b.w("output_norm.weight")))


def bert(b: GraphBuilder) -> Graph:
    """`llama_model_bert::graph`: learned positions and token types, no cache, post-norms, GELU, pooling."""
    hp = b.hp
    pos = b.inp_pos()
    inp = b.inp_embd(b.w("token_embd.weight"))
    if (types := b.w("token_types.weight")) is not None:
        inp = g.add(inp, g.view(types, (hp.n_embd,)))
    inp = g.add(g.get_rows(b.w("position_embd.weight"), pos), inp)
    inp = b.norm(inp, b.w("token_embd_norm.weight"), b.w("token_embd_norm.bias"), rms=False)
    mask = b.attn_inp_no_cache()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        q, k, v = b.qkv(il, inp, hp.head_k_full, hp.n_head[il], hp.n_head_kv[il])
        for t in (q, k, v):
            b.expand(t)
        cur = b.attn_mha(q, k, v, mask)
        cur = g.add(b.mm(b.w("attn_output.weight", il), cur), b.w("attn_output.bias", il))
        cur, inp = _rows(b, il, out_ids, cur, inp)
        cur = g.add(cur, inp)
        ffn_inp = b.norm(cur, b.w("attn_output_norm.weight", il), b.w("attn_output_norm.bias", il), rms=False)
        cur = b.ffn(ffn_inp, il)
        cur = g.add(cur, ffn_inp)
        inp = b.norm(cur, b.w("layer_output_norm.weight", il), b.w("layer_output_norm.bias", il), rms=False)
    return b.finish(inp, None)


def _mamba2_layer(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    """`llm_build_mamba_base::build_mamba2_layer`: the input projection split into z, xBC and dt, the causal
    convolution over the stored conv state, the selective scan over the stored SSM state, the gated RMS norm."""
    hp = b.hp
    d_conv, d_inner, d_state, n_group = hp.ssm_d_conv, hp.ssm_d_inner, hp.ssm_d_state, hp.ssm_n_group
    n_head = hp.ssm_dt_rank
    head_dim = d_inner // n_head
    n_seqs = b.n_seqs
    per_seq = b.n_tokens // n_seqs
    channels = d_inner + 2 * n_group * d_state
    conv_states, ssm_states = b.rs_state(il, "r"), b.rs_state(il, "s")
    conv = g.reshape(b.build_rs(conv_states, hp.n_embd_r), d_conv - 1, channels, n_seqs)
    zxbcdt = b.mm(b.w("ssm_in.weight", il), cur)
    zxbcdt = g.reshape(zxbcdt, zxbcdt.ne[0], per_seq, n_seqs)
    nb = zxbcdt.nb
    z = g.view(zxbcdt, (head_dim, n_head, per_seq, n_seqs), (head_dim * nb[0], nb[1], nb[2]))
    xbc = g.view(zxbcdt, (channels, per_seq, n_seqs), (nb[1], nb[2]))
    dt = g.view(zxbcdt, (n_head, per_seq, n_seqs), (nb[1], nb[2]))
    conv_x = g.concat(conv, g.transpose(xbc), 0)
    last = g.view(conv_x, (d_conv - 1, channels, n_seqs), (conv_x.nb[1], conv_x.nb[2]))
    b.expand(g.cpy(last, g.view(conv_states, ((d_conv - 1) * channels, n_seqs), (conv_states.nb[1],))))
    xbc = g.unary(g.add(g.ssm_conv(conv_x, b.w("ssm_conv1d.weight", il)), b.w("ssm_conv1d.bias", il)), "silu")
    nb = xbc.nb
    x = g.view(xbc, (head_dim, n_head, per_seq, n_seqs), (head_dim * nb[0], nb[1], nb[2]))
    b_ssm = g.view(xbc, (d_state, n_group, per_seq, n_seqs), (d_state * nb[0], nb[1], nb[2]))
    c_ssm = g.view(xbc, (d_state, n_group, per_seq, n_seqs), (d_state * nb[0], nb[1], nb[2]))
    dt = g.add(g.cont(dt), b.w("ssm_dt.bias", il))
    slots = ssm_states.ne[1]

    def scan(states: Tensor, ids: Tensor) -> Tensor:
        ssm = g.reshape(states, d_state, head_dim, n_head, slots)
        return g.ssm_scan(ssm, x, dt, b.w("ssm_a", il), b_ssm, c_ssm, ids)

    y_ssm = b.build_rs(ssm_states, hp.n_embd_s, scan)
    size = d_state * d_inner
    row = g.row_size(y_ssm.type, size)
    b.expand(g.cpy(g.view(y_ssm, (size, n_seqs, 1), (row, row * n_seqs)),
                   g.view(ssm_states, (size, n_seqs, 1), (ssm_states.nb[1], ssm_states.nb[1] * slots))))  # fmt: skip
    xnb = x.nb[1]
    y = g.view(y_ssm, (head_dim, n_head, per_seq, n_seqs), (xnb, n_head * xnb, per_seq * n_head * xnb))
    y = g.add(y, g.mul(x, b.w("ssm_d", il)))
    y = g.glu_split(g.cont(z), y)
    if (norm := b.w("ssm_norm.weight", il)) is not None:
        y = b.norm(g.reshape(y, d_inner // n_group, n_group, per_seq, n_seqs), norm)
    return b.mm(b.w("ssm_out.weight", il), g.reshape(y, d_inner, per_seq * n_seqs))


def mamba2(b: GraphBuilder) -> Graph:
    """`llama_model_mamba::graph` for Mamba-2: every layer recurrent."""
    inp = b.inp_embd(b.w("token_embd.weight"))
    b.rs_inp()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        cur = _mamba2_layer(b, il, b.norm(inp, b.w("attn_norm.weight", il)))
        cur, inp = _rows(b, il, out_ids, cur, inp)
        inp = g.add(cur, inp)
    return _logits(b, b.norm(inp, b.w("output_norm.weight")))


def granite_hybrid(b: GraphBuilder) -> Graph:
    """`llama_model_granite_hybrid::graph`: Mamba-2 layers and attention layers (those with KV heads), each
    followed by a dense or mixture-of-experts FFN; optional embedding, residual and logit scales."""
    hp = b.hp
    inp = b.inp_embd(b.w("token_embd.weight"))
    b.rs_inp()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    pos = b.inp_pos() if hp.flags.get("rope", 1.0) else None
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        if hp.is_recurrent[il]:
            cur = _mamba2_layer(b, il, cur)
        else:
            q, k, v = b.qkv(il, cur, hp.head_k(il), hp.n_head[il], hp.n_head_kv[il])
            if pos is not None:
                q, k = g.rope(q, pos), g.rope(k, pos)
            cur = b.attn(il, q, k, v, b.w("attn_output.weight", il), b.w("attn_output.bias", il))
        cur, residual = _rows(b, il, out_ids, cur, inp)
        if hp.flags.get("residual_scale"):
            cur = g.scale(cur)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w("ffn_norm.weight", il))
        if b.w("ffn_gate_inp.weight", il) is None:
            cur = b.ffn(cur, il)
        else:
            moe = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used)
            cur = g.add(moe, b.ffn(cur, il, biases=False, suffix="_shexp")) if hp.n_ff_shexp else moe
        if hp.flags.get("residual_scale"):
            cur = g.scale(cur)
        inp = g.add(cur, ffn_inp)
    embd = b.norm(inp, b.w("output_norm.weight"))
    logits = b.mm(b.output_weight(), embd)
    if hp.flags.get("logit_scale"):
        logits = g.scale(logits)
    return b.finish(embd, logits)


GRAPHS: dict[str, Callable[[GraphBuilder], Graph]] = {
    "llama": llama,
    "qwen2": qwen2,
    "qwen3": qwen3,
    "qwen3moe": qwen3,
    "gemma2": gemma,
    "gemma3": gemma,
    "gpt-oss": gpt_oss,
    "phi3": phi3,
    "deepseek2": deepseek2,
    "bert": bert,
    "mamba2": mamba2,
    "granitehybrid": granite_hybrid,
}
