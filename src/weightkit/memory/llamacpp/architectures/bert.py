"""The BERT family's graphs (embedding models): bert, and nomic-bert and jina-bert-v3, which llama.cpp builds with
bert's graph (rotary positions instead of learned ones)."""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from .decoder import output_rows


def _bert(b: GraphBuilder, *, rope: bool) -> Graph:
    """`llama_model_bert::graph`: token types, learned positions (`rope`: rotary ones on Q and K instead), no cache,
    post-norms, a GELU FFN (a gated one where the layer has a gate: nomic-bert's SwiGLU), pooling."""
    hp = b.hp
    pos = b.inp_pos()
    inp = b.inp_embd(b.w("token_embd.weight"))
    if (types := b.w("token_types.weight")) is not None:
        inp = g.add(inp, g.view(types, (hp.n_embd,)))
    if not rope:
        inp = g.add(g.get_rows(b.w("position_embd.weight"), pos), inp)
    inp = b.norm(inp, b.w("token_embd_norm.weight"), b.w("token_embd_norm.bias"), rms=False)
    mask, _ = b.attn_inp_no_cache()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        q, k, v = b.qkv(il, inp, hp.head_k_full, hp.n_head[il], hp.n_head_kv[il])
        if rope:
            q, k = g.rope(q, pos), g.rope(k, pos)
        for t in (q, k, v):
            b.expand(t)
        cur = b.attn_mha(q, k, v, mask)
        cur = b.mm(b.w("attn_output.weight", il), cur)
        if (wo_b := b.w("attn_output.bias", il)) is not None:
            cur = g.add(cur, wo_b)
        cur, inp = output_rows(b, il, out_ids, cur, inp)
        cur = g.add(cur, inp)
        ffn_inp = b.norm(cur, b.w("attn_output_norm.weight", il), b.w("attn_output_norm.bias", il), rms=False)
        cur = b.ffn(ffn_inp, il)
        cur = g.add(cur, ffn_inp)
        inp = b.norm(cur, b.w("layer_output_norm.weight", il), b.w("layer_output_norm.bias", il), rms=False)
    return b.finish(inp, None)


def bert(b: GraphBuilder) -> Graph:
    """`llama_model_bert::graph` for bert: learned positions."""
    return _bert(b, rope=False)


def bert_rope(b: GraphBuilder) -> Graph:
    """`llama_model_bert::graph` for nomic-bert (nomic-embed-text) and jina-bert-v3 (jina-embeddings-v3): rotary
    positions."""
    return _bert(b, rope=True)
