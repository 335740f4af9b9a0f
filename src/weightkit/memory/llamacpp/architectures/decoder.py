"""The standard decoder block and its pieces (`output_rows`, `attention`, `logits`), as llama.cpp's llama-style
graphs build them, and the architectures that are that block alone, or it with `Block`'s variations: llama,
mistral3, qwen2, qwen3 (and qwen3moe), smollm3, olmo2, exaone4, seed_oss, apertus, glm4, ernie4_5 and
ernie4_5-moe, and the language models of Qwen's vision-language families, qwen2vl, qwen3vl and qwen3vlmoe
(M-RoPE's four positions per token are the builder's; Qwen3-VL's deepstack inputs the block's).

Here and in every graph of this package only what changes the allocation is kept: which nodes exist, their
shapes and order. Scalars (rope frequencies, attention scales) and weights never reach the allocator, so a
builder passes over them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import ggml as g
from ..ggml import Graph, Tensor
from ..graph_builder import GraphBuilder
from ..hparams import SWA_NONE, LlamaCppHParams

HEAD, WHOLE = "head", "whole"  # Q and K RMS-normed per head, or across the whole projection before the heads
PRE, POST, BOTH = "pre", "post", "both"  # a block's norms: before attention and FFN, after them, or both


@dataclass(frozen=True)
class Block:
    """Where a llama-style architecture's block departs from llama's (the defaults): `norms` (POST: no pre-norms,
    `post_attention_norm` after attention and `post_ffw_norm` after the FFN, the latter unpinned as OLMo 2 and
    EXAONE 4 build it; BOTH: GLM-4's four), the FFN's pre-norm (`ffn_norm`: its weight's name), which layers
    rope (`rope`, None: all), whether the attention output's bias is added (`bias_out`) and the gateless
    FFN's activation (`act`, as `GraphBuilder.ffn` takes it)."""

    norms: str = PRE
    ffn_norm: str = "ffn_norm"
    rope: Callable[[LlamaCppHParams, int], bool] | None = None
    bias_out: bool = True
    act: str = "gelu"


LLAMA = Block()


def output_rows(b: GraphBuilder, il: int, out_ids: Tensor, *tensors: Tensor) -> list[Tensor]:
    """In the last layer only the output rows go on (`ggml_get_rows(cur, inp_out_ids)`)."""
    if il != b.hp.n_layer - 1:
        return list(tensors)
    return [g.get_rows(t, out_ids) for t in tensors]


def attention(b: GraphBuilder, il: int, cur: Tensor, pos: Tensor, *, qk_norm: bool | str = False,
               scale_q: bool = False, bias_out: bool = True, sinks: bool = False,
               q_scales: Tensor | None = None, rope: bool = True) -> Tensor:  # fmt: skip
    """Q, K, V projections (optionally RMS-normed: per head, or across the whole projection with `qk_norm`
    WHOLE), rope (unless `rope` is False), and `build_attn`; `q_scales`: each token's query scale (the attention
    temperature input) multiplies the roped queries."""
    hp = b.hp
    head, n_head, n_head_kv = hp.head_k(il), hp.n_head[il], hp.n_head_kv[il]
    q, k, v = b.qkv(il, cur, head, n_head, n_head_kv, reshape=qk_norm != WHOLE)
    if qk_norm:
        q, k = b.norm(q, b.w("attn_q_norm.weight", il)), b.norm(k, b.w("attn_k_norm.weight", il))
    if qk_norm == WHOLE:
        q, k = g.reshape(q, head, n_head, b.n_tokens), g.reshape(k, head, n_head_kv, b.n_tokens)
        v = g.reshape(v, head, n_head_kv, b.n_tokens)
    if rope:
        q, k = g.rope(q, pos), g.rope(k, pos)
    if scale_q:
        q = g.scale(q)
    if q_scales is not None:
        q = g.mul(q, q_scales)
    wo_b = b.w("attn_output.bias", il) if bias_out else None
    return b.attn(il, q, k, v, b.w("attn_output.weight", il), wo_b, b.w("attn_sinks.weight", il) if sinks else None)


def logits(b: GraphBuilder, embd: Tensor, *, bias: bool = False) -> Graph:
    """The output projection (with its bias where asked and the file has one), scaled where the model says so
    (`logit_scale`: Granite's, Command's)."""
    logits = b.mm(b.output_weight(), embd)
    if bias and (out_b := b.w("output.bias")) is not None:
        logits = g.add(logits, out_b)
    if b.hp.flags.get("logit_scale"):
        logits = g.scale(logits)
    return b.finish(embd, logits)


def standard_decoder(b: GraphBuilder, *, qk_norm: bool | str, ffn_biases: bool, output_bias: bool,
                     temperature: bool = False, block: Block = LLAMA) -> Graph:  # fmt: skip
    """The llama-style block: pre-norm attention, pre-norm feed-forward (experts where the layer has them,
    beside the shared expert where the model has one), residuals (scaled where the model says so:
    `residual_scale`); `temperature`: the queries scaled per token (`build_inp_attn_scale`); deepstack layers
    (`n_deepstack_layers`) add their slice of the input embedding; `block`: the architecture's variations."""
    hp = b.hp
    inp, pos, out_ids = b.decoder_inputs()
    q_scales = b.inp_attn_scale() if temperature else None
    pre, post = block.norms != POST, block.norms != PRE
    scaled = bool(hp.flags.get("residual_scale"))
    for il in b.each_layer():
        cur = b.norm(inp, b.w("attn_norm.weight", il)) if pre else inp
        rope = block.rope is None or block.rope(hp, il)
        cur = attention(b, il, cur, pos, qk_norm=qk_norm, q_scales=q_scales, bias_out=block.bias_out, rope=rope)
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        if post:
            cur = b.norm(cur, b.w("post_attention_norm.weight", il))
        if scaled:
            cur = g.scale(cur)
        ffn_inp = g.add(cur, residual)
        cur = b.norm(ffn_inp, b.w(f"{block.ffn_norm}.weight", il)) if pre else ffn_inp
        if b.w("ffn_gate_inp.weight", il) is None:
            cur = b.ffn(cur, il, biases=ffn_biases, act=block.act)
        else:
            moe = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used, exp_probs_b=b.w("exp_probs_b.bias", il))
            cur = g.add(moe, b.ffn(cur, il, biases=False, suffix="_shexp")) if hp.n_ff_shexp else moe
        if post:
            cur = b.norm(cur, b.w("post_ffw_norm.weight", il), il=il if pre else -1)
        if scaled:
            cur = g.scale(cur)
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


def _no_rope_every_fourth(hp: LlamaCppHParams, il: int) -> bool:
    return (il + 1) % 4 != 0  # `n_no_rope_layer_step`


def _rope_where_sliding(hp: LlamaCppHParams, il: int) -> bool:
    return hp.swa_type == SWA_NONE or hp.is_swa[il]


def smollm3(b: GraphBuilder) -> Graph:
    """`llama_model_smollm3::graph`: llama's, every fourth layer without rope."""
    return standard_decoder(b, qk_norm=False, ffn_biases=True, output_bias=False,
                            block=Block(rope=_no_rope_every_fourth))  # fmt: skip


def olmo2(b: GraphBuilder) -> Graph:
    """`llama_model_olmo2::graph` (OLMo 2, and OLMo 3 with sliding-window layers): norms after attention and
    after the FFN instead of before, Q and K normed across the whole projection."""
    return standard_decoder(b, qk_norm=WHOLE, ffn_biases=False, output_bias=False,
                            block=Block(norms=POST, bias_out=False))  # fmt: skip


def exaone4(b: GraphBuilder) -> Graph:
    """`llama_model_exaone4::graph`: OLMo 2's block with Q and K normed per head; where the model slides, only the
    sliding-window layers rope."""
    return standard_decoder(b, qk_norm=HEAD, ffn_biases=False, output_bias=False,
                            block=Block(norms=POST, bias_out=False, rope=_rope_where_sliding))  # fmt: skip


def seed_oss(b: GraphBuilder) -> Graph:
    """`llama_model_seed_oss::graph`: llama's, its FFN's pre-norm stored as `post_attention_norm`."""
    return standard_decoder(b, qk_norm=False, ffn_biases=False, output_bias=False,
                            block=Block(ffn_norm="post_attention_norm"))  # fmt: skip


def apertus(b: GraphBuilder) -> Graph:
    """`llama_model_apertus::graph`: Q and K normed per head, an FFN of up and down projections around xIELU."""
    return standard_decoder(b, qk_norm=HEAD, ffn_biases=False, output_bias=False, block=Block(act="xielu"))


def glm4(b: GraphBuilder) -> Graph:
    """`llama_model_glm4::graph` (GLM-4 0414): norms before and after attention and FFN, the FFN's gate and up
    projections in one matrix; the NextN block is loaded but not run."""
    return standard_decoder(b, qk_norm=False, ffn_biases=False, output_bias=False,
                            block=Block(norms=BOTH, bias_out=False, act="swiglu"))  # fmt: skip


def ernie4_5(b: GraphBuilder) -> Graph:
    """`llama_model_ernie4_5::graph` and `ernie4_5_moe`'s: llama's without the output projection's bias; the
    experts' choice biased where the file has `exp_probs_b`, a shared expert beside them where it has one."""
    return standard_decoder(b, qk_norm=False, ffn_biases=False, output_bias=False, block=Block(bias_out=False))
