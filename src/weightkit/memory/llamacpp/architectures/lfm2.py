"""LFM2's graph (lfm2, lfm2moe): gated short-convolution layers and attention layers (those with KV heads), each
followed by a dense FFN or, past the leading dense layers, sigmoid-routed experts."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph, Tensor
from ..graph_builder import GraphBuilder
from .decoder import attention, output_rows
from .deepseek import GATING


def shortconv_layer(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    """`build_shortconv_block`: the input projection split into B, C and x; B*x convolved causally over the stored
    last inputs (`n_shortconv_l_cache - 1` per channel), which the batch's last ones replace; C gates the result."""
    hp = b.hp
    n_seqs = b.n_seqs
    per_seq = b.n_tokens // n_seqs
    d_conv = hp.n_shortconv_l_cache - 1
    bcx = b.mm(b.w("shortconv.in_proj.weight", il), g.reshape(cur, cur.ne[0], per_seq, n_seqs))
    b_gate, c_gate, x = (g.view(bcx, (bcx.ne[0] // 3, *bcx.ne[1:3]), bcx.nb[1:3]) for _ in range(3))
    bx = g.transpose(g.mul(b_gate, x))
    conv_state = b.rs_state(il, "r")
    conv = g.reshape(b.build_rs(conv_state, hp.n_embd_r), d_conv, hp.n_embd, n_seqs)
    bx = g.concat(conv, bx, 0)
    last = g.view(bx, (d_conv, *bx.ne[1:3]), bx.nb[1:3])
    b.expand(g.cpy(last, g.view(conv_state, (d_conv * hp.n_embd, n_seqs), (conv_state.nb[1],))))
    y = g.mul(c_gate, g.ssm_conv(bx, b.w("shortconv.conv.weight", il)))
    y = b.mm(b.w("shortconv.out_proj.weight", il), y)
    return g.reshape(y, y.ne[0], per_seq * n_seqs)


def lfm2(b: GraphBuilder) -> Graph:
    """`llama_model_lfm2::graph` (lfm2moe's too): pre-norm short convolution or attention (Q and K normed per
    head), pre-norm FFN or experts; the output norm is `token_embd_norm`, and no logits when embeddings are
    asked for."""
    hp = b.hp
    inp = b.inp_embd(b.w("token_embd.weight"))
    b.rs_inp()
    b.attn_inp_kv()
    pos = b.inp_pos()
    out_ids = b.inp_out_ids()
    gating = GATING[int(hp.flags.get("expert_gating_func", 0))]
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        if hp.is_recurrent[il]:
            cur = shortconv_layer(b, il, cur)
        else:
            cur = attention(b, il, cur, pos, qk_norm=True, bias_out=False)
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        cur = g.add(residual, cur)
        ffn_inp = b.norm(cur, b.w("ffn_norm.weight", il))
        if hp.n_expert and il >= hp.n_layer_dense_lead:
            ffn = b.moe_ffn(ffn_inp, il, hp.n_expert, hp.n_expert_used, gating=gating,
                            w_scale=float(hp.flags.get("expert_weights_scale", 0.0)),
                            exp_probs_b=b.w("exp_probs_b.bias", il))  # fmt: skip
        else:
            ffn = b.ffn(ffn_inp, il, biases=False)
        inp = g.add(cur, ffn)
    embd = b.norm(inp, b.w("token_embd_norm.weight"))
    logits = None if b.ctx.embeddings else b.mm(b.output_weight(), embd)
    return b.finish(embd, logits)
