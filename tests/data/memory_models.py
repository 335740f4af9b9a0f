"""Skeleton GGUFs with the real shapes of popular models: metadata and tensor infos as llama.cpp's converter
writes them, the tensor data a hole, so a 70B model costs a few KB of disk. llama.cpp's no_alloc load reads no
tensor data, and neither does weightkit's memory planning, so both see the real model.

`MODELS` maps a name to a function returning (metadata, tensors); `write_model(name, folder)` writes one. Two
kinds: the models below, written out by hand from their configurations (weights typed roughly as a Q4_K_M file
types them: matrices Q4_K, FFN down and attention V Q6_K, norms F32, rows that are not whole blocks falling back
as llama-quantize's do, which bears on the weights' bytes only); and those of skeletons/, recorded from
llama.cpp's converter itself by make_skeletons.py (Q8_0, as the converter types them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from weightkit.dtypes import ggml_type
from weightkit.gguf import GGUFValueType, Value, plan_tensor, write_gguf_skeleton
from weightkit.gguf.values import numpy_dtype
from weightkit.llama_quantize.quantize import compatible_type

U32, F32V = GGUFValueType.UINT32, GGUFValueType.FLOAT32
Tensors = list[tuple[str, tuple[int, ...], str]]  # name, shape (numpy order), GGML type


def _u32(**values: int) -> dict:
    return {k.replace("__", "."): Value(v, U32) for k, v in values.items()}


def _base(arch: str, n_vocab: int, **values) -> dict:
    """What every file has: the architecture, a vocabulary of `n_vocab` tokens without their strings
    (tokenizer "none", llama.cpp then takes `<arch>.vocab_size`), and the hyperparameters given."""
    metadata = {"general.architecture": arch, "general.name": arch, "tokenizer.ggml.model": "none",
                f"{arch}.vocab_size": Value(n_vocab, U32)}  # fmt: skip
    for key, value in values.items():
        key = f"{arch}.{key.replace('__', '.')}"
        if isinstance(value, float):
            metadata[key] = Value(value, F32V)
        elif isinstance(value, bool):
            metadata[key] = value
        elif isinstance(value, int):
            metadata[key] = Value(value, U32)
        else:
            metadata[key] = value
    return metadata


def _dense_layer(il: int, n_embd: int, n_q: int, n_kv: int, n_ff: int, *, qkv_bias: bool = False,
                 qk_norm: int = 0) -> Tensors:  # fmt: skip
    p = f"blk.{il}."
    t: Tensors = [
        (p + "attn_norm.weight", (n_embd,), "F32"),
        (p + "attn_q.weight", (n_q, n_embd), "Q4_K"),
        (p + "attn_k.weight", (n_kv, n_embd), "Q4_K"),
        (p + "attn_v.weight", (n_kv, n_embd), "Q6_K"),
        (p + "attn_output.weight", (n_embd, n_q), "Q4_K"),
        (p + "ffn_norm.weight", (n_embd,), "F32"),
        (p + "ffn_gate.weight", (n_ff, n_embd), "Q4_K"),
        (p + "ffn_up.weight", (n_ff, n_embd), "Q4_K"),
        (p + "ffn_down.weight", (n_embd, n_ff), "Q6_K"),
    ]
    if qkv_bias:
        t += [(p + f"attn_{x}.bias", (n,), "F32") for x, n in (("q", n_q), ("k", n_kv), ("v", n_kv))]
    if qk_norm:
        t += [(p + "attn_q_norm.weight", (qk_norm,), "F32"), (p + "attn_k_norm.weight", (qk_norm,), "F32")]
    return t


def _ends(n_vocab: int, n_embd: int, tied: bool = False) -> Tensors:
    t: Tensors = [("token_embd.weight", (n_vocab, n_embd), "Q4_K"), ("output_norm.weight", (n_embd,), "F32")]
    if not tied:
        t.append(("output.weight", (n_vocab, n_embd), "Q6_K"))
    return t


def llama(n_layer: int, n_embd: int, n_ff: int, n_head: int, n_head_kv: int, n_vocab: int, n_ctx: int,
          *, head_dim: int | None = None, rope_freqs: bool = True, tied: bool = False):  # fmt: skip
    head_dim = head_dim or n_embd // n_head

    def make():
        metadata = _base("llama", n_vocab, block_count=n_layer, context_length=n_ctx, embedding_length=n_embd,
                         feed_forward_length=n_ff, attention__head_count=n_head, attention__head_count_kv=n_head_kv,
                         rope__dimension_count=head_dim, attention__key_length=head_dim,
                         attention__value_length=head_dim, attention__layer_norm_rms_epsilon=1e-5,
                         rope__freq_base=500000.0)  # fmt: skip
        tensors = _ends(n_vocab, n_embd, tied)
        if rope_freqs:
            tensors.append(("rope_freqs.weight", (head_dim // 2,), "F32"))
        for il in range(n_layer):
            tensors += _dense_layer(il, n_embd, n_head * head_dim, n_head_kv * head_dim, n_ff)
        return metadata, tensors

    return make


def _transformer(arch: str, n_layer: int, n_embd: int, n_ff: int, n_head: int, n_head_kv: int, n_vocab: int,
                 n_ctx: int, head_dim: int, *, tied: bool = False, qkv_bias: bool = False, qk_norm: bool = False,
                 post_norms: bool = False, experts: tuple[int, int, int] | None = None, **extra):  # fmt: skip
    """The common decoder layout (llama, qwen2/3, gemma2/3): per-layer Q, K, V, O, norms and a gated FFN or
    experts (count, used, expert FFN width)."""

    def make():
        metadata = _base(arch, n_vocab, block_count=n_layer, context_length=n_ctx, embedding_length=n_embd,
                         feed_forward_length=n_ff, attention__head_count=n_head, attention__head_count_kv=n_head_kv,
                         attention__key_length=head_dim, attention__value_length=head_dim,
                         rope__dimension_count=head_dim, attention__layer_norm_rms_epsilon=1e-6, **extra)  # fmt: skip
        if experts:
            metadata |= _base(arch, n_vocab, expert_count=experts[0], expert_used_count=experts[1],
                              expert_feed_forward_length=experts[2])  # fmt: skip
        tensors = _ends(n_vocab, n_embd, tied)
        n_q, n_kv = n_head * head_dim, n_head_kv * head_dim
        for il in range(n_layer):
            layer = _dense_layer(il, n_embd, n_q, n_kv, n_ff, qkv_bias=qkv_bias, qk_norm=head_dim if qk_norm else 0)
            if experts:
                n_exp, _, ff = experts
                layer = [t for t in layer if ".ffn_" not in t[0] or "ffn_norm" in t[0]]
                p = f"blk.{il}."
                layer += [(p + "ffn_gate_inp.weight", (n_exp, n_embd), "F32"),
                          (p + "ffn_gate_exps.weight", (n_exp, ff, n_embd), "Q4_K"),
                          (p + "ffn_up_exps.weight", (n_exp, ff, n_embd), "Q4_K"),
                          (p + "ffn_down_exps.weight", (n_exp, n_embd, ff), "Q6_K")]  # fmt: skip
            if post_norms:
                layer += [(f"blk.{il}.post_attention_norm.weight", (n_embd,), "F32"),
                          (f"blk.{il}.post_ffw_norm.weight", (n_embd,), "F32")]  # fmt: skip
            tensors += layer
        return metadata, tensors

    return make


def gpt_oss(n_layer: int, n_embd: int, n_head: int, n_head_kv: int, head_dim: int, n_expert: int, n_used: int,
            n_ff: int, n_vocab: int, n_ctx: int, window: int):  # fmt: skip
    def make():
        metadata = _base("gpt-oss", n_vocab, block_count=n_layer, context_length=n_ctx, embedding_length=n_embd,
                         feed_forward_length=n_ff, attention__head_count=n_head, attention__head_count_kv=n_head_kv,
                         attention__key_length=head_dim, attention__value_length=head_dim,
                         rope__dimension_count=head_dim, attention__layer_norm_rms_epsilon=1e-5,
                         expert_count=n_expert, expert_used_count=n_used, expert_feed_forward_length=n_ff,
                         attention__sliding_window=window)  # fmt: skip
        tensors = _ends(n_vocab, n_embd)
        n_q, n_kv = n_head * head_dim, n_head_kv * head_dim
        for il in range(n_layer):
            p = f"blk.{il}."
            tensors += [
                (p + "attn_norm.weight", (n_embd,), "F32"), (p + "post_attention_norm.weight", (n_embd,), "F32"),
                (p + "attn_q.weight", (n_q, n_embd), "Q8_0"), (p + "attn_k.weight", (n_kv, n_embd), "Q8_0"),
                (p + "attn_v.weight", (n_kv, n_embd), "Q8_0"), (p + "attn_q.bias", (n_q,), "F32"),
                (p + "attn_k.bias", (n_kv,), "F32"), (p + "attn_v.bias", (n_kv,), "F32"),
                (p + "attn_output.weight", (n_embd, n_q), "Q8_0"), (p + "attn_output.bias", (n_embd,), "F32"),
                (p + "attn_sinks.weight", (n_head,), "F32"),
                (p + "ffn_gate_inp.weight", (n_expert, n_embd), "F32"), (p + "ffn_gate_inp.bias", (n_expert,), "F32"),
                (p + "ffn_gate_exps.weight", (n_expert, n_ff, n_embd), "MXFP4"),
                (p + "ffn_up_exps.weight", (n_expert, n_ff, n_embd), "MXFP4"),
                (p + "ffn_down_exps.weight", (n_expert, n_embd, n_ff), "MXFP4"),
                (p + "ffn_gate_exps.bias", (n_expert, n_ff), "F32"), (p + "ffn_up_exps.bias", (n_expert, n_ff), "F32"),
                (p + "ffn_down_exps.bias", (n_expert, n_embd), "F32"),
            ]  # fmt: skip
        return metadata, tensors

    return make


def phi3(n_layer: int, n_embd: int, n_ff: int, n_head: int, n_head_kv: int, n_vocab: int, n_ctx: int):
    head_dim = n_embd // n_head

    def make():
        metadata = _base("phi3", n_vocab, block_count=n_layer, context_length=n_ctx, embedding_length=n_embd,
                         feed_forward_length=n_ff, attention__head_count=n_head, attention__head_count_kv=n_head_kv,
                         rope__dimension_count=head_dim, attention__layer_norm_rms_epsilon=1e-5)  # fmt: skip
        tensors = _ends(n_vocab, n_embd)
        for il in range(n_layer):
            p = f"blk.{il}."
            tensors += [
                (p + "attn_norm.weight", (n_embd,), "F32"),
                (p + "attn_qkv.weight", (n_embd + 2 * n_head_kv * head_dim, n_embd), "Q4_K"),
                (p + "attn_output.weight", (n_embd, n_embd), "Q4_K"), (p + "ffn_norm.weight", (n_embd,), "F32"),
                (p + "ffn_up.weight", (2 * n_ff, n_embd), "Q4_K"), (p + "ffn_down.weight", (n_embd, n_ff), "Q6_K"),
            ]  # fmt: skip
        return metadata, tensors

    return make


def deepseek2_lite():
    """DeepSeek-V2-Lite: MLA (kv_lora_rank 512, rope 64, no-rope 128, values 128), 64 experts of which 6 are
    routed plus 2 shared, the first layer dense."""
    n_layer, n_embd, n_head, n_vocab = 27, 2048, 16, 102400
    rank, rope, nope, v_dim, n_exp, ff_exp, ff = 512, 64, 128, 128, 64, 1408, 10944

    def make():
        metadata = _base("deepseek2", n_vocab, block_count=n_layer, context_length=163840, embedding_length=n_embd,
                         feed_forward_length=ff, attention__head_count=n_head, attention__head_count_kv=1,
                         attention__key_length=rank + rope, attention__value_length=rank,
                         attention__key_length_mla=nope + rope, attention__value_length_mla=v_dim,
                         rope__dimension_count=rope, attention__layer_norm_rms_epsilon=1e-6,
                         attention__kv_lora_rank=rank, leading_dense_block_count=1, expert_count=n_exp,
                         expert_used_count=6, expert_shared_count=2, expert_feed_forward_length=ff_exp,
                         expert_weights_scale=1.0, expert_gating_func=1)  # fmt: skip
        tensors = _ends(n_vocab, n_embd)
        for il in range(n_layer):
            p = f"blk.{il}."
            tensors += [
                (p + "attn_norm.weight", (n_embd,), "F32"), (p + "attn_kv_a_norm.weight", (rank,), "F32"),
                (p + "attn_q.weight", (n_head * (nope + rope), n_embd), "Q4_K"),
                (p + "attn_kv_a_mqa.weight", (rank + rope, n_embd), "Q4_K"),
                (p + "attn_k_b.weight", (n_head, rank, nope), "Q8_0"),
                (p + "attn_v_b.weight", (n_head, v_dim, rank), "Q8_0"),
                (p + "attn_output.weight", (n_embd, n_head * v_dim), "Q4_K"), (p + "ffn_norm.weight", (n_embd,), "F32"),
            ]  # fmt: skip
            if il == 0:
                tensors += [(p + "ffn_gate.weight", (ff, n_embd), "Q4_K"), (p + "ffn_up.weight", (ff, n_embd), "Q4_K"),
                            (p + "ffn_down.weight", (n_embd, ff), "Q6_K")]  # fmt: skip
            else:
                tensors += [
                    (p + "ffn_gate_inp.weight", (n_exp, n_embd), "F32"),
                    (p + "ffn_gate_exps.weight", (n_exp, ff_exp, n_embd), "Q4_K"),
                    (p + "ffn_up_exps.weight", (n_exp, ff_exp, n_embd), "Q4_K"),
                    (p + "ffn_down_exps.weight", (n_exp, n_embd, ff_exp), "Q6_K"),
                    (p + "ffn_gate_shexp.weight", (2 * ff_exp, n_embd), "Q4_K"),
                    (p + "ffn_up_shexp.weight", (2 * ff_exp, n_embd), "Q4_K"),
                    (p + "ffn_down_shexp.weight", (n_embd, 2 * ff_exp), "Q6_K"),
                ]  # fmt: skip
        return metadata, tensors

    return make


def minilm():
    """all-MiniLM-L6-v2 as llama.cpp's converter writes it (bert, mean pooling)."""
    n_layer, n_embd, n_ff, n_head, n_vocab, n_ctx = 6, 384, 1536, 12, 30522, 512

    def make():
        metadata = _base("bert", n_vocab, block_count=n_layer, context_length=n_ctx, embedding_length=n_embd,
                         feed_forward_length=n_ff, attention__head_count=n_head, attention__layer_norm_epsilon=1e-12,
                         attention__causal=False, pooling_type=1)  # fmt: skip
        metadata["tokenizer.ggml.token_type_count"] = Value(2, U32)
        tensors: Tensors = [
            ("token_embd.weight", (n_vocab, n_embd), "F16"), ("token_types.weight", (2, n_embd), "F32"),
            ("position_embd.weight", (n_ctx, n_embd), "F16"), ("token_embd_norm.weight", (n_embd,), "F32"),
            ("token_embd_norm.bias", (n_embd,), "F32"),
        ]  # fmt: skip
        for il in range(n_layer):
            p = f"blk.{il}."
            tensors += [(p + f"attn_{x}.{k}", (n_embd, n_embd) if k == "weight" else (n_embd,), "F16" if k == "weight"
                         else "F32") for x in ("q", "k", "v") for k in ("weight", "bias")]  # fmt: skip
            tensors += [
                (p + "attn_output.weight", (n_embd, n_embd), "F16"), (p + "attn_output.bias", (n_embd,), "F32"),
                (p + "attn_output_norm.weight", (n_embd,), "F32"), (p + "attn_output_norm.bias", (n_embd,), "F32"),
                (p + "ffn_up.weight", (n_ff, n_embd), "F16"), (p + "ffn_up.bias", (n_ff,), "F32"),
                (p + "ffn_down.weight", (n_embd, n_ff), "F16"), (p + "ffn_down.bias", (n_embd,), "F32"),
                (p + "layer_output_norm.weight", (n_embd,), "F32"), (p + "layer_output_norm.bias", (n_embd,), "F32"),
            ]  # fmt: skip
        return metadata, tensors

    return make


def bert_rope(arch: str, n_layer: int, n_embd: int, n_ff: int, n_head: int, n_vocab: int, n_ctx: int,
              n_types: int, rope_base: float, eps: float, *, gated: bool):  # fmt: skip
    """A BERT with rotary positions as llama.cpp's converter writes it (F16 matrices, mean pooling): nomic-bert
    (`gated`: a SwiGLU FFN, no biases but the norms') or jina-bert-v3 (biases, a GELU FFN; its LoRA adapters go to
    files of their own). The fused QKV projection, no position embeddings."""

    def make():
        metadata = _base(arch, n_vocab, block_count=n_layer, context_length=n_ctx, embedding_length=n_embd,
                         feed_forward_length=n_ff, attention__head_count=n_head, attention__layer_norm_epsilon=eps,
                         attention__causal=False, pooling_type=1, rope__freq_base=rope_base)  # fmt: skip
        metadata["tokenizer.ggml.token_type_count"] = Value(n_types, U32)
        tensors: Tensors = [
            ("token_embd.weight", (n_vocab, n_embd), "F16"), ("token_types.weight", (n_types, n_embd), "F32"),
            ("token_embd_norm.weight", (n_embd,), "F32"), ("token_embd_norm.bias", (n_embd,), "F32"),
        ]  # fmt: skip
        for il in range(n_layer):
            p = f"blk.{il}."
            tensors += [
                (p + "attn_qkv.weight", (3 * n_embd, n_embd), "F16"),
                (p + "attn_output.weight", (n_embd, n_embd), "F16"),
                (p + "attn_output_norm.weight", (n_embd,), "F32"), (p + "attn_output_norm.bias", (n_embd,), "F32"),
                (p + "ffn_up.weight", (n_ff, n_embd), "F16"), (p + "ffn_down.weight", (n_embd, n_ff), "F16"),
                (p + "layer_output_norm.weight", (n_embd,), "F32"), (p + "layer_output_norm.bias", (n_embd,), "F32"),
            ]  # fmt: skip
            if gated:
                tensors.append((p + "ffn_gate.weight", (n_ff, n_embd), "F16"))
            else:
                tensors += [(p + "attn_qkv.bias", (3 * n_embd,), "F32"), (p + "attn_output.bias", (n_embd,), "F32"),
                            (p + "ffn_up.bias", (n_ff,), "F32"), (p + "ffn_down.bias", (n_embd,), "F32")]  # fmt: skip
        return metadata, tensors

    return make


def _mamba2_layer(il: int, n_embd: int, d_inner: int, d_state: int, n_group: int, n_head: int) -> Tensors:
    p = f"blk.{il}."
    channels = d_inner + 2 * n_group * d_state
    return [
        (p + "attn_norm.weight", (n_embd,), "F32"),
        (p + "ssm_in.weight", (2 * d_inner + 2 * n_group * d_state + n_head, n_embd), "Q4_K"),
        (p + "ssm_conv1d.weight", (channels, 4), "F32"), (p + "ssm_conv1d.bias", (channels,), "F32"),
        (p + "ssm_dt.bias", (n_head,), "F32"), (p + "ssm_a", (n_head, 1), "F32"), (p + "ssm_d", (n_head, 1), "F32"),
        (p + "ssm_norm.weight", (n_group, d_inner // n_group), "F32"),
        (p + "ssm_out.weight", (n_embd, d_inner), "Q4_K"),
    ]  # fmt: skip


def mamba2_27b():
    """Mamba-2 2.7B: 64 layers of d_model 2560, d_inner 5120, d_state 128, 80 heads, one group."""
    n_layer, n_embd, d_inner, d_state, n_head, n_vocab = 64, 2560, 5120, 128, 80, 50288

    def make():
        metadata = _base("mamba2", n_vocab, block_count=n_layer, context_length=1048576, embedding_length=n_embd,
                         feed_forward_length=0, attention__head_count=0, attention__layer_norm_rms_epsilon=1e-5,
                         ssm__conv_kernel=4, ssm__inner_size=d_inner, ssm__state_size=d_state,
                         ssm__time_step_rank=n_head, ssm__group_count=1)  # fmt: skip
        tensors = _ends(n_vocab, n_embd)
        for il in range(n_layer):
            tensors += _mamba2_layer(il, n_embd, d_inner, d_state, 1, n_head)
        return metadata, tensors

    return make


def granite_4_hybrid():
    """Granite 4.0-H Tiny's layout: 40 layers, Mamba-2 but for attention at layers 5, 15, 25 and 35 (no rope),
    each followed by 64 experts (6 routed) and a shared expert."""
    n_layer, n_embd, n_head, head_dim, n_vocab = 40, 1536, 12, 128, 100352
    d_inner, d_state, n_ssm_head, n_exp, ff, ff_shared = 3072, 128, 48, 64, 512, 1024
    attention = {5, 15, 25, 35}

    def make():
        metadata = _base("granitehybrid", n_vocab, block_count=n_layer, context_length=1048576,
                         embedding_length=n_embd, feed_forward_length=ff, attention__head_count=n_head,
                         attention__key_length=head_dim, attention__value_length=head_dim,
                         attention__layer_norm_rms_epsilon=1e-5, expert_count=n_exp, expert_used_count=6,
                         expert_shared_feed_forward_length=ff_shared, ssm__conv_kernel=4, ssm__inner_size=d_inner,
                         ssm__state_size=d_state, ssm__time_step_rank=n_ssm_head, ssm__group_count=1,
                         rope__scaling__finetuned=False, embedding_scale=12.0, residual_scale=0.22,
                         logit_scale=6.0, attention__scale=0.0078125)  # fmt: skip
        metadata["granitehybrid.attention.head_count_kv"] = np.array(
            [4 if il in attention else 0 for il in range(n_layer)], np.uint32
        )
        tensors = _ends(n_vocab, n_embd, tied=True)
        for il in range(n_layer):
            p = f"blk.{il}."
            if il in attention:
                tensors += [
                    (p + "attn_norm.weight", (n_embd,), "F32"),
                    (p + "attn_q.weight", (n_head * head_dim, n_embd), "Q4_K"),
                    (p + "attn_k.weight", (4 * head_dim, n_embd), "Q4_K"),
                    (p + "attn_v.weight", (4 * head_dim, n_embd), "Q6_K"),
                    (p + "attn_output.weight", (n_embd, n_head * head_dim), "Q4_K"),
                ]  # fmt: skip
            else:
                tensors += _mamba2_layer(il, n_embd, d_inner, d_state, 1, n_ssm_head)
            tensors += [
                (p + "ffn_norm.weight", (n_embd,), "F32"), (p + "ffn_gate_inp.weight", (n_exp, n_embd), "F32"),
                (p + "ffn_gate_exps.weight", (n_exp, ff, n_embd), "Q4_K"),
                (p + "ffn_up_exps.weight", (n_exp, ff, n_embd), "Q4_K"),
                (p + "ffn_down_exps.weight", (n_exp, n_embd, ff), "Q6_K"),
                (p + "ffn_gate_shexp.weight", (ff_shared, n_embd), "Q4_K"),
                (p + "ffn_up_shexp.weight", (ff_shared, n_embd), "Q4_K"),
                (p + "ffn_down_shexp.weight", (n_embd, ff_shared), "Q6_K"),
            ]  # fmt: skip
        return metadata, tensors

    return make


def mamba_28b():
    """Mamba 2.8B (state-spaces/mamba-2.8b-hf): 64 layers of d_model 2560, d_inner 5120, d_state 16, d_conv 4, dt
    rank 160; the output tied to the token embeddings, as the converter leaves it."""
    n_layer, n_embd, d_inner, d_state, dt_rank, n_vocab = 64, 2560, 5120, 16, 160, 50280

    def make():
        metadata = _base("mamba", n_vocab, block_count=n_layer, context_length=1048576, embedding_length=n_embd,
                         feed_forward_length=0, attention__head_count=0, attention__layer_norm_rms_epsilon=1e-5,
                         ssm__conv_kernel=4, ssm__inner_size=d_inner, ssm__state_size=d_state,
                         ssm__time_step_rank=dt_rank, ssm__dt_b_c_rms=False)  # fmt: skip
        tensors = _ends(n_vocab, n_embd, tied=True)
        for il in range(n_layer):
            p = f"blk.{il}."
            tensors += [
                (p + "attn_norm.weight", (n_embd,), "F32"), (p + "ssm_in.weight", (2 * d_inner, n_embd), "Q4_K"),
                (p + "ssm_conv1d.weight", (d_inner, 4), "F32"), (p + "ssm_conv1d.bias", (d_inner,), "F32"),
                (p + "ssm_x.weight", (dt_rank + 2 * d_state, d_inner), "Q4_K"),
                (p + "ssm_dt.weight", (d_inner, dt_rank), "Q4_K"), (p + "ssm_dt.bias", (d_inner,), "F32"),
                (p + "ssm_a", (d_inner, d_state), "F32"), (p + "ssm_d", (d_inner,), "F32"),
                (p + "ssm_out.weight", (n_embd, d_inner), "Q4_K"),
            ]  # fmt: skip
        return metadata, tensors

    return make


def _rwkv_ends(n_vocab: int, n_embd: int) -> Tensors:
    """RWKV's embeddings with their layer norm (LN0), and the normed output head."""
    return [
        ("token_embd.weight", (n_vocab, n_embd), "Q4_K"), ("token_embd_norm.weight", (n_embd,), "F32"),
        ("token_embd_norm.bias", (n_embd,), "F32"), ("output_norm.weight", (n_embd,), "F32"),
        ("output_norm.bias", (n_embd,), "F32"), ("output.weight", (n_vocab, n_embd), "Q6_K"),
    ]  # fmt: skip


def _rwkv_layer(il: int, n_embd: int, n_ff: int) -> Tensors:
    """What RWKV-6 and RWKV-7 layers share: the two layer norms, R/K/V/O, the group norm, the channel mix."""
    p = f"blk.{il}."
    return [
        (p + "attn_norm.weight", (n_embd,), "F32"), (p + "attn_norm.bias", (n_embd,), "F32"),
        (p + "attn_norm_2.weight", (n_embd,), "F32"), (p + "attn_norm_2.bias", (n_embd,), "F32"),
        (p + "time_mix_key.weight", (n_embd, n_embd), "Q4_K"), (p + "time_mix_value.weight", (n_embd, n_embd), "Q6_K"),
        (p + "time_mix_receptance.weight", (n_embd, n_embd), "Q4_K"),
        (p + "time_mix_ln.weight", (n_embd,), "F32"), (p + "time_mix_ln.bias", (n_embd,), "F32"),
        (p + "time_mix_output.weight", (n_embd, n_embd), "Q4_K"),
        (p + "channel_mix_lerp_k.weight", (1, 1, n_embd), "F32"),
        (p + "channel_mix_key.weight", (n_ff, n_embd), "Q4_K"),
        (p + "channel_mix_value.weight", (n_embd, n_ff), "Q6_K"),
    ]  # fmt: skip


def rwkv6_finch_16b():
    """RWKV-6 Finch 1.6B (RWKV/v6-Finch-1B6-HF): 24 layers of 2048, heads of 64, FFN 7168, time-mix LoRA 32 (five
    fused), decay LoRA 64, the residual halved every 6 layers."""
    n_layer, n_embd, head, n_ff, n_vocab, mix, decay = 24, 2048, 64, 7168, 65536, 32, 64

    def make():
        metadata = _base("rwkv6", n_vocab, block_count=n_layer, context_length=1048576, embedding_length=n_embd,
                         feed_forward_length=n_ff, attention__head_count=0, attention__layer_norm_epsilon=1e-5,
                         rescale_every_n_layers=6, wkv__head_size=head, time_mix_extra_dim=mix,
                         time_decay_extra_dim=decay)  # fmt: skip
        tensors = _rwkv_ends(n_vocab, n_embd)
        for il in range(n_layer):
            p = f"blk.{il}."
            tensors += _rwkv_layer(il, n_embd, n_ff)
            tensors += [
                (p + "time_mix_w1.weight", (5 * mix, n_embd), "F32"),
                (p + "time_mix_w2.weight", (5, n_embd, mix), "F32"),
                (p + "time_mix_lerp_x.weight", (1, 1, n_embd), "F32"),
                (p + "time_mix_lerp_fused.weight", (5, 1, 1, n_embd), "F32"),
                (p + "time_mix_first.weight", (n_embd // head, head), "F32"),
                (p + "time_mix_decay.weight", (n_embd,), "F32"),
                (p + "time_mix_decay_w1.weight", (decay, n_embd), "F32"),
                (p + "time_mix_decay_w2.weight", (n_embd, decay), "F32"),
                (p + "time_mix_gate.weight", (n_embd, n_embd), "Q4_K"),
                (p + "channel_mix_lerp_r.weight", (1, 1, n_embd), "F32"),
                (p + "channel_mix_receptance.weight", (n_embd, n_embd), "Q4_K"),
            ]  # fmt: skip
        return metadata, tensors

    return make


def rwkv7_goose_15b():
    """RWKV-7 Goose 1.5B (fla-hub/rwkv7-1.5B-world): 24 layers of 2048, heads of 64, FFN 8192; LoRA ranks 96
    (decay, in-context learning rate), 64 (value residual mix; layer 0 has dummies of the ICLR rank), 256 (gate)."""
    n_layer, n_embd, head, n_ff, n_vocab = 24, 2048, 64, 8192, 65536
    decay, iclr, value_mix, gate = 96, 96, 64, 256

    def make():
        metadata = _base("rwkv7", n_vocab, block_count=n_layer, context_length=1048576, embedding_length=n_embd,
                         feed_forward_length=n_ff, attention__head_count=0, attention__layer_norm_epsilon=1e-5,
                         wkv__head_size=head, attention__decay_lora_rank=decay, attention__iclr_lora_rank=iclr,
                         attention__value_residual_mix_lora_rank=value_mix,
                         attention__gate_lora_rank=gate)  # fmt: skip
        tensors = _rwkv_ends(n_vocab, n_embd)
        for il in range(n_layer):
            p = f"blk.{il}."
            v_rank = iclr if il == 0 else value_mix
            tensors += _rwkv_layer(il, n_embd, n_ff)
            for name, rank in (("w", decay), ("a", iclr), ("v", v_rank), ("g", gate)):
                tensors += [(p + f"time_mix_{name}1.weight", (rank, n_embd), "F32"),
                            (p + f"time_mix_{name}2.weight", (n_embd, rank), "F32")]  # fmt: skip
                if name != "g":
                    tensors.append((p + f"time_mix_{name}0.weight", (n_embd,), "F32"))
            tensors += [
                (p + "time_mix_lerp_fused.weight", (6, 1, 1, n_embd), "F32"),
                (p + "time_mix_k_k.weight", (n_embd,), "F32"), (p + "time_mix_k_a.weight", (n_embd,), "F32"),
                (p + "time_mix_r_k.weight", (n_embd,), "F32"),
            ]  # fmt: skip
        return metadata, tensors

    return make


MODELS: dict[str, Callable[[], tuple[dict, Tensors]]] = {
    "llama-3.1-8b": llama(32, 4096, 14336, 32, 8, 128256, 131072),
    "llama-3.1-70b": llama(80, 8192, 28672, 64, 8, 128256, 131072),
    "mistral-nemo-12b": llama(40, 5120, 14336, 32, 8, 131072, 1024000, head_dim=128, rope_freqs=False),
    "qwen2.5-7b": _transformer("qwen2", 28, 3584, 18944, 28, 4, 152064, 32768, 128, qkv_bias=True),
    "qwen3-8b": _transformer("qwen3", 36, 4096, 12288, 32, 8, 151936, 40960, 128, qk_norm=True),
    "qwen3-30b-a3b": _transformer(
        "qwen3moe", 48, 2048, 6144, 32, 4, 151936, 40960, 128, qk_norm=True, experts=(128, 8, 768)
    ),
    "gemma-2-9b": _transformer(
        "gemma2",
        42,
        3584,
        14336,
        16,
        8,
        256000,
        8192,
        256,
        tied=True,
        post_norms=True,
        attention__sliding_window=4096,
        attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0,
    ),
    "gemma-3-12b": _transformer(
        "gemma3",
        48,
        3840,
        15360,
        16,
        8,
        262208,
        131072,
        256,
        tied=True,
        qk_norm=True,
        post_norms=True,
        attention__sliding_window=1024,
    ),
    "gpt-oss-20b": gpt_oss(24, 2880, 64, 8, 64, 32, 4, 2880, 201088, 131072, 128),
    "phi-4": phi3(40, 5120, 17920, 40, 10, 100352, 16384),
    "deepseek-v2-lite": deepseek2_lite(),
    "all-minilm-l6-v2": minilm(),
    # nomic-embed-text-v1.5 (nomic-ai's config.json: 12 layers of 768, 12 heads, FFN 3072, 30528 tokens, 2 token
    # types, rotary base 1000; the converter sets its trained 2048 positions)
    "nomic-embed-text-v1.5": bert_rope("nomic-bert", 12, 768, 3072, 12, 30528, 2048, 2, 1000.0, 1e-12, gated=True),
    # jina-embeddings-v3 (jinaai's config.json: XLM-RoBERTa of 24 layers of 1024, 16 heads, FFN 4096, 250002 tokens, 1
    # token type, rotary base 20000; 8194 positions less the 2 before the first)
    "jina-embeddings-v3": bert_rope("jina-bert-v3", 24, 1024, 4096, 16, 250002, 8192, 1, 20000.0, 1e-5, gated=False),
    "mamba2-2.7b": mamba2_27b(),
    "granite-4.0-h-tiny": granite_4_hybrid(),
    "mamba-2.8b": mamba_28b(),
    "rwkv6-finch-1.6b": rwkv6_finch_16b(),
    "rwkv7-goose-1.5b": rwkv7_goose_15b(),
}


def converted(path: Path) -> Callable[[], tuple[dict, Tensors]]:
    """The model make_skeletons.py recorded in `path`: metadata values with their GGUF types, tensor infos."""

    def make():
        record = json.loads(path.read_text())
        metadata = {}
        for key, (kind, value, *element) in record["metadata"].items():
            t = GGUFValueType[kind]
            if t == GGUFValueType.ARRAY and element[0] != "STRING":
                e = GGUFValueType[element[0]]
                value = np.array(value, np.bool_ if e == GGUFValueType.BOOL else numpy_dtype(e))
                metadata[key] = Value(value, t, e)
            elif t == GGUFValueType.STRING:
                metadata[key] = value  # a plain str, as the models above give theirs (written as a STRING)
            else:
                metadata[key] = Value(value, t, GGUFValueType[element[0]] if element else None)
        return metadata, [(name, tuple(shape), kind) for name, shape, kind in record["tensors"]]

    return make


_RECORDED = sorted((Path(__file__).parent / "skeletons").glob("*.json"))
MODELS.update({path.stem: converted(path) for path in _RECORDED if not path.stem.startswith("mmproj-")})
#: vision and audio projectors (`--mmproj` files), recorded by make_skeletons.py as its converter writes them
PROJECTORS = {path.stem: converted(path) for path in _RECORDED if path.stem.startswith("mmproj-")}


def qkvz_fused(make: Callable[[], tuple[dict, Tensors]]) -> Callable[[], tuple[dict, Tensors]]:
    """A Qwen3-Next model as older conversions wrote it: each linear-attention layer's Q, K, V and Z projections
    in one `ssm_in` matrix (llama.cpp still loads them, by another graph)."""

    def legacy():
        metadata, tensors = make()
        out = []
        for name, shape, kind in tensors:
            if name.endswith(".attn_gate.weight"):
                continue
            if name.endswith(".attn_qkv.weight"):
                gate = next(s for n, s, _ in tensors if n == name.replace("attn_qkv", "attn_gate"))
                name, shape = name.replace("attn_qkv", "ssm_in"), (shape[0] + gate[0], shape[1])
            out.append((name, shape, kind))
        return metadata, out

    return legacy


MODELS["qwen3_next-24-layers-ssm-in"] = qkvz_fused(MODELS["qwen3_next-24-layers"])


def with_keys(base: str, keys: dict) -> Callable[[], tuple[dict, Tensors]]:
    """The model `base` with metadata keys its transformers default configuration leaves out but real checkpoints
    carry."""

    def make():
        metadata, tensors = MODELS[base]()
        return {**metadata, **keys}, tensors

    return make


def without_keys(base: str, keys: tuple[str, ...]) -> Callable[[], tuple[dict, Tensors]]:
    """The model `base` without metadata keys that older conversions did not write."""

    def make():
        metadata, tensors = MODELS[base]()
        return {key: value for key, value in metadata.items() if key not in keys}, tensors

    return make


MODELS.update({
    # Gemma 2 as converted before its soft-capping keys were written: llama.cpp caps with its defaults
    "gemma-2-9b-no-softcap": without_keys("gemma-2-9b", ("gemma2.attn_logit_softcapping",
                                                         "gemma2.final_logit_softcapping")),
    # Ministral 3 3B: llama 4's attention temperature (llama_4_scaling_beta) over yarn's original context
    "mistral3-26-layers-temperature": with_keys("mistral3-26-layers", {
        "mistral3.attention.temperature_scale": Value(0.1, F32V),
        "mistral3.rope.scaling.original_context_length": Value(16384, U32),
    }),
    # the same scaling in the deepseek2 graph (Mistral Large 3)
    "mistral4-default-temperature": with_keys("mistral4-default", {
        "mistral4.attention.temperature_scale": Value(0.1, F32V),
        "mistral4.attention.temperature_length": Value(8192, U32),
    }),
})  # fmt: skip


#: shapes for the speed benchmark only (not recorded): the issue's 128 layers and 262k vocabulary
BENCHMARK = {"llama-128-layers-262k-vocab": llama(128, 8192, 28672, 64, 8, 262144, 131072)}


def architecture(name: str) -> str:
    """The GGUF architecture of the model `name`."""
    return MODELS[name]()[0]["general.architecture"]


def write_model(name: str, folder: Path) -> Path:
    """The skeleton GGUF of `name` (in MODELS, PROJECTORS or BENCHMARK) in `folder` (written once)."""
    path = folder / f"{name}.gguf"
    if not path.exists():
        write_skeleton(path, *{**MODELS, **PROJECTORS, **BENCHMARK}[name]())
    return path


def write_skeleton(path: Path, metadata: dict, tensors: Tensors) -> None:
    """A skeleton GGUF of these metadata and tensors, each typed as asked or as llama-quantize falls back."""
    planned = [plan_tensor(n, s, compatible_type(ggml_type(kind).type, s[-1])) for n, s, kind in tensors]
    write_gguf_skeleton(path, metadata, planned)
