"""BERT's graph (embedding models)."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .decoder import output_rows


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
        cur, inp = output_rows(b, il, out_ids, cur, inp)
        cur = g.add(cur, inp)
        ffn_inp = b.norm(cur, b.w("attn_output_norm.weight", il), b.w("attn_output_norm.bias", il), rms=False)
        cur = b.ffn(ffn_inp, il)
        cur = g.add(cur, ffn_inp)
        inp = b.norm(cur, b.w("layer_output_norm.weight", il), b.w("layer_output_norm.bias", il), rms=False)
    return b.finish(inp, None)
