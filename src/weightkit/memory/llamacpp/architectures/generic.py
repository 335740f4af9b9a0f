"""The generic estimate, for an architecture llama.cpp knows (`known_architectures`) that has no exact entry.

The weights and where they go come from the tensor infos, as for any model. The KV cache and recurrent state
come from the hyperparameters every architecture shares (per-layer head counts, key and value lengths, the
sliding window by the architecture's pattern, the SSM or WKV keys); they are llama.cpp's where its cache is the
standard one. The compute buffer is the nearest graph family's, built only from the tensors the model has:
the standard decoder block (pre- and post-norms, Q/K norms, fused or separate projections, experts), with a
Mamba layer where the model has one and DeepSeek's latent attention where it has that. `guesses` says which
figures are derived rather than reproduced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....errors import FormatError, UnsupportedError
from ....model import ModelFile
from .. import ggml as g
from ..ggml import Graph, Tensor
from ..graph_builder import GraphBuilder
from ..hparams import LlamaCppHParams
from ..known_architectures import HYBRID, LLAMA_CPP_ARCHITECTURES, NONE, OWN, RECURRENT, KnownArchitecture
from . import deepseek
from .decoder import output_rows
from .entry import LlamaCppArchitecture, SlidingWindow
from .mamba import mamba2_layer, mamba_layer

#: metadata keys the generic graph reads where a model has them: flag name -> key
FLAGS = {
    "embedding_scale": "embedding_scale",
    "residual_scale": "residual_scale",
    "logit_scale": "logit_scale",
    "attn_softcap": "attn_logit_softcapping",
    "final_softcap": "final_logit_softcapping",
    "expert_gating_func": "expert_gating_func",
    "expert_weights_norm": "expert_weights_norm",
    "expert_weights_scale": "expert_weights_scale",
}
SSM_KEYS = ("ssm.conv_kernel", "ssm.inner_size", "ssm.state_size", "ssm.time_step_rank")
COMPUTE, KV_CACHE, STATE = "compute", "kv", "recurrent"  # the figures a generic estimate may guess


@dataclass(frozen=True)
class GenericArchitecture(LlamaCppArchitecture):
    """An architecture llama.cpp knows without an exact entry: its switches are read from the model's own
    metadata (experts, latent attention, sliding windows by the architecture's pattern, recurrent layers)."""

    known: KnownArchitecture = field(default_factory=KnownArchitecture)

    def read_hparams(self, model: ModelFile, arch: str) -> LlamaCppHParams:
        metadata = model.metadata

        def has(key: str) -> bool:
            return f"{arch}.{key}" in metadata

        known = self.known
        swa = None
        if known.swa is not None and known.swa.only_n_layer in (None, metadata.get(f"{arch}.block_count")):
            swa = SlidingWindow(known.swa.pattern or 0, known.swa.dense_first, known.swa.type)
        recurrent, wkv = None, False
        if known.memory in (RECURRENT, HYBRID, OWN):
            wkv = has("wkv.head_size")
            if wkv or all(has(key) for key in SSM_KEYS):
                recurrent = "all" if known.memory == RECURRENT else "no_kv_heads"
            elif known.memory == RECURRENT:
                raise FormatError(getattr(model, "path", None), None,
                                  f"{arch}.ssm.state_size is missing: the generic estimate sizes a {arch} model's "
                                  "recurrent state by the ssm keys (or wkv.head_size)")  # fmt: skip
        entry = LlamaCppArchitecture(
            generic_graph,
            swa=swa,
            experts=True,
            mla=has("attention.kv_lora_rank"),
            recurrent=recurrent,
            wkv=wkv,
            causal=known.memory != NONE,
            flags={name: key for name, key in FLAGS.items() if has(key)},
        )
        hp = entry.read_hparams(model, arch)
        if recurrent is None and not any(hp.n_head):
            raise FormatError(getattr(model, "path", None), None,
                              f"{arch}.attention.head_count is missing or 0: the generic estimate sizes the "
                              "attention and its KV cache by it")  # fmt: skip
        return hp


def architecture(name: str) -> GenericArchitecture | None:
    """The generic entry for an architecture llama.cpp knows (None: one it does not)."""
    known = LLAMA_CPP_ARCHITECTURES.get(name)
    return None if known is None else GenericArchitecture(generic_graph, known=known)


def guesses(hp: LlamaCppHParams, model: ModelFile) -> dict[str, str]:
    """What of a generic estimate is derived rather than llama.cpp's own: figure -> why."""
    arch = hp.arch
    known = LLAMA_CPP_ARCHITECTURES[arch]
    family = "DeepSeek's latent attention" if hp.is_mla else f"the {known.family} family"
    out = {
        COMPUTE: f"no exact {arch} graph: the graph of {family}, built from the model's tensors",
    }
    if known.memory == OWN:
        out[KV_CACHE] = f"llama.cpp gives {arch} a cache of its own; sized here as the standard one"
    elif known.memory == HYBRID:
        out[KV_CACHE] = (
            f"which {arch} layers llama.cpp caches is the architecture's own filter; here those with KV heads"
        )
    swa = known.swa
    if swa is not None and swa.pattern is None and f"{arch}.attention.sliding_window_pattern" not in model.metadata:
        out[KV_CACHE] = f"{arch}.attention.sliding_window_pattern is missing: every layer taken as sliding"
    if known.memory in (HYBRID, OWN):
        if any(hp.is_recurrent):
            out[STATE] = f"{arch}'s recurrent layers sized as Mamba's or RWKV's state, from the ssm or wkv keys"
        elif known.memory == HYBRID:
            out[STATE] = f"{arch}'s recurrent state is not read (no ssm or wkv keys): counted as none"
    return out


def _has(b: GraphBuilder, name: str, il: int | None = None) -> bool:
    return (f"blk.{il}.{name}" if il is not None else name) in b.tensors


def generic_graph(b: GraphBuilder) -> Graph:
    """The nearest family's graph for this model; an UnsupportedError names what it could not build."""
    try:
        if b.hp.is_mla or _has(b, "attn_kv_a_mqa.weight", 0):
            return deepseek.deepseek2(b)
        return _decoder(b)
    except (ArithmeticError, AssertionError, AttributeError, IndexError, KeyError, TypeError, ValueError) as e:
        missing = f": it has no tensor {b.absent[-1]!r}" if b.absent else f" ({e})"
        raise UnsupportedError(f"the generic estimate cannot build a graph for this {b.hp.arch} model{missing}") from e


def _decoder(b: GraphBuilder) -> Graph:
    """The standard decoder block from the tensors each layer has: a pre-norm (where it has one), its mixer
    (attention over the cache, over the batch alone without memory, a Mamba layer, or none), a post-norm,
    the residual; then the feed-forward part (dense, experts and a shared expert) the same way."""
    hp = b.hp
    memory = LLAMA_CPP_ARCHITECTURES[hp.arch].memory
    inp = b.inp_embd(b.w("token_embd.weight"))
    pos = b.inp_pos()
    if _has(b, "position_embd.weight"):
        inp = g.add(inp, g.get_rows(b.w("position_embd.weight"), pos))
    if _has(b, "token_embd_norm.weight"):
        inp = b.norm(inp, b.w("token_embd_norm.weight"), b.w("token_embd_norm.bias"))
    if b.memory.recurrent is not None:
        b.rs_inp()
    masks = b.attn_inp_no_cache() if memory == NONE else None
    if b.memory.caches:
        b.attn_inp_kv()
    out_ids = b.inp_out_ids()
    scaled = bool(hp.flags.get("residual_scale"))
    for il in b.each_layer():
        cur = _maybe_norm(b, inp, "attn_norm", il)
        cur = _mixer(b, il, cur, pos, masks)
        cur = _maybe_norm(b, cur, "attn_post_norm", il)
        cur, residual = output_rows(b, il, out_ids, cur, inp)
        if scaled:
            cur = g.scale(cur)
        inp = g.add(cur, residual)
        if any(_has(b, name, il) for name in ("ffn_up.weight", "ffn_gate_inp.weight", "ffn_down.weight")):
            cur = _ffn(b, il, _maybe_norm(b, inp, "ffn_norm", il))
            cur = _maybe_norm(b, cur, "ffn_post_norm", il)
            if scaled:
                cur = g.scale(cur)
            inp = g.add(cur, inp)
    embd = _maybe_norm(b, inp, "output_norm", None)
    if memory == NONE and not _has(b, "output.weight"):
        return b.finish(embd, None)
    logits = b.mm(b.output_weight(), embd)
    if _has(b, "output.bias"):
        logits = g.add(logits, b.w("output.bias"))
    if hp.flags.get("logit_scale") or hp.flags.get("final_softcap"):
        logits = g.scale(logits)
    return b.finish(embd, logits)


def _maybe_norm(b: GraphBuilder, cur: Tensor, name: str, il: int | None) -> Tensor:
    if not _has(b, f"{name}.weight", il):
        return cur
    bias = b.w(f"{name}.bias", il) if _has(b, f"{name}.bias", il) else None
    return b.norm(cur, b.w(f"{name}.weight", il), bias, rms=bias is None, il=il)


def _mixer(b: GraphBuilder, il: int, cur: Tensor, pos: Tensor, masks: tuple[Tensor, Tensor | None] | None) -> Tensor:
    hp = b.hp
    if hp.is_recurrent[il]:
        if _has(b, "ssm_x.weight", il):
            return mamba_layer(b, il, cur)
        if _has(b, "ssm_in.weight", il) and _has(b, "ssm_a", il) and hp.ssm_dt_rank:
            return mamba2_layer(b, il, cur)
        return cur  # a recurrent layer of another kind: not modelled
    if not (_has(b, "attn_q.weight", il) or _has(b, "attn_qkv.weight", il)) or not hp.n_head[il]:
        return cur
    head_k = hp.head_k(il)
    q, k, v = b.qkv(il, cur, head_k, hp.n_head[il], hp.n_head_kv[il])
    q, k = _qk_norm(b, il, q, "attn_q_norm"), _qk_norm(b, il, k, "attn_k_norm")
    q, k = g.rope(q, pos), g.rope(k, pos)
    wo = b.w("attn_output.weight", il)
    wo_b = b.w("attn_output.bias", il) if _has(b, "attn_output.bias", il) else None
    if masks is not None or b.memory.cache_of(il) is None:
        if masks is None:  # a layer without cache in a model with one: attends to the batch alone
            masks = b.attn_inp_no_cache()
        mask = masks[1] if hp.is_swa[il] and masks[1] is not None else masks[0]
        for t in (q, k, v):
            b.expand(t)
        out = b.attn_mha(q, k, v, mask)
        out = b.mm(wo, out) if wo is not None else out
        return g.add(out, wo_b) if wo_b is not None else out
    sinks = b.w("attn_sinks.weight", il) if _has(b, "attn_sinks.weight", il) else None
    return b.attn(il, q, k, v, wo, wo_b, sinks)


def _qk_norm(b: GraphBuilder, il: int, t: Tensor, name: str) -> Tensor:
    """Q or K normed per head (a norm of the head's size) or across the whole projection."""
    if not _has(b, f"{name}.weight", il):
        return t
    weight = b.w(f"{name}.weight", il)
    if weight.ne[0] == t.ne[0]:
        return b.norm(t, weight)
    whole = b.norm(g.reshape(t, t.ne[0] * t.ne[1], t.ne[2]), weight)
    return g.reshape(whole, *t.ne)


def _ffn(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    hp = b.hp
    if not _has(b, "ffn_gate_inp.weight", il):
        return b.ffn(cur, il)
    gating = deepseek.GATING.get(int(hp.flags.get("expert_gating_func", 0)), "softmax")
    probs_b = b.w("exp_probs_b.bias", il) if _has(b, "exp_probs_b.bias", il) else None
    moe = b.moe_ffn(cur, il, hp.n_expert, hp.n_expert_used, gating=gating, exp_probs_b=probs_b)
    if _has(b, "ffn_up_shexp.weight", il):
        moe = g.add(moe, b.ffn(cur, il, biases=False, suffix="_shexp"))
    return moe
