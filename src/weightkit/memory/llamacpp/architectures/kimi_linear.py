"""Kimi-Linear's graph (kimi-linear): KDA layers (Kimi delta attention: Q, K and V each through a causal
convolution over its stored last inputs, a decay per channel, the gated delta net over a state matrix per head)
between MLA layers without rope over a K-only cache; a dense first FFN, then routed and shared experts.

llama.cpp runs the delta net as its fused `ggml_gated_delta_net` on the CPU (the decay per channel as the fused op
takes it), for prompt batches and single tokens alike, so both reserves build the same layer.
"""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph, Tensor
from ..graph_builder import GraphBuilder
from .decoder import logits, output_rows
from .deepseek import GATING, expert_ffn
from .qwen_next import gdn_l2_norm


def _causal_conv(b: GraphBuilder, il: int, cur: Tensor, states: Tensor, state: Tensor, name: str) -> Tensor:
    """`causal_conv1d`: one of Q, K, V (`name`) projected, joined after its part of the stored conv state, its last
    inputs written back, convolved and SiLU'd: [head, heads, tokens, sequences]."""
    hp = b.hp
    per_seq, n_seqs = b.n_tokens // b.n_seqs, b.n_seqs
    head, n_head, d_conv = hp.n_embd_head_kda, hp.n_head[il], hp.ssm_d_conv
    d_inner = head * n_head
    size = g.row_size(state.type, 1)
    part = g.view(state, (d_conv - 1, d_inner, n_seqs), (size * (d_conv - 1), size * hp.n_embd_r))
    x = g.reshape(b.mm(b.w(f"attn_{name}.weight", il), cur), d_inner, per_seq, n_seqs)
    conv_x = g.concat(part, g.transpose(x), 0)
    last = g.view(conv_x, (d_conv - 1, d_inner, n_seqs), conv_x.nb[1:3])
    b.expand(g.cpy(last, g.view(states, (d_conv - 1, d_inner, n_seqs), (size * (d_conv - 1), size * hp.n_embd_r))))
    weight = g.reshape(b.w(f"ssm_conv1d_{name}.weight", il), d_conv, d_inner)
    out = g.unary(g.reshape(g.ssm_conv(conv_x, weight), d_inner, b.n_tokens), "silu")
    return g.reshape(out, head, n_head, per_seq, n_seqs)


def _kda_layer(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    """The KDA layer: Q, K, V convolutions, the decay softplus(f_b(f_a(x)) + dt bias) * A per channel, the sigmoid
    beta, the L2-normed Q and K through the gated delta net over the stored state (written back), the output RMS
    normed per head and gated by sigmoid(g_b(g_a(x))), projected out."""
    hp = b.hp
    per_seq, n_seqs = b.n_tokens // b.n_seqs, b.n_seqs
    head, n_head = hp.n_embd_head_kda, hp.n_head[il]
    conv_states = b.rs_state(il, "r")
    conv_state = b.build_rs(conv_states, hp.n_embd_r)
    q, k, v = (_causal_conv(b, il, cur, conv_states, conv_state, name) for name in "qkv")
    decay = g.add(b.mm(b.w("ssm_f_b.weight", il), b.mm(b.w("ssm_f_a.weight", il), cur)), b.w("ssm_dt.bias", il))
    decay = g.reshape(g.unary(decay, "softplus"), head, n_head, b.n_tokens)
    decay = g.mul(decay, g.reshape(b.w("ssm_a", il), 1, n_head, 1))
    decay = g.reshape(decay, head, n_head, per_seq, n_seqs)
    beta = g.reshape(b.mm(b.w("ssm_beta.weight", il), cur), 1, n_head, per_seq, n_seqs)
    beta = g.unary(beta, "sigmoid")
    cur = g.reshape(cur, cur.ne[0], per_seq, n_seqs)
    ssm_states = b.rs_state(il, "s")
    state = g.reshape(b.build_rs(ssm_states, hp.n_embd_s), head, head, n_head, n_seqs)
    result = g.gated_delta_net(gdn_l2_norm(q), gdn_l2_norm(k), v, decay, beta, state)
    rs = g.row_size(result.type, 1)
    output = g.view(result, (head, n_head, per_seq, n_seqs),
                    (rs * head, rs * head * n_head, rs * head * n_head * per_seq))  # fmt: skip
    new_state = g.view(result, (head, head, n_head, n_seqs),
                       (rs * head, rs * head * head, rs * head * head * n_head))  # fmt: skip
    output = g.cont(output)
    b.expand(g.cpy(new_state, g.view(ssm_states, (hp.n_embd_s * n_seqs,))))
    gate = b.mm(b.w("ssm_g_b.weight", il), b.mm(b.w("ssm_g_a.weight", il), g.reshape(cur, cur.ne[0], b.n_tokens)))
    gate = g.reshape(gate, head, n_head, b.n_tokens)
    normed = b.norm(g.reshape(output, head, n_head, b.n_tokens), b.w("ssm_norm.weight", il))
    gated = g.cont(g.mul(normed, g.unary(gate, "sigmoid")), head * n_head, b.n_tokens)
    return b.mm(b.w("attn_output.weight", il), gated)


def _mla_layer(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    """The MLA layer without rope, over a K-only cache: the no-rope queries absorbed into the latent space, the
    compressed KV normed and cached beside the uncompressed rope part, V decompressed after the attention."""
    hp = b.hp
    rope, rank, head_k, n_head = hp.n_rot, hp.n_lora_kv, hp.head_k_mla, hp.n_head[il]
    q = b.mm(b.w("attn_q.weight", il), cur)
    kv_pe = b.mm(b.w("attn_kv_a_mqa.weight", il), cur)
    row = g.row_size(kv_pe.type, rank + rope)
    kv = g.view(kv_pe, (rank, b.n_tokens), (row,))
    k_pe = g.view(kv_pe, (rope, 1, b.n_tokens), (row, row))
    kv = b.norm(kv, b.w("attn_kv_a_norm.weight", il))
    q_row = g.row_size(q.type, head_k)
    q_nope = g.view(q, (head_k - rope, n_head, b.n_tokens), (q_row, q_row * n_head))
    q_pe = g.view(q, (rope, n_head, b.n_tokens), (q_row, q_row * n_head))
    absorbed = g.permute(b.mm(b.w("attn_k_b.weight", il), g.permute(q_nope, 0, 2, 1, 3)), 0, 2, 1, 3)
    q = g.concat(absorbed, q_pe, 0)
    kv = g.reshape(kv, rank, 1, b.n_tokens)
    return b.attn_k_only(il, q, g.concat(kv, k_pe, 0), kv, b.w("attn_output.weight", il),
                         b.w("attn_v_b.weight", il))  # fmt: skip


def kimi_linear(b: GraphBuilder) -> Graph:
    """`llama_model_kimi_linear::graph`: pre-normed KDA or MLA attention, residual, pre-normed FFN (dense in the
    leading layers, else routed experts with renormalized weights beside a shared expert), residual; the output
    rows taken in the last layer."""
    hp = b.hp
    inp = b.inp_embd(b.w("token_embd.weight"))
    b.rs_inp()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    gating = GATING[int(hp.flags.get("expert_gating_func", 0))]
    for il in b.each_layer():
        cur = b.expand(b.norm(inp, b.w("attn_norm.weight", il)))
        cur = _kda_layer(b, il, cur) if hp.is_recurrent[il] else _mla_layer(b, il, cur)
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w("ffn_norm.weight", il))
        cur = expert_ffn(b, il, cur, gating, norm_w=True)
        inp = g.add(cur, ffn_inp)
    return logits(b, b.norm(inp, b.w("output_norm.weight")))
