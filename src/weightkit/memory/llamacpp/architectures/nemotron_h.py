"""Nemotron-H's graph (nemotron_h, and nemotron_h_moe, whose feed-forward layers are experts): Mamba-2, attention
and feed-forward layers, each its own block."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph, Tensor
from ..graph_builder import GraphBuilder
from .mamba import mamba2_layer


def nemotron_h(b: GraphBuilder) -> Graph:
    """`llama_model_nemotron_h::graph` (nemotron_h_moe's main graph too): each layer one pre-normed mixer and a
    residual: a Mamba-2 layer (recurrent), attention without rope (a layer with no FFN), or a squared-ReLU FFN or
    experts; the output rows taken after the final norm, whose whole output stays an output too (the NextN head's
    seed; the NextN block itself is not built)."""
    hp = b.hp
    inp = b.inp_embd(b.w("token_embd.weight"))
    b.rs_inp()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        if hp.is_recurrent[il]:
            cur = mamba2_layer(b, il, cur)
        elif hp.n_ff[il] == 0:
            q, k, v = b.qkv(il, cur, hp.head_k(il), hp.n_head[il], hp.n_head_kv[il])
            cur = b.attn(il, q, k, v, b.w("attn_output.weight", il), b.w("attn_output.bias", il))
        else:
            cur = _ffn_layer(b, il, cur)
        inp = g.add(cur, inp)
    hidden = b.norm(inp, b.w("output_norm.weight"), il=-1)
    embd = g.get_rows(hidden, out_ids)
    return b.finish(embd, b.mm(b.output_weight(), embd), hidden)


def _ffn_layer(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    """`build_ffn_layer`: a squared-ReLU FFN, or (with a router) squared-ReLU experts chosen by sigmoid with the
    selection bias, the router's logits taken from the layer's input, the experts run in the latent space where
    the layer projects down to one and back, beside a squared-ReLU shared expert on the input itself."""
    hp = b.hp
    if (router := b.w("ffn_gate_inp.weight", il)) is None:
        return b.ffn(cur, il, act="relu_sqr")
    latent = cur
    if (down := b.w("ffn_latent_down.weight", il)) is not None:
        latent = g.mul_mat(down, cur)
    logits = b.mm(router, cur)
    moe = b.moe_ffn(latent, il, hp.n_expert, hp.n_expert_used, gating="sigmoid",
                    norm_w=bool(hp.flags.get("expert_weights_norm")), w_scale=hp.flags.get("expert_weights_scale", 0.0),
                    exp_probs_b=b.w("exp_probs_b.bias", il), logits=logits, act="relu_sqr")  # fmt: skip
    if (up := b.w("ffn_latent_up.weight", il)) is not None:
        moe = g.mul_mat(up, moe)
    return g.add(moe, b.ffn(cur, il, biases=False, suffix="_shexp", act="relu_sqr"))
