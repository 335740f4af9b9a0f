"""The gated delta-net hybrids' graphs: Qwen3-Next (qwen3next) and Qwen3.5 (qwen35, qwen35moe). Three of every four
layers are linear attention (a gated delta net over a recurrent state: the causal convolution's last inputs and a
state matrix per head), the fourth full attention with a gate on its output; the NextN (MTP) block is loaded but not
run in the main graph, and has no cache.

llama.cpp runs the delta net as its fused `ggml_gated_delta_net` on the CPU, for prompt batches and single tokens
alike (`fused_gdn_ch`, `fused_gdn_ar`), so both reserves build the same layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .. import ggml as g
from ..ggml import F32, I32, Graph, Tensor
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


def _conv_state(b: GraphBuilder, states: Tensor, x: Tensor, cols: int, channels: int) -> Tensor:
    """`build_conv_state`: the stored last inputs of each sequence before the batch's (`x`, [channels, tokens,
    sequences]), the last `cols` of them written back."""
    conv = g.reshape(b.build_rs(states, states.ne[0]), cols, channels, b.n_seqs)
    conv_input = g.concat(conv, g.transpose(x), 0)
    last = g.view(conv_input, (cols, channels, b.n_seqs), conv_input.nb[1:3])
    b.expand(g.cpy(last, g.view(states, (cols * channels, b.n_seqs), (states.nb[1],))))
    return conv_input


def _conv_state_at(b: GraphBuilder, states: Tensor, x: Tensor, cols: int, channels: int) -> Tensor:
    """Qwen4-Exp's `build_conv_state_at`: as `build_conv_state`, the kept columns made contiguous before they are
    written back (one rollback slot: `n_rs_seq` is 0)."""
    conv = g.reshape(b.build_rs(states, states.ne[0]), cols, channels, b.n_seqs)
    conv_input = g.concat(conv, g.transpose(x), 0)
    tail = g.view(conv_input, (cols, channels, b.n_seqs), conv_input.nb[1:3])
    b.expand(g.cpy(g.cont(tail), g.view(states, (cols * channels, b.n_seqs), (states.nb[1],))))
    return conv_input


@dataclass(frozen=True)
class _Variant:
    """Where Qwen3-Next's, Qwen3.5's and Qwen4-Exp's graphs differ."""

    n_pos: int  # positions per token (`n_pos_per_embd`)
    repeat_heads: bool  # Q and K repeated to the value heads before the delta net
    qkvz: Callable[[GraphBuilder, int, Tensor], tuple[Tensor, Tensor]]
    projections: Callable[[GraphBuilder, int, Tensor, int], tuple[Tensor, Tensor]]  # beta and the decay
    split: Callable[[Tensor, int, int, int], tuple[Tensor, Tensor]]  # the attention's Q and output gate
    conv_state: Callable[[GraphBuilder, Tensor, Tensor, int, int], Tensor] = _conv_state
    out_gate: str = "silu"  # the delta net's output gate's activation


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
    conv_input = variant.conv_state(b, conv_states, qkv, hp.ssm_d_conv - 1, channels)
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
    gated = g.mul(b.norm(output, b.w("ssm_norm.weight", il)), g.unary(z, variant.out_gate))
    cur = b.mm(b.w("ssm_out.weight", il), g.reshape(gated, head_v * n_v_heads, per_seq, n_seqs))
    return g.reshape(cur, hp.n_embd, b.n_tokens)


def gdn_l2_norm(t: Tensor) -> Tensor:
    """`build_gdn_l2_norm`: an RMS norm, scaled."""
    return g.scale(g.rms_norm(t))


def _gated_attention(b: GraphBuilder, il: int, cur: Tensor, pos: Tensor,
                     split: Callable[[Tensor, int, int, int], tuple[Tensor, Tensor]],
                     top_k: Tensor | None = None) -> Tensor:  # fmt: skip
    """`build_layer_attn`: one projection holding each head's query and its output gate (split apart by `split`),
    per-head RMS norms on Q and K, rope, attention (to the cells `top_k` names, where given), the sigmoid gate,
    the output projection."""
    hp = b.hp
    head, n_head, n_head_kv, n_tokens = hp.head_k(il), hp.n_head[il], hp.n_head_kv[il], b.n_tokens
    q_full = b.mm(b.w("attn_q.weight", il), cur)
    k = g.reshape(b.mm(b.w("attn_k.weight", il), cur), head, n_head_kv, n_tokens)
    v = g.reshape(b.mm(b.w("attn_v.weight", il), cur), head, n_head_kv, n_tokens)
    q, gate = split(q_full, head, n_head, n_tokens)
    q = g.rope(b.norm(q, b.w("attn_q_norm.weight", il)), pos)
    k = g.rope(b.norm(k, b.w("attn_k_norm.weight", il)), pos)
    cur = b.attn(il, q, k, v, None, None, top_k=top_k)
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


_QWEN4EXP = replace(_QWEN35, conv_state=_conv_state_at, out_gate="sigmoid")


def _hc_mix(b: GraphBuilder, x: Tensor, weights: str, il: int | None) -> tuple[Tensor, Tensor | None]:
    """`build_hc_mix`: the streams [n_embd, hc, tokens] RMS-normed each, the low-rank gate, and their gated mean
    (fused, `ggml_dsv4_hc_pre_gated`, in a layer; the ops apart for the output, `il` None); and the weights the
    block's output is scattered back with (`<weights>_inject`, in a layer)."""
    hp = b.hp
    n_embd, hc, nt = hp.n_embd, hp.hc_mult, x.ne[2]
    xn = g.reshape(g.mul(g.rms_norm(x), b.w(f"{weights}_norm.weight", il)), hc * n_embd, nt)
    low = g.unary(g.scale(b.mm(b.w(f"{weights}_down.weight", il), xn)), "silu")
    gate = b.mm(b.w(f"{weights}_up.weight", il), low)
    if il is None:
        gated = g.reshape(g.mul(xn, g.unary(gate, "sigmoid")), n_embd, hc, nt)
        streams = [g.view(gated, (n_embd, nt), (gated.nb[2],)) for _ in range(hc)]
        mixed = g.cont(streams[0])
        for stream in streams[1:]:
            mixed = g.add(mixed, stream)
        return g.scale(mixed), None
    mixed = g.dsv4_hc_pre(g.reshape(xn, n_embd, hc, nt), g.reshape(gate, n_embd, hc, nt))
    return mixed, b.mm(b.w(f"{weights}_inject.weight", il), xn)


def _hc_combine(residual: Tensor, out: Tensor, inject: Tensor) -> Tensor:
    """`build_hc_combine` (fused, `ggml_dsv4_hc_post`): the block's output added to every stream, each scaled by
    2 * sigmoid of its injection weight."""
    return g.dsv4_hc_post(out, residual, g.scale(g.unary(g.scale(inject), "sigmoid")))


def _qsa_top_k(b: GraphBuilder, il: int, cur: Tensor, pos: Tensor, inputs: dict[int, tuple]) -> Tensor:
    """`build_qsa_top_k`: the layer's raw indexer key of each token cached; the cached keys mean-pooled over blocks
    of the layer's compress ratio, normed and roped at the blocks' positions; each indexer head's rectified score of
    every block summed, biased, spread to the block's cells, masked; the best `indexer_top_k + ratio - 1` cells (all,
    if fewer). The block inputs are made once per ratio (`inputs`)."""
    hp = b.hp
    head, n_head, r = hp.indexer_head_size, hp.indexer_n_head, hp.compress_ratios[il]
    keys = b.indexer_keys(il)
    n_kv, n_stream = keys.ne[2], keys.ne[3]
    n_blocks, n_tps = -(-n_kv // r), b.n_tokens // n_stream
    if r not in inputs:
        inputs[r] = (g.graph_input(I32, (n_kv, n_stream), "cell_blk"),
                     g.graph_input(I32, (r * n_blocks, n_stream), "blk_cells"),
                     g.graph_input(I32, (4 * n_blocks * n_stream,), "blk_pos"),
                     g.graph_input(F32, (n_blocks, n_tps, n_stream), "bias"))  # fmt: skip
    cell_blk, blk_cells, blk_pos, bias = inputs[r]
    k_raw = g.reshape(b.mm(b.w("indexer.k_proj.weight", il), cur), head, 1, b.n_tokens)
    b.indexer_store(il, k_raw)
    k_all = g.view(keys, (head, n_kv, n_stream), keys.nb[2:4])
    members = g.reshape(g.get_rows(k_all, blk_cells), head, r, n_blocks, n_stream)
    pooled = None
    for _ in range(r):
        piece = g.cont(g.view(members, (head, n_blocks, n_stream), members.nb[2:4]))
        pooled = piece if pooled is None else g.add(pooled, piece)
    pooled = g.reshape(g.scale(pooled), head, n_blocks * n_stream, 1)
    pooled = g.reshape(b.norm(pooled, b.w("indexer.k_norm.weight", il)), head, 1, n_blocks * n_stream)
    pooled = g.reshape(g.rope(pooled, blk_pos), head, n_blocks, n_stream)
    q = g.reshape(b.mm(b.w("indexer.q_proj.weight", il), cur), head, n_head, b.n_tokens)
    q = g.rope(b.norm(q, b.w("indexer.q_norm.weight", il)), pos)
    score = g.mul_mat(pooled, g.reshape(q, head, n_head * n_tps, n_stream))
    score = g.unary(g.reshape(score, n_blocks, n_head, n_tps, n_stream), "relu")
    summed = None
    for _ in range(n_head):
        piece = g.view(score, (n_blocks, n_tps, n_stream), score.nb[2:4])
        summed = g.cont(piece) if summed is None else g.add(summed, piece)
    score = g.add(summed, bias)
    spread = g.get_rows(g.cont(g.permute(score, 1, 0, 2, 3)), cell_blk)
    spread = g.cont(g.permute(spread, 1, 0, 2, 3))
    mask = b.attn_mask(il)
    mask = mask if mask.type == F32 else g.cast(mask, F32)
    spread = g.add(spread, g.reshape(mask, n_kv, n_tps, n_stream))
    width = min(n_kv, hp.indexer_top_k + r - 1)
    return g.reshape(g.cont(g.top_k(spread, width)), width, n_tps, 1, n_stream)


def _ple_embeddings(b: GraphBuilder) -> Tensor:
    """`build_inp_ple`: each token's `ple_n_heads` hashed rows of `per_layer_token_embd`, side by side."""
    hp = b.hp
    rows = g.graph_input(I32, (hp.ple_n_heads * b.n_tokens,), "ple_rows")
    emb = g.get_rows(b.w("per_layer_token_embd.weight"), rows)
    return g.reshape(emb, hp.n_embd_per_layer * hp.ple_n_heads, b.n_tokens)


def _ple(b: GraphBuilder, il: int, emb: Tensor, hidden: Tensor) -> Tensor:
    """`build_ple`: a gate per stream from the n-gram embeddings' key against the normed streams (signed square
    root, sigmoid), the gated value broadcast to the streams, normed, and a causal depthwise convolution dilated by
    the n-gram size over its history (a recurrent row of its own) as a sum of shifted copies, added back."""
    hp = b.hp
    n_embd, hc, nt = hp.n_embd, hp.hc_mult, b.n_tokens

    def grouped_norm(x: Tensor, weight: str) -> Tensor:
        return g.mul(g.rms_norm(g.reshape(x, n_embd, hc, nt)), b.w(weight, il))

    key = b.mm(b.w("ple_key.weight", il), emb)
    value = b.mm(b.w("ple_value.weight", il), emb)
    key = grouped_norm(key, "ple_norm_key.weight")
    query = grouped_norm(hidden, "ple_norm_query.weight")
    s = g.scale(g.sum_rows(g.mul(key, query)))
    magnitude = g.sqrt(g.clamp(g.unary(s, "abs")))
    gate = g.unary(g.mul(g.unary(s, "sgn"), magnitude), "sigmoid")
    value = g.repeat(g.reshape(value, n_embd, 1, nt), n_embd, hc, nt, 1)
    gated = g.mul(value, gate)
    normed = g.reshape(grouped_norm(g.reshape(gated, hc * n_embd, nt), "ple_norm_conv.weight"), hc * n_embd, nt)
    kernel, history = hp.ple_conv_kernel, (hp.ple_conv_kernel - 1) * hp.ple_ngram_size
    per_seq, n_seqs = nt // b.n_seqs, b.n_seqs
    padded = _conv_state_at(b, b.rs_state(il, "p"), g.reshape(normed, hc * n_embd, per_seq, n_seqs), history,
                            hc * n_embd)  # fmt: skip
    weights = b.w("ple_conv1d.weight", il)
    conv = None
    for _ in range(kernel):
        shifted = g.cont(g.transpose(g.view(padded, (per_seq, hc * n_embd, n_seqs), padded.nb[1:3])))
        tap = g.reshape(g.cont(g.view(weights, (1, hc * n_embd), (weights.nb[1],))), hc * n_embd)
        if tap.type != F32:
            tap = g.cast(tap, F32)
        term = g.mul(shifted, tap)
        conv = term if conv is None else g.add(conv, term)
    conv = g.reshape(g.cont(g.unary(conv, "silu")), n_embd, hc, nt)
    return g.add(hidden, g.add(gated, conv))


def qwen4exp(b: GraphBuilder) -> Graph:
    """`llama_model_qwen4exp::graph` (Qwen3.8-Flash-Next): Qwen3.5's delta-net and gated-attention layers (the
    delta net's output gate a sigmoid) with experts beside a gated shared expert, `hc_mult` hyper-connection
    streams in place of the norms (each block's input mixed from them, its output scattered back), QSA in the
    attention layers that have a compress ratio, and the PLE layer's n-gram embeddings."""
    hp = b.hp
    n_embd, hc = hp.n_embd, hp.hc_mult
    inp = b.inp_embd(b.w("token_embd.weight"))
    b.rs_inp()
    b.attn_inp_kv()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    emb = b.expand(_ple_embeddings(b)) if hp.ple_n_heads else None
    streams = g.repeat(g.reshape(inp, n_embd, 1, b.n_tokens), n_embd, hc, b.n_tokens, 1)
    qsa_inputs: dict[int, tuple] = {}
    for il in b.each_layer():
        if hp.is_ple and hp.is_ple[il]:
            streams = _ple(b, il, emb, streams)
        cur, inject = _hc_mix(b, streams, "hc_attn", il)
        b.expand(cur)
        if hp.is_recurrent[il]:
            cur = _delta_net_layer(b, il, cur, _QWEN4EXP)
        else:
            qsa = hp.compress_ratios[il] > 0
            top_k = _qsa_top_k(b, il, cur, pos, qsa_inputs) if qsa else None
            cur = _gated_attention(b, il, cur, pos, _split_qwen35, top_k)
        if il == hp.n_layer - 1:
            cur, inject = g.get_rows(cur, out_ids), g.get_rows(inject, out_ids)
            rows = g.get_rows(g.reshape(streams, n_embd * hc, streams.ne[2]), out_ids)
            streams = g.reshape(rows, n_embd, hc, rows.ne[1])
        streams = _hc_combine(streams, cur, inject)
        cur, inject = _hc_mix(b, streams, "hc_ffn", il)
        streams = _hc_combine(streams, _ffn(b, il, cur), inject)
    embd, _ = _hc_mix(b, streams, "output_hc", None)
    return b.finish(embd, b.mm(b.output_weight(), embd))
