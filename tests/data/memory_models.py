"""Skeleton GGUFs with the real shapes of popular models: metadata and tensor infos as llama.cpp's converter
writes them, the tensor data a hole, so a 70B model costs a few KB of disk. llama.cpp's no_alloc load reads no
tensor data, and neither does weightkit's memory planning, so both see the real model.

`MODELS` maps a name to a function returning (metadata, tensors); `write_model(name, folder)` writes one.
Weights are typed as a Q4_K_M file types them (matrices Q4_K, FFN down and attention V Q6_K, norms F32), which
bears on the weights' bytes only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from weightkit.gguf import GGUFValueType, Value, plan_tensor, write_gguf_skeleton

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


MODELS: dict[str, Callable[[], tuple[dict, Tensors]]] = {
    "llama-3.1-8b": llama(32, 4096, 14336, 32, 8, 128256, 131072),
    "llama-3.1-70b": llama(80, 8192, 28672, 64, 8, 128256, 131072),
    "mistral-nemo-12b": llama(40, 5120, 14336, 32, 8, 131072, 1024000, head_dim=128, rope_freqs=False),
}


def write_model(name: str, folder: Path) -> Path:
    """The skeleton GGUF of `name` in `folder` (written once)."""
    path = folder / f"{name}.gguf"
    if not path.exists():
        metadata, tensors = MODELS[name]()
        write_gguf_skeleton(path, metadata, [plan_tensor(n, shape, kind) for n, shape, kind in tensors])
    return path
