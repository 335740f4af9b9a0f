"""Granite's graphs: granite and granitemoe (the standard decoder with Granite's scales), and Granite 4.0-H's
(granitehybrid): Mamba-2 and attention layers."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from ..hparams import LlamaCppHParams
from .decoder import Block, output_rows, standard_decoder
from .mamba import mamba2_layer


def _ropes(hp: LlamaCppHParams, il: int) -> bool:
    return bool(hp.flags.get("rope", 1.0))  # `rope.scaling.finetuned` switches rope off when false


def granite(b: GraphBuilder) -> Graph:
    """`llama_model_granite::graph` (and granitemoe's): llama's block with the embeddings, each residual branch
    and the logits scaled where the file says so, rope unless switched off, experts beside a shared expert where
    the model has one."""
    return standard_decoder(b, qk_norm=False, ffn_biases=True, output_bias=False, block=Block(rope=_ropes))


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
            cur = mamba2_layer(b, il, cur)
        else:
            q, k, v = b.qkv(il, cur, hp.head_k(il), hp.n_head[il], hp.n_head_kv[il])
            if pos is not None:
                q, k = g.rope(q, pos), g.rope(k, pos)
            cur = b.attn(il, q, k, v, b.w("attn_output.weight", il), b.w("attn_output.bias", il))
        cur, residual = output_rows(b, il, out_ids, cur, inp)
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
