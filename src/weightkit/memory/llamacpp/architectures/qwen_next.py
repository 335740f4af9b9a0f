"""The gated delta-net hybrids' graphs: Qwen3-Next (qwen3next) and Qwen3.5 (qwen35, qwen35moe). Three of every four
layers are linear attention (a gated delta net over a recurrent state: the causal convolution's last inputs and a
state matrix per head), the fourth full attention with a gate on its output; the NextN (MTP) block is loaded but not
run in the main graph, and has no cache.

llama.cpp runs the delta net as its fused `ggml_gated_delta_net` on the CPU, for prompt batches and single tokens
alike (`fused_gdn_ch`, `fused_gdn_ar`), so both reserves build the same layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import ggml as g
from ..ggml import I32, Graph, Tensor
from ..graph_builder import GraphBuilder

MROPE_SECTIONS = 4  # GGML_MROPE_SECTIONS: Qwen3.5's (interleaved) M-RoPE takes four positions per token


def _qkvz_qwen35(b: GraphBuilder, il: int, cur: Tensor) -> tuple[Tensor, Tensor]:
    """The convolution's input (Q, K and V: `attn_qkv`) and the output gate Z (`attn_gate`)."""
    qkv = b.mm(b.w("attn_qkv.weight", il), cur)
    z = b.mm(b.w("attn_gate.weight", il), cur)
    return g.reshape(qkv, qkv.ne[0], b.n_tokens // b.n_seqs, b.n_seqs), z


def _qkvz_qwen3next(b: GraphBuilder, il: int, cur: Tensor) -> tuple[Tensor, Tensor]:
    """As Qwen3.5's, or from the legacy `ssm_in`: Q, K, V and Z of each key head in one projection, taken apart
    and the first three joined again in the convolution's order."""
    if b.w("attn_qkv.weight", il) is not None:
        return _qkvz_qwen35(b, il, cur)
    hp = b.hp
    per_seq, n_seqs = b.n_tokens // b.n_seqs, b.n_seqs
    head_k, n_k_heads, n_v_heads = hp.ssm_d_state, hp.ssm_n_group, hp.ssm_dt_rank
    head_v = hp.ssm_d_inner // n_v_heads
    per_k_head = head_v * n_v_heads // n_k_heads
    mixed = g.reshape(b.mm(b.w("ssm_in.weight", il), cur), 2 * head_k + 2 * per_k_head, n_k_heads, per_seq, n_seqs)
    q, k = (g.view(mixed, (head_k, n_k_heads, per_seq, n_seqs), mixed.nb[1:]) for _ in range(2))
    v, z = (g.view(mixed, (per_k_head, n_k_heads, per_seq, n_seqs), mixed.nb[1:]) for _ in range(2))
    z = g.cont(z)
    q, k = (g.cont(t, head_k * n_k_heads, per_seq, n_seqs) for t in (q, k))
    v = g.cont(v, head_v * n_v_heads, per_seq, n_seqs)
    return g.concat(g.concat(q, k, 0), v, 0), z


def _projections_qwen35(b: GraphBuilder, il: int, cur: Tensor, n_v_heads: int) -> tuple[Tensor, Tensor]:
    """Qwen3.5's beta and gate (`ssm_beta`, `ssm_alpha` projections): [1, heads, tokens, sequences] each."""
    per_seq, n_seqs = b.n_tokens // b.n_seqs, b.n_seqs
    beta = g.unary(g.reshape(b.mm(b.w("ssm_beta.weight", il), cur), 1, n_v_heads, per_seq, n_seqs), "sigmoid")
    alpha = g.reshape(b.mm(b.w("ssm_alpha.weight", il), cur), n_v_heads, per_seq, n_seqs)
    return beta, _gate(b, il, alpha, n_v_heads)


def _projections_qwen3next(b: GraphBuilder, il: int, cur: Tensor, n_v_heads: int) -> tuple[Tensor, Tensor]:
    """Qwen3-Next's beta and gate, from one projection (`ssm_ba`) split per key head."""
    hp = b.hp
    per_seq, n_seqs, n_k_heads = b.n_tokens // b.n_seqs, b.n_seqs, hp.ssm_n_group
    ratio = n_v_heads // n_k_heads
    ba = g.reshape(b.mm(b.w("ssm_ba.weight", il), cur), 2 * ratio, n_k_heads, per_seq, n_seqs)
    beta = g.view(ba, (ratio, n_k_heads, per_seq, n_seqs), ba.nb[1:])
    alpha = g.view(ba, (ratio, n_k_heads, per_seq, n_seqs), ba.nb[1:])
    beta = g.unary(g.cont(beta), "sigmoid")
    gate = _gate(b, il, g.cont(alpha, n_v_heads, per_seq, n_seqs), n_v_heads)
    return g.reshape(beta, 1, n_v_heads, per_seq, n_seqs), gate


def _gate(b: GraphBuilder, il: int, alpha: Tensor, n_v_heads: int) -> Tensor:
    """The decay: softplus(alpha + dt bias) * A, reshaped to [1, heads, tokens, sequences]."""
    gate = g.mul(g.unary(g.add(alpha, b.w("ssm_dt.bias", il)), "softplus"), b.w("ssm_a", il))
    return g.reshape(gate, 1, n_v_heads, b.n_tokens // b.n_seqs, b.n_seqs)


@dataclass(frozen=True)
class _Variant:
    """Where Qwen3-Next's and Qwen3.5's graphs differ."""

    n_pos: int  # positions per token (`n_pos_per_embd`)
    repeat_heads: bool  # Q and K repeated to the value heads before the delta net
    qkvz: Callable[[GraphBuilder, int, Tensor], tuple[Tensor, Tensor]]
    projections: Callable[[GraphBuilder, int, Tensor, int], tuple[Tensor, Tensor]]  # beta and the decay
    split: Callable[[Tensor, int, int, int], tuple[Tensor, Tensor]]  # the attention's Q and output gate


def _delta_net_layer(b: GraphBuilder, il: int, cur: Tensor, variant: _Variant) -> Tensor:
    """`build_layer_attn_linear`: the QKV and Z projections, beta and the decay, the causal convolution over the
    stored conv state (`build_conv_state`), the L2-normed Q and K (repeated to the value heads where the variant
    does), the gated delta net over the stored state (`build_recurrent_attn`), the gated RMS norm and the output
    projection."""
    hp = b.hp
    per_seq, n_seqs = b.n_tokens // b.n_seqs, b.n_seqs
    head_k, n_k_heads, n_v_heads = hp.ssm_d_state, hp.ssm_n_group, hp.ssm_dt_rank
    head_v = hp.ssm_d_inner // n_v_heads
    qkv, z = variant.qkvz(b, il, cur)
    beta, gate = variant.projections(b, il, cur, n_v_heads)
    conv_states, ssm_states = b.rs_state(il, "r"), b.rs_state(il, "s")
    channels = hp.ssm_d_inner + 2 * n_k_heads * head_k
    d_conv = hp.ssm_d_conv
    conv = g.reshape(b.build_rs(conv_states, hp.n_embd_r), d_conv - 1, channels, n_seqs)
    conv_input = g.concat(conv, g.transpose(qkv), 0)
    last = g.view(conv_input, (d_conv - 1, channels, n_seqs), conv_input.nb[1:3])
    b.expand(g.cpy(last, g.view(conv_states, ((d_conv - 1) * channels, n_seqs), (conv_states.nb[1],))))
    state = g.reshape(b.build_rs(ssm_states, hp.n_embd_s), head_v, head_v, n_v_heads, n_seqs)
    mixed = g.unary(g.ssm_conv(conv_input, b.w("ssm_conv1d.weight", il)), "silu")
    row = g.row_size(mixed.type, channels)
    size = mixed.nb[0]
    q = g.view(mixed, (head_k, n_k_heads, per_seq, n_seqs), (size * head_k, row, row * per_seq))
    k = g.view(mixed, (head_k, n_k_heads, per_seq, n_seqs), (size * head_k, row, row * per_seq))
    v = g.view(mixed, (head_v, n_v_heads, per_seq, n_seqs), (size * head_v, row, row * per_seq))
    q, k = gdn_l2_norm(q), gdn_l2_norm(k)
    if variant.repeat_heads and n_k_heads != n_v_heads:
        ratio, rows = n_v_heads // n_k_heads, per_seq * n_seqs
        q, k = (g.reshape(g.repeat(g.reshape(t, head_k, 1, n_k_heads, rows), head_k, ratio, n_k_heads, rows),
                          head_k, n_v_heads, per_seq, n_seqs) for t in (q, k))  # fmt: skip
    result = g.gated_delta_net(q, k, v, gate, beta, state)
    rs = g.row_size(result.type, 1)
    output = g.view(result, (head_v, n_v_heads, per_seq, n_seqs),
                    (rs * head_v, rs * head_v * n_v_heads, rs * head_v * n_v_heads * per_seq))  # fmt: skip
    new_state = g.view(result, (head_v, head_v, n_v_heads, n_seqs),
                       (rs * head_v, rs * head_v * head_v, rs * head_v * head_v * n_v_heads))  # fmt: skip
    b.expand(g.cpy(new_state, g.view(ssm_states, (hp.n_embd_s, n_seqs), (ssm_states.nb[1],))))
    z = g.reshape(z, head_v, n_v_heads, per_seq, n_seqs)
    gated = g.mul(b.norm(output, b.w("ssm_norm.weight", il)), g.unary(z, "silu"))
    cur = b.mm(b.w("ssm_out.weight", il), g.reshape(gated, head_v * n_v_heads, per_seq, n_seqs))
    return g.reshape(cur, hp.n_embd, b.n_tokens)


def gdn_l2_norm(t: Tensor) -> Tensor:
    """`build_gdn_l2_norm`: an RMS norm, scaled."""
    return g.scale(g.rms_norm(t))


def _gated_attention(b: GraphBuilder, il: int, cur: Tensor, pos: Tensor,
                     split: Callable[[Tensor, int, int, int], tuple[Tensor, Tensor]]) -> Tensor:  # fmt: skip
    """`build_layer_attn`: one projection holding each head's query and its output gate (split apart by `split`),
    per-head RMS norms on Q and K, rope, attention, the sigmoid gate, the output projection."""
    hp = b.hp
    head, n_head, n_head_kv, n_tokens = hp.head_k(il), hp.n_head[il], hp.n_head_kv[il], b.n_tokens
    q_full = b.mm(b.w("attn_q.weight", il), cur)
    k = g.reshape(b.mm(b.w("attn_k.weight", il), cur), head, n_head_kv, n_tokens)
    v = g.reshape(b.mm(b.w("attn_v.weight", il), cur), head, n_head_kv, n_tokens)
    q, gate = split(q_full, head, n_head, n_tokens)
    q = g.rope(b.norm(q, b.w("attn_q_norm.weight", il)), pos)
    k = g.rope(b.norm(k, b.w("attn_k_norm.weight", il)), pos)
    cur = b.attn(il, q, k, v, None, None)
    cur = g.mul(cur, g.unary(g.cont(gate, head * n_head, n_tokens), "sigmoid"))
    return b.mm(b.w("attn_output.weight", il), cur)


def _split_qwen35(q_full: Tensor, head: int, n_head: int, n_tokens: int) -> tuple[Tensor, Tensor]:
    """Qwen3.5: Q and gate as 3-d views of the projection."""
    row = g.row_size(q_full.type, 2 * head)
    return (g.view(q_full, (head, n_head, n_tokens), (row, row * n_head)),
            g.view(q_full, (head, n_head, n_tokens), (row, row * n_head)))  # fmt: skip


def _split_qwen3next(q_full: Tensor, head: int, n_head: int, n_tokens: int) -> tuple[Tensor, Tensor]:
    """Qwen3-Next: the projection reshaped to [2 * head, heads, tokens], Q and gate as 4-d views of it."""
    q_full = g.reshape(q_full, 2 * head, n_head, n_tokens, 1)
    return (g.view(q_full, (head, n_head, n_tokens, 1), q_full.nb[1:]),
            g.view(q_full, (head, n_head, n_tokens, 1), q_full.nb[1:]))  # fmt: skip


def _ffn(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    """A dense FFN, or routed experts plus a shared expert scaled by its own sigmoid gate."""
    hp = b.hp
    if b.w("ffn_gate_inp.weight", il) is None:
        return b.ffn(cur, il, biases=False)
    moe = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used)
    if b.w("ffn_up_shexp.weight", il) is None:
        return moe
    shared = b.ffn(cur, il, biases=False, suffix="_shexp")
    shared = g.mul(shared, g.unary(b.mm(b.w("ffn_gate_inp_shexp.weight", il), cur), "sigmoid"))
    return g.add(moe, shared)


def _hybrid(b: GraphBuilder, variant: _Variant) -> Graph:
    """The main graph (not the MTP one): pre-norm linear or full attention, a post-attention norm before the FFN,
    residuals; the output rows picked after the final norm, whose whole output is kept for the MTP head."""
    hp = b.hp
    inp = b.inp_embd(b.w("token_embd.weight"))
    b.rs_inp()
    b.attn_inp_kv()
    pos = g.graph_input(I32, (b.n_tokens * variant.n_pos,), "inp_pos")
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        cur = b.expand(b.norm(inp, b.w("attn_norm.weight", il)))
        if hp.is_recurrent[il]:
            cur = _delta_net_layer(b, il, cur, variant)
        else:
            cur = _gated_attention(b, il, cur, pos, variant.split)
        residual = g.add(cur, inp)
        cur = _ffn(b, il, b.norm(residual, b.w("post_attention_norm.weight", il)))
        inp = g.add(cur, residual)
    hidden = b.norm(inp, b.w("output_norm.weight"))
    embd = g.get_rows(hidden, out_ids)
    return b.finish(embd, b.mm(b.output_weight(), embd), hidden=hidden)


_QWEN3NEXT = _Variant(1, True, _qkvz_qwen3next, _projections_qwen3next, _split_qwen3next)
_QWEN35 = _Variant(MROPE_SECTIONS, False, _qkvz_qwen35, _projections_qwen35, _split_qwen35)


def qwen3next(b: GraphBuilder) -> Graph:
    """`llama_model_qwen3next::graph`: plain rope; Q and K repeated to the value heads before the delta net; the
    legacy fused `ssm_in` too."""
    return _hybrid(b, _QWEN3NEXT)


def qwen35(b: GraphBuilder) -> Graph:
    """`llama_model_qwen35::graph` and `qwen35moe`: interleaved M-RoPE; the fused delta net broadcasts the key
    heads itself."""
    return _hybrid(b, _QWEN35)
