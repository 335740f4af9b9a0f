"""The standard decoder block and its pieces (`output_rows`, `attention`, `logits`), as llama.cpp's llama-style
graphs build them, and the architectures that are that block alone: llama, mistral3, qwen2, qwen3 (and qwen3moe),
and the language models of Qwen's vision-language families, qwen2vl, qwen3vl and qwen3vlmoe (M-RoPE's four positions
per token are the builder's; Qwen3-VL's deepstack inputs the block's).

Here and in every graph of this package only what changes the allocation is kept: which nodes exist, their
shapes and order. Scalars (rope frequencies, attention scales) and weights never reach the allocator, so a
builder passes over them.
"""

from __future__ import annotations

from .. import ggml as g
from ..ggml import Graph, Tensor
from ..graph_builder import GraphBuilder


def output_rows(b: GraphBuilder, il: int, out_ids: Tensor, *tensors: Tensor) -> list[Tensor]:
    """In the last layer only the output rows go on (`ggml_get_rows(cur, inp_out_ids)`)."""
    if il != b.hp.n_layer - 1:
        return list(tensors)
    return [g.get_rows(t, out_ids) for t in tensors]


def attention(b: GraphBuilder, il: int, cur: Tensor, pos: Tensor, *, qk_norm: bool = False,
               scale_q: bool = False, bias_out: bool = True, sinks: bool = False,
               q_scales: Tensor | None = None) -> Tensor:  # fmt: skip
    """Q, K, V projections (optionally RMS-normed per head), rope, and `build_attn`; `q_scales`: each token's
    query scale (the attention temperature input) multiplies the roped queries."""
    hp = b.hp
    q, k, v = b.qkv(il, cur, hp.head_k(il), hp.n_head[il], hp.n_head_kv[il])
    if qk_norm:
        q = g.rope(b.norm(q, b.w("attn_q_norm.weight", il)), pos)
        k = g.rope(b.norm(k, b.w("attn_k_norm.weight", il)), pos)
    else:
        q, k = g.rope(q, pos), g.rope(k, pos)
    if scale_q:
        q = g.scale(q)
    if q_scales is not None:
        q = g.mul(q, q_scales)
    wo_b = b.w("attn_output.bias", il) if bias_out else None
    return b.attn(il, q, k, v, b.w("attn_output.weight", il), wo_b, b.w("attn_sinks.weight", il) if sinks else None)


def logits(b: GraphBuilder, embd: Tensor, *, bias: bool = False) -> Graph:
    logits = b.mm(b.output_weight(), embd)
    if bias and (out_b := b.w("output.bias")) is not None:
        logits = g.add(logits, out_b)
    return b.finish(embd, logits)


def standard_decoder(b: GraphBuilder, *, qk_norm: bool, ffn_biases: bool, output_bias: bool,
                     temperature: bool = False) -> Graph:  # fmt: skip
    """The llama-style block: pre-norm attention, pre-norm feed-forward (or experts), residuals; `temperature`:
    the queries scaled per token (`build_inp_attn_scale`); deepstack layers (`n_deepstack_layers`) add their slice
    of the input embedding."""
    hp = b.hp
    inp, pos, out_ids = b.decoder_inputs()
    q_scales = b.inp_attn_scale() if temperature else None
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il))
        cur = attention(b, il, cur, pos, qk_norm=qk_norm, q_scales=q_scales)
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w("ffn_norm.weight", il))
        if b.w("ffn_gate_inp.weight", il) is None:
            cur = b.ffn(cur, il, biases=ffn_biases)
        else:
            cur = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used)
        inp = g.add(cur, ffn_inp)
        if il < hp.n_deepstack_layers:  # Qwen3-VL: the layer's slice of the wider input embedding added
            embd = b.t_inp_embd
            inp = g.add(inp, g.view(embd, (hp.n_embd, b.n_tokens), (embd.nb[1],)))
    return logits(b, b.norm(inp, b.w("output_norm.weight")), bias=output_bias)


def llama(b: GraphBuilder) -> Graph:
    """`llama_model_llama::graph`: Llama 2/3, Mistral, and Mixtral-style experts."""
    return standard_decoder(b, qk_norm=False, ffn_biases=True, output_bias=False)


def mistral3(b: GraphBuilder) -> Graph:
    """`llama_model_mistral3::graph` (Ministral 3, Mistral Small 3.x): llama's, with the queries scaled by the
    attention temperature where the file sets one (`attention.temperature_scale`)."""
    temperature = bool(b.hp.flags.get("attn_temperature_scale"))
    return standard_decoder(b, qk_norm=False, ffn_biases=True, output_bias=False, temperature=temperature)


def qwen2(b: GraphBuilder) -> Graph:
    return standard_decoder(b, qk_norm=False, ffn_biases=False, output_bias=True)


def qwen2vl(b: GraphBuilder) -> Graph:
    """`llama_model_qwen2vl::graph`: qwen2's block with M-RoPE; an output bias, where a file has one, unused."""
    return standard_decoder(b, qk_norm=False, ffn_biases=False, output_bias=False)


def qwen3(b: GraphBuilder) -> Graph:
    """`llama_model_qwen3::graph` and `qwen3moe`, and `qwen3vl` and `qwen3vlmoe` (with M-RoPE and deepstack
    inputs): per-head RMS norms on Q and K."""
    return standard_decoder(b, qk_norm=True, ffn_biases=False, output_bias=False)
