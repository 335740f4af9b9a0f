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
    inp, pos, out_ids = b.decoder_inputs()
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
    inp, pos, out_ids = b.decoder_inputs()
    inp = g.scale(inp)
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
    inp, pos, out_ids = b.decoder_inputs()
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
    inp, pos, out_ids = b.decoder_inputs()
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
    inp, pos, out_ids = b.decoder_inputs()
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


def _mamba_layer(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    """`llm_build_mamba_base::build_mamba_layer` (Mamba-1): the input projection split into x and z, the causal
    convolution over the stored conv state, x projected to dt, B and C (RMS-normed where the model says so), the
    selective scan over the stored SSM state (one state per channel and per state dimension), the gate."""
    hp = b.hp
    d_conv, d_inner, d_state, dt_rank = hp.ssm_d_conv, hp.ssm_d_inner, hp.ssm_d_state, hp.ssm_dt_rank
    n_seqs = b.n_seqs
    per_seq = b.n_tokens // n_seqs
    conv_states, ssm_states = b.rs_state(il, "r"), b.rs_state(il, "s")
    conv = g.reshape(b.build_rs(conv_states, hp.n_embd_r), d_conv - 1, d_inner, n_seqs)
    xz = b.mm(b.w("ssm_in.weight", il), g.reshape(cur, cur.ne[0], per_seq, n_seqs))
    x = g.view(xz, (d_inner, per_seq, n_seqs), xz.nb[1:3])
    z = g.view(xz, (d_inner, per_seq, n_seqs), xz.nb[1:3])
    conv_x = g.concat(conv, g.transpose(x), 0)
    last = g.view(conv_x, (d_conv - 1, d_inner, n_seqs), conv_x.nb[1:3])
    b.expand(g.cpy(last, g.view(conv_states, ((d_conv - 1) * d_inner * n_seqs,))))
    x = g.unary(g.add(g.ssm_conv(conv_x, b.w("ssm_conv1d.weight", il)), b.w("ssm_conv1d.bias", il)), "silu")
    x_db = b.mm(b.w("ssm_x.weight", il), x)
    nb = x_db.nb
    dt = g.view(x_db, (dt_rank, per_seq, n_seqs), nb[1:3])
    b_ssm = g.view(x_db, (d_state, 1, per_seq, n_seqs), (d_state * nb[0], nb[1], nb[2]))
    c_ssm = g.view(x_db, (d_state, 1, per_seq, n_seqs), (d_state * nb[0], nb[1], nb[2]))
    if hp.flags.get("ssm_dt_b_c_rms"):
        dt, b_ssm, c_ssm = b.norm(dt, None), b.norm(b_ssm, None), b.norm(c_ssm, None)
    else:
        dt = g.cont(dt)
    dt = g.add(b.mm(b.w("ssm_dt.weight", il), dt), b.w("ssm_dt.bias", il))
    heads = g.reshape(x, 1, d_inner, per_seq, n_seqs)

    def scan(states: Tensor, ids: Tensor) -> Tensor:
        ssm = g.reshape(states, d_state, 1, d_inner, ssm_states.ne[1])
        return g.ssm_scan(ssm, heads, dt, b.w("ssm_a", il), b_ssm, c_ssm, ids)

    y_ssm = b.build_rs(ssm_states, hp.n_embd_s, scan)
    size = d_state * d_inner * n_seqs
    b.expand(g.cpy(g.view(y_ssm, (size,)), g.view(ssm_states, (size,))))
    y = g.view(y_ssm, (d_inner, per_seq, n_seqs), heads.nb[2:4])
    y = g.glu_split(g.cont(z), g.add(y, g.mul(x, b.w("ssm_d", il))))
    cur = b.mm(b.w("ssm_out.weight", il), y)
    return g.reshape(cur, cur.ne[0], per_seq * n_seqs)


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


def mamba(b: GraphBuilder) -> Graph:
    """`llama_model_mamba::graph`: every layer recurrent, Mamba-1's or Mamba-2's (`mamba2`)."""
    layer = _mamba2_layer if b.hp.arch == "mamba2" else _mamba_layer
    inp = b.inp_embd(b.w("token_embd.weight"))
    b.rs_inp()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        cur = layer(b, il, b.norm(inp, b.w("attn_norm.weight", il)))
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


def _wkv_state(b: GraphBuilder, il: int, out: Tensor) -> Tensor:
    """The WKV op's new states written back (`ggml_cpy` into the layer's state); its outputs, one row a token."""
    hp = b.hp
    state = b.rs_state(il, "s")
    size = hp.n_embd * hp.wkv_head_size * b.n_seqs
    b.expand(g.cpy(g.view(out, (size,)), g.view(state, (hp.n_embd_s * b.n_seqs,))))
    return g.view(out, (hp.n_embd * b.n_tokens,))


def _group_norm(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    """The WKV outputs layer-normed per head, then scaled and shifted by `time_mix_ln`."""
    head = b.hp.wkv_head_size
    cur = g.norm(g.reshape(cur, head, b.hp.n_embd // head, b.n_tokens))
    cur = g.reshape(cur, b.hp.n_embd, b.n_tokens)
    return g.add(g.mul(cur, b.w("time_mix_ln.weight", il)), b.w("time_mix_ln.bias", il))


def _rwkv6_time_mix(b: GraphBuilder, il: int, cur: Tensor, x_prev: Tensor) -> Tensor:
    """`build_rwkv6_time_mix`: data-dependent token shift (a LoRA giving five mixes of the token and the previous
    one: w, k, v, r, g), the decay's LoRA, WKV-6 over the stored state, the per-head norm and the gate."""
    hp = b.hp
    n_embd, n_tokens, head = hp.n_embd, b.n_tokens, hp.wkv_head_size
    n_head = n_embd // head
    sx = g.reshape(g.sub(x_prev, cur), n_embd, n_tokens)
    cur = g.reshape(cur, n_embd, n_tokens)
    xxx = g.add(g.mul(sx, b.w("time_mix_lerp_x.weight", il)), cur)
    w1, w2 = b.w("time_mix_w1.weight", il), b.w("time_mix_w2.weight", il)
    xxx = g.reshape(g.unary(g.mul_mat(w1, xxx), "tanh"), w1.ne[1] // 5, 1, 5, n_tokens)
    xxx = g.mul_mat(g.reshape(w2, w2.ne[0], w2.ne[1], 1, 5), g.cont(g.permute(xxx, 0, 1, 3, 2)))
    fused = b.w("time_mix_lerp_fused.weight", il)
    if fused is not None:
        sx, cur = g.reshape(sx, n_embd, 1, n_tokens), g.reshape(cur, n_embd, 1, n_tokens)
        xxx = g.add(g.mul(g.add(xxx, fused), sx), cur)
    mixes = [g.view(xxx, (n_embd, n_tokens), xxx.nb[1:2]) for _ in "wkvrg"]
    if fused is None:  # files converted before the five mixes were fused
        lerps = [b.w(f"time_mix_lerp_{name}.weight", il) for name in "wkvrg"]
        mixes = [g.add(g.mul(g.add(x, lerp), sx), cur) for x, lerp in zip(mixes, lerps, strict=True)]
    xw, xk, xv, xr, xg = mixes
    r = g.reshape(b.mm(b.w("time_mix_receptance.weight", il), xr), head, n_head, n_tokens)
    k = g.reshape(b.mm(b.w("time_mix_key.weight", il), xk), head, n_head, n_tokens)
    v = g.reshape(b.mm(b.w("time_mix_value.weight", il), xv), head, n_head, n_tokens)
    gate = g.unary(b.mm(b.w("time_mix_gate.weight", il), xg), "silu")
    w = g.mul_mat(b.w("time_mix_decay_w2.weight", il),
                  g.unary(g.mul_mat(b.w("time_mix_decay_w1.weight", il), xw), "tanh"))  # fmt: skip
    w = g.unary(g.unary(g.unary(g.add(w, b.w("time_mix_decay.weight", il)), "exp"), "neg"), "exp")
    w = g.reshape(w, head, n_head, n_tokens)
    state = b.build_rs(b.rs_state(il, "s"), hp.n_embd_s)
    cur = _wkv_state(b, il, g.rwkv_wkv6(k, v, r, b.w("time_mix_first.weight", il), w, state))
    cur = g.mul(_group_norm(b, il, cur), gate)
    cur = b.mm(b.w("time_mix_output.weight", il), cur)
    return g.reshape(cur, n_embd, n_tokens // b.n_seqs, b.n_seqs)


def _rwkv7_time_mix(b: GraphBuilder, il: int, cur: Tensor, x_prev: Tensor, v_first: Tensor | None,
                    ) -> tuple[Tensor, Tensor]:  # fmt: skip
    """`build_rwkv7_time_mix`: six mixes of the token and the previous one (r, w, k, v, a, g), LoRAs for the
    decay, the in-context learning rate, the gate and (after the first layer) the mix with the first layer's
    values, WKV-7 over the stored state, the per-head norm, the bonus term and the gate. Returns the output and
    the first layer's values. (llama.cpp's loader insists on the gate and the norm.)"""
    hp = b.hp
    n_embd, n_tokens, head = hp.n_embd, b.n_tokens, hp.wkv_head_size
    n_head = n_embd // head

    def w(name: str) -> Tensor:
        return b.w(f"time_mix_{name}.weight", il)

    sx = g.repeat(g.sub(x_prev, cur), *cur.ne[:3], 6)
    xxx = g.add(g.mul(sx, w("lerp_fused")), cur)
    xr, xw, xk, xv, xa, xg = (g.view(xxx, (n_embd, n_tokens), xxx.nb[1:2]) for _ in range(6))
    r = b.mm(w("receptance"), xr)
    decay = g.add(g.mul_mat(w("w2"), g.unary(g.mul_mat(w("w1"), xw), "tanh")), w("w0"))
    decay = g.unary(g.scale(g.unary(decay, "sigmoid")), "exp")
    k = b.mm(w("key"), xk)
    v = b.mm(w("value"), xv)
    if v_first is None:
        v_first = v
    else:
        mix = g.unary(g.add(g.mul_mat(w("v2"), g.mul_mat(w("v1"), xv)), w("v0")), "sigmoid")
        v = g.add(v, g.mul(g.sub(v_first, v), mix))
    gate = g.mul_mat(w("g2"), g.unary(g.mul_mat(w("g1"), xg), "sigmoid"))
    a = g.unary(g.add(g.mul_mat(w("a2"), g.mul_mat(w("a1"), xa)), w("a0")), "sigmoid")
    kk = g.l2_norm(g.reshape(g.mul(k, w("k_k")), head, n_head, n_tokens))
    ka = g.mul(k, w("k_a"))
    k = g.add(k, g.sub(g.mul(a, ka), ka))
    r, decay, k, v, a = (g.reshape(t, head, n_head, n_tokens) for t in (r, decay, k, v, a))
    state = b.build_rs(b.rs_state(il, "s"), hp.n_embd_s)
    cur = _wkv_state(b, il, g.rwkv_wkv7(r, decay, k, v, g.unary(kk, "neg"), g.mul(kk, a), state))
    rk = g.sum_rows(g.mul(g.mul(k, r), g.reshape(w("r_k"), head, n_head)))
    cur = g.add(_group_norm(b, il, cur), g.reshape(g.mul(v, rk), n_embd, n_tokens))
    cur = b.mm(w("output"), g.mul(cur, gate))
    return g.reshape(cur, n_embd, n_tokens // b.n_seqs, b.n_seqs), v_first


def _channel_mix(b: GraphBuilder, il: int, cur: Tensor, x_prev: Tensor) -> Tensor:
    """`build_rwkv6_channel_mix` / `build_rwkv7_channel_mix`: a squared-ReLU FFN on a mix of the token and the
    previous one, gated by a sigmoid receptance where the layer has one (RWKV-6)."""
    sx = g.sub(x_prev, cur)
    xk = g.add(g.mul(sx, b.w("channel_mix_lerp_k.weight", il)), cur)
    receptance = b.w("channel_mix_receptance.weight", il)
    r = None
    if receptance is not None:
        r = g.unary(b.mm(receptance, g.add(g.mul(sx, b.w("channel_mix_lerp_r.weight", il)), cur)), "sigmoid")
    k = g.sqr(g.unary(b.mm(b.w("channel_mix_key.weight", il), xk), "relu"))
    cur = b.mm(b.w("channel_mix_value.weight", il), k)
    return cur if r is None else g.mul(r, cur)


def rwkv(b: GraphBuilder) -> Graph:
    """`llama_model_rwkv6::graph` and `rwkv7`: the embeddings layer-normed; in each layer the time mix and the
    channel mix, each fed the normed token and the one before it (the batch's previous token, or the stored
    token shift at a sequence's start), the last normed tokens stored back; RWKV-6 halves the residual every
    `rescale_every_n_layers` layers."""
    hp = b.hp
    n_embd, n_seqs = hp.n_embd, b.n_seqs
    per_seq = b.n_tokens // n_seqs
    inp = b.inp_embd(b.w("token_embd.weight"))
    inp = b.norm(inp, b.w("token_embd_norm.weight"), b.w("token_embd_norm.bias"), rms=False, il=0)
    b.rs_inp()
    out_ids = b.inp_out_ids()
    v_first = None

    def shifted(shift: Tensor, normed: Tensor) -> Tensor:
        """The previous token of each: the stored shift, then the batch's tokens but the last."""
        return g.concat(shift, g.view(normed, (n_embd, per_seq - 1, n_seqs), normed.nb[1:3]), 1)

    def last(normed: Tensor) -> Tensor:
        return g.view(normed, (n_embd, 1, n_seqs), normed.nb[1:3])

    for il in b.each_layer():
        inp = g.reshape(inp, n_embd, per_seq, n_seqs)
        shift = b.token_shift_load(il)
        att_shift = g.view(shift, (n_embd, 1, n_seqs), shift.nb[1:3])
        ffn_shift = g.view(shift, (n_embd, 1, n_seqs), shift.nb[1:3])
        att_norm = b.norm(inp, b.w("attn_norm.weight", il), b.w("attn_norm.bias", il), rms=False)
        if hp.arch == "rwkv6":
            cur = _rwkv6_time_mix(b, il, att_norm, shifted(att_shift, att_norm))
        else:
            cur, v_first = _rwkv7_time_mix(b, il, att_norm, shifted(att_shift, att_norm), v_first)
        ffn_inp = g.add(cur, inp)
        ffn_norm = b.norm(ffn_inp, b.w("attn_norm_2.weight", il), b.w("attn_norm_2.bias", il), rms=False)
        x_prev = shifted(ffn_shift, ffn_norm)
        b.expand(b.token_shift_store(g.concat(last(att_norm), last(ffn_norm), 1), il))
        ffn_inp, ffn_norm, x_prev = (g.reshape(t, n_embd, b.n_tokens) for t in (ffn_inp, ffn_norm, x_prev))
        ffn_inp, ffn_norm, x_prev = _rows(b, il, out_ids, ffn_inp, ffn_norm, x_prev)
        cur = g.add(_channel_mix(b, il, ffn_norm, x_prev), ffn_inp)
        if hp.rescaled(il):
            cur = g.scale(cur)
        inp = cur
    embd = b.norm(inp, b.w("output_norm.weight"), b.w("output_norm.bias"), rms=False)
    return _logits(b, embd)


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
    "mamba": mamba,
    "mamba2": mamba,
    "granitehybrid": granite_hybrid,
    "rwkv6": rwkv,
    "rwkv7": rwkv,
}
