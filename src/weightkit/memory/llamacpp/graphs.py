"""Each architecture's graph, as its `src/models/<arch>.cpp` builds it (`graph::graph`), written with the
building blocks of `GraphBuilder`. `GRAPHS` maps a GGUF architecture name to its builder.
"""

from __future__ import annotations

from collections.abc import Callable

from . import ggml as g
from .ggml import Graph, Tensor
from .graph import GraphBuilder


def _last_layer_rows(b: GraphBuilder, il: int, out_ids: Tensor, *tensors: Tensor) -> list[Tensor]:
    """In the last layer only the output rows go on (`ggml_get_rows(cur, inp_out_ids)`)."""
    if il != b.hp.n_layer - 1:
        return list(tensors)
    return [g.get_rows(t, out_ids) for t in tensors]


def llama(b: GraphBuilder) -> Graph:
    """`llama_model_llama::graph` (Llama 2/3, Mistral, Mixtral-style experts)."""
    hp = b.hp
    head = hp.head_v_full
    inp = b.inp_embd(b.w("token_embd.weight"))
    pos = b.inp_pos()
    b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    rope_factors = b.w("rope_freqs.weight")
    for il in range(hp.n_layer):
        residual = inp
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        q, k, v = b.qkv(il, cur, head, hp.n_head[il], hp.n_head_kv[il])
        q = g.rope(q, pos, rope_factors)
        k = g.rope(k, pos, rope_factors)
        cur = b.attn(il, q, k, v, b.w("attn_output.weight", il), b.w("attn_output.bias", il))
        cur, residual = _last_layer_rows(b, il, out_ids, cur, residual)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w("ffn_norm.weight", il))
        if b.w("ffn_gate_inp.weight", il) is None:
            cur = b.ffn(cur, il)
        else:
            cur = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used)
        inp = g.add(cur, ffn_inp)
    embd = b.norm(inp, b.w("output_norm.weight"))
    return b.finish(embd, b.mm(b.output_weight(), embd))


GRAPHS: dict[str, Callable[[GraphBuilder], Graph]] = {
    "llama": llama,
}
