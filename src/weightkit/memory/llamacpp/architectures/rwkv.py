"""RWKV-6 and RWKV-7's graphs."""

from __future__ import annotations

from collections.abc import Callable

from .. import ggml as g
from ..ggml import Graph, Tensor
from ..graph_builder import GraphBuilder
from .decoder import logits, output_rows


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


def _rwkv6_time_mix(b: GraphBuilder, il: int, cur: Tensor, x_prev: Tensor, v_first: None) -> tuple[Tensor, None]:
    """`build_rwkv6_time_mix`: data-dependent token shift (a LoRA giving five mixes of the token and the previous
    one: w, k, v, r, g), the decay's LoRA, WKV-6 over the stored state, the per-head norm and the gate. RWKV-6 keeps
    no first layer's values: `v_first` stays None."""
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
    return g.reshape(cur, n_embd, n_tokens // b.n_seqs, b.n_seqs), v_first


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


def _rwkv(b: GraphBuilder, time_mix: Callable[..., tuple[Tensor, Tensor | None]]) -> Graph:
    """RWKV's graph, each layer's time mix built by `time_mix`: the embeddings layer-normed; in each layer the time
    mix and the channel mix, each fed the normed token and the one before it (the batch's previous token, or the
    stored token shift at a sequence's start), the last normed tokens stored back; RWKV-6 halves the residual
    every `rescale_every_n_layers` layers."""
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
        cur, v_first = time_mix(b, il, att_norm, shifted(att_shift, att_norm), v_first)
        ffn_inp = g.add(cur, inp)
        ffn_norm = b.norm(ffn_inp, b.w("attn_norm_2.weight", il), b.w("attn_norm_2.bias", il), rms=False)
        x_prev = shifted(ffn_shift, ffn_norm)
        b.expand(b.token_shift_store(g.concat(last(att_norm), last(ffn_norm), 1), il))
        ffn_inp, ffn_norm, x_prev = (g.reshape(t, n_embd, b.n_tokens) for t in (ffn_inp, ffn_norm, x_prev))
        ffn_inp, ffn_norm, x_prev = output_rows(b, il, out_ids, ffn_inp, ffn_norm, x_prev)
        cur = g.add(_channel_mix(b, il, ffn_norm, x_prev), ffn_inp)
        if hp.rescaled(il):
            cur = g.scale(cur)
        inp = cur
    embd = b.norm(inp, b.w("output_norm.weight"), b.w("output_norm.bias"), rms=False)
    return logits(b, embd)


def rwkv6(b: GraphBuilder) -> Graph:
    """`llama_model_rwkv6::graph`."""
    return _rwkv(b, _rwkv6_time_mix)


def rwkv7(b: GraphBuilder) -> Graph:
    """`llama_model_rwkv7::graph`."""
    return _rwkv(b, _rwkv7_time_mix)
