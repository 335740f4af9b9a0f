"""Ollama's memory estimate for a GGUF model: the KV cache of every layer and the compute-graph sizes.

This is `GGML.GraphSize` from Ollama's `fs/ggml/ggml.go`, with the graph fallback and the layer sums of
`llamaServer.Load` in `llm/server.go`, as they stand at Ollama commit
f63eea3d273816ffc27fbeb0662ab44d236abc45 (2026-05-24), the last before GraphSize was removed. It reads
metadata and tensor infos only, never tensor data.

Arithmetic is Go's: unsigned 64-bit integers that wrap, evaluated left to right, divisions that
truncate, and the float64 detours where Ollama takes them (the KV cache of attention layers is
`uint64(float64(context * (key_length + value_length) * kv_heads) * bytes_per_element)`).

Inputs are read as Ollama reads them: keys `<arch>.block_count`, `.embedding_length`,
`.attention.head_count` and `.attention.head_count_kv` (a uint32, or per-layer arrays of uint32 or
int32; absent means 1), `.attention.key_length` / `.value_length` (absent: the embedding length over the
smallest head count), the vocabulary is the length of `tokenizer.ggml.tokens`; recurrent layers (a head
count or KV head count of 0) take their state size from `.ssm.conv_kernel`, `.ssm.state_size`,
`.ssm.inner_size` and `.ssm.group_count`, always at 4 bytes per element.

Where weightkit differs from Ollama (each on purpose):

- Ollama panics when `tokenizer.ggml.tokens` is missing or is not an array of strings; weightkit raises
  `FormatError` (it does not treat the vocabulary as empty). It raises too where Go would panic on an
  empty head-count array, an integer division by zero (the Mixtral 8x7B case with no heads), or a
  shape with too few dimensions (`ffn_gate.0.weight`, `attn_qkv.bias`).
- A missing or non-string `general.architecture`, or a missing `<arch>.block_count`, raises
  `FormatError`; Ollama would quietly estimate a model of no layers. So does a block count above
  65,536 (`graph_kv.MAX_LAYERS`), where Ollama would try to allocate per-layer slices that long.
- Ollama's scheduler decodes metadata arrays of up to 1024 elements, so a per-layer head-count array
  longer than that makes its GraphSize panic; weightkit reads the array whatever its length.
- A key the estimate reads that is present with a type Ollama's accessor does not accept (say
  `block_count` as UINT64, `attention.cross_attention_layers` as UINT32 array) raises `FormatError`;
  Ollama silently uses its default instead.
- `kv_cache_type` must be one of `f16`, `q8_0`, `q4_0`, `f32` (or `""`, Ollama's unset value, meaning
  f16); Ollama counts any other string as f16.
- `flash_attention` is a bool: True is Ollama's `FlashAttentionEnabled`, False its Disabled or Auto
  (GraphSize only tests for Enabled).
- Go leaves `uint64(f)` for a float of 2**64 or more to the implementation; this follows amd64 (2**63).
- Ollama's `llamaServer.Load` raises the batch to the context for embedding models (those with a
  `<arch>.pooling_type` key) before calling GraphSize; `graph_size` takes the batch it is given.

Where the spec (`ollama-memory-estimation.md`) and the code differ, the code is followed:

- gpt-oss: the partial-offload graph is `2 * H_max / max(H_kv_min, 1) * kv_total / 6` evaluated left to
  right in integers, and `kv_total` there is the default estimate (every layer at the full context),
  not the alternating sliding/full KV that GraphSize returns. The full-offload graph is 0 in GraphSize,
  so `llm/server.go` makes it the partial one.
- The fallback (`llm/server.go`, any architecture whose GraphSize left the partial graph at 0) is
  `(H_max / max(H_kv_min, 1)) * kv_total / 6`: the head ratio truncates first, and the product is
  divided by 6 (not `kv_total / 6` first). `kv_total` is the sum of the final per-layer KV.
- mllama's rope-frequency count comes from a tensor named `rope_freqs.weights` (Ollama looks up the
  name part `weights`); real files name it `rope_freqs.weight`, so in practice it is 0, as in Ollama.
- gemma3's sliding-window KV uses the largest KV head count (not the layer's own), and so does gpt-oss.
- The mllama cross-attention KV is `H_kv_max * (D_k + D_v) * 4 * 1601 * 4` whatever the cache type.
- The spec's worked example (Command-R 08-2024 35B, 32K context, 24 GB) quotes its KV (4.88) and graph
  (5.01) in units of 2**40 / 1000 bytes: 5 GiB of KV and 5,507,123,200 bytes of partial-offload graph.
  `tests/memory/test_graph_example.py` reproduces it.
- Layer weights (`layer_sizes`) are Ollama's `Tensor.Size` from its own type table, not the file's
  byte lengths: types it has no size for (TQ1_0, TQ2_0, NVFP4, Q1_0, Q2_0, ...) count 0 bytes.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from ...errors import ArgumentError, ArgumentTypeError, FormatError
from .graph_kv import U64, OllamaKV, f64_to_u64, u64_to_f64
from .graph_layers import (
    LayerSizes,
    group_layers,
    layer_size,
    layer_sizes,
    tensor_elements,
    tensor_size,
)

__all__ = [
    "KV_CACHE_TYPES",
    "GraphEstimate",
    "LayerSizes",
    "graph_size",
    "group_layers",
    "kv_cache_sizes",
    "layer_size",
    "layer_sizes",
    "tensor_size",
]

MiB = 1 << 20

#: bytes per element of each KV cache type Ollama knows (`kvCacheBytesPerElement`); "" is its default
KV_CACHE_TYPES: dict[str, float] = {"f16": 2.0, "q8_0": 1.0, "q4_0": 0.5, "f32": 4.0, "": 2.0}


@dataclass(frozen=True)
class GraphEstimate:
    """Ollama's estimate for one model at one context, batch, parallelism, cache type and attention.

    - `kv`: bytes of KV cache of each layer (`blk.0` ... `blk.N-1`), as GraphSize returns them.
    - `kv_total`: their sum (uint64).
    - `full_offload`, `partial_offload`: the compute graph with every layer on the GPU, and with some
      on the CPU, after `llm/server.go`'s fallback (a partial graph of 0 becomes
      `H_max / H_kv_min * kv_total / 6`; a full graph of 0 becomes the partial one). These are the
      numbers Ollama lays the model out with.
    - `graphsize_full_offload`, `graphsize_partial_offload`: what GraphSize itself returned (0 for an
      architecture it has no case for).
    """

    kv: tuple[int, ...]
    kv_total: int
    full_offload: int
    partial_offload: int
    graphsize_full_offload: int
    graphsize_partial_offload: int

    @property
    def uses_fallback(self) -> bool:
        """True when the partial graph came from `llm/server.go`'s fallback, not GraphSize."""
        return self.graphsize_partial_offload == 0


def _check_count(name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ArgumentError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value >= 1 << 63:
        raise ArgumentError(f"{name} {value} does not fit in Go's int")
    return int(value)


def _check_args(context: Any, batch: Any, parallel: Any) -> None:
    _check_count("context", context)
    _check_count("batch", batch)
    _check_count("parallel", parallel)


def _bytes_per_element(kv_cache_type: str) -> float:
    try:
        return KV_CACHE_TYPES[kv_cache_type]
    except (KeyError, TypeError):
        known = ", ".join(repr(k) for k in KV_CACHE_TYPES if k)
        raise ArgumentError(f"unknown KV cache type {kv_cache_type!r}; Ollama's are {known}") from None


def _shape_dim(layer_name: str, key: str, info: Any, i: int) -> int:
    shape = tuple(int(d) for d in reversed(info.shape))
    if len(shape) <= i:
        raise FormatError(None, None, f"{layer_name}.{key} has {len(shape)} dimensions; Ollama reads Shape[{i}]")
    return shape[i]


def _default_kv(kv: OllamaKV, context: U64, bpe: float) -> list[U64]:
    """GraphSize's default loop: attention layers at the full context, recurrent ones from `ssm.*`."""
    n_layers = int(kv.block_count())
    heads = kv.per_layer("attention.head_count", n_layers)
    heads_kv = kv.per_layer("attention.head_count_kv", n_layers)
    dk = kv.embedding_head_count_k()
    dv = kv.embedding_head_count_v()
    recurrent: U64 | None = None
    sizes: list[U64] = []
    for i in range(n_layers):
        if heads[i] > 0 and heads_kv[i] > 0:
            sizes.append(f64_to_u64(u64_to_f64(context * (dk + dv) * heads_kv[i]) * bpe))
            continue
        if recurrent is None:  # Ollama reads the ssm keys for each recurrent layer; they are the same
            d_conv = kv.uint("ssm.conv_kernel")
            d_state = kv.uint("ssm.state_size")
            d_inner = kv.uint("ssm.inner_size")
            n_groups = kv.uint("ssm.group_count")
            n_embd_r = U64(0)
            if d_conv > 0:
                n_embd_r = (d_conv - 1) * (d_inner + 2 * n_groups * d_state)
            n_embd_s = d_state * d_inner
            recurrent = (n_embd_r + n_embd_s) * 4  # f32, whatever the cache type
        sizes.append(recurrent)
    return sizes


class _Inputs:
    """What GraphSize reads before its architecture switch (the vocabulary only when it is needed)."""

    def __init__(self, model: Any, context: int, batch: int, parallel: int, kv_cache_type: str) -> None:
        self.kv = kv = OllamaKV(model.metadata, getattr(model, "path", None))
        self.bpe = _bytes_per_element(kv_cache_type)
        self.arch = kv.architecture
        self.n_par = U64(parallel)
        self.batch = U64(batch)
        self.context = U64(context) * self.n_par  # GraphSize's context covers every parallel sequence
        self.embedding = kv.embedding_length()
        self.heads = kv.head_count_max()
        self.heads_kv = kv.head_count_kv_max()
        self.embedding_heads = kv.embedding_head_count_max()
        self.dk = kv.embedding_head_count_k()
        self.dv = kv.embedding_head_count_v()
        self.layers = group_layers(model.tensors)


def _kv(x: _Inputs) -> tuple[list[U64], U64]:
    """The KV cache of each layer, and the default loop's total (which gpt-oss's graph uses)."""
    sizes = _default_kv(x.kv, x.context, x.bpe)
    default_total = U64(0)
    for s in sizes:
        default_total = default_total + s
    dk, dv, heads_kv = x.dk, x.dv, x.heads_kv
    if x.arch == "mllama":  # cross-attention layers hold the image's keys and values, in f32
        cross = set(x.kv.ints("attention.cross_attention_layers") or ())
        vision = heads_kv * (dk + dv) * 4 * 1601 * 4  # sizeof(float32) * vision tokens * tiles
        for i in range(len(sizes)):
            if i in cross:
                sizes[i] = vision
    elif x.arch == "gemma3":  # every sixth layer is global (full context); the others slide
        window = x.n_par * x.kv.uint("attention.sliding_window") + x.batch
        sliding = f64_to_u64(u64_to_f64(window * (dk + dv) * heads_kv) * x.bpe)
        for i in range(len(sizes)):
            if (i + 1) % 6 != 0:
                sizes[i] = sliding
    elif x.arch in ("gptoss", "gpt-oss"):  # even layers slide over 4096 tokens, odd ones see it all
        per_token = f64_to_u64(u64_to_f64((dk + dv) * heads_kv) * x.bpe)
        window = x.n_par * 4096 + x.batch
        sizes = [per_token * (window if i % 2 == 0 else x.context) for i in range(len(sizes))]
    return sizes, default_total


def _graph(x: _Inputs, default_total: U64, flash_attention: bool) -> tuple[U64, U64]:
    """GraphSize's architecture switch: (partial offload, full offload); 0 where it has no case."""
    arch, kv = x.arch, x.kv
    e, b, c = x.embedding, x.batch, x.context
    heads, heads_kv, embedding_heads, dk = x.heads, x.heads_kv, x.embedding_heads, x.dk
    blk0 = x.layers.get("blk.0", {})
    v = kv.vocab_size()  # Ollama reads it before the switch, for every architecture
    full = partial = U64(0)

    if arch in ("llama", "llama4"):
        full = max(4 * b * (1 + 4 * e + c * (1 + heads)), 4 * b * (e + v))
        partial = 4 * b * e
        partial = partial + max(
            4 * b * (1 + e + max(c, e)) + e * e * 9 // 16 + 4 * c * (b * heads + embedding_heads * heads_kv),
            4 * b * (e + v) + e * v * 105 // 128,
        )
        if "ffn_gate_exps.weight" in blk0:  # Mixtral 8x22B style: the experts stacked in one tensor
            ff = kv.uint("feed_forward_length")
            gate = tensor_size(blk0["ffn_gate_exps.weight"])
            partial = max(
                3 * gate + 4 * b * (2 * ff + heads_kv + e + c + embedding_heads * heads_kv),
                4 * (c * b * heads + c * embedding_heads * heads_kv + b * 1024 + embedding_heads * heads_kv * b),
            )
        elif "ffn_gate.0.weight" in blk0:  # Mixtral 8x7B style: one tensor per expert
            w1 = U64(_shape_dim("blk.0", "ffn_gate.0.weight", blk0["ffn_gate.0.weight"], 1))
            full = 4 * b * (2 + 3 * e + c * (1 + heads) + 2 * heads_kv + w1)
            partial = max(
                4 * b * (3 + embedding_heads * heads_kv + e + c * (1 + heads) + w1)
                + (e * e + 3 * e * heads_kv * w1) * 9 // 16,
                4 * b * (1 + 2 * e + c * (1 + heads)) + e * (6 * c * heads_kv // heads + e * 9 // 16),
            )
    elif arch == "mllama":
        full = max(4 * b * (2 + 3 * e + dk * heads + c * (1 + heads)), 4 * b * (e + v))
        rope_freqs = U64(0)
        if "weights" in x.layers.get("rope_freqs", {}):
            rope_freqs = tensor_elements(x.layers["rope_freqs"]["weights"])
        partial = max(
            4 * (b * (2 * e + 1 + c * (1 + heads) + dk * heads) + rope_freqs + dk * c * heads_kv),
            4 * b * (e + v) + e * v * 105 // 128,
        )
    elif arch in ("gemma", "gemma2", "gemma3", "gemma3n"):
        full = max(4 * b * (e + v), 4 * b * (2 + c + c * heads + 2 * e + 2 * dk * heads))
        partial = max(
            4 * e * b + e * v * 105 // 128 + 4 * v * b,
            4 * b * (2 * e + 1 + 2 * dk * heads + c + c * heads) + 4 * dk * c * 8 + e * dk * heads * 9 // 16,
        )
        if arch == "gemma3n":
            full = full * 4
            partial = partial * 4
    elif arch == "command-r":
        full = max(4 * b * (e + v), 4 * b * (2 + 4 * e + c * (1 + heads)))
        partial = max(
            4 * b * (e + v) + e * v * 105 // 128,
            4 * b * (1 + 2 * e + c * (1 + heads)) + 4 * e * c + e * e * 9 // 16,
        )
    elif arch == "qwen2":
        full = max(4 * b * (e + v), 4 * b * (1 + 2 * e + c + c * heads))
        partial = max(
            4 * b * (e + v) + e * v * 105 // 128,
            4 * (b * (1 + 2 * e + c * (1 + heads)) + e * (1 + c)),
        )
    elif arch == "phi2":
        full = max(4 * b * (e + v), 4 * b * (1 + 4 * e + c + c * heads))
        partial = max(4 * b * (2 * e + v) + e * v * 105 // 128, 4 * b * (2 + 3 * e + c + c * heads))
    elif arch == "stablelm":
        full = 4 * b * (c * (1 + heads) + 3 * e + 2)
        partial = max(4 * b * (v + 2 * e), full)
    elif arch == "deepseek2":
        full = max(4 * b * (3 * e + v), 4 * b * (3 * e + 2 + c * (1 + heads_kv) + 2 * dk * heads_kv))
        partial = max(
            4 * b * (3 * e + v) + e * v * 105 // 128,
            4 * b * (2 * e + 1 + 2 * dk * heads_kv + c + c * heads_kv)
            + 4 * dk * c * heads_kv
            + e * dk * heads_kv * 9 // 16,
        )
    elif arch == "chatglm":
        full = 4 * b * (e + v)
        partial = 4 * b * (e + v) + e * v * 105 // 128
        if "attn_qkv.bias" in blk0:
            qkv = U64(_shape_dim("blk.0", "attn_qkv.bias", blk0["attn_qkv.bias"], 0))
            full = max(full, 4 * b * (2 + 2 * e + c + c * heads + dk * heads + qkv))
            partial = max(
                partial,
                4 * b * (1 + 2 * e + dk * heads + c + c * heads) + 4 * dk * c + 4 * c * dk + 4 * qkv,
            )
    elif arch in ("gptoss", "gpt-oss"):
        kv_min = kv.head_count_kv_min()
        # left to right, with the default loop's total (every layer at the full context)
        partial = 2 * kv.head_count_max() // (kv_min if kv_min != 0 else 1) * default_total // 6
        if flash_attention:
            partial = (4 * x.n_par + (c >> 10) + 110) * MiB

    return partial, full


def _with_path(model: Any, err: FormatError) -> FormatError:
    if err.path is None:
        return FormatError(getattr(model, "path", None), None, err.reason)
    return err


def kv_cache_sizes(model: Any, context: int, parallel: int = 1, kv_cache_type: str = "f16", *,
                   batch: int = 512) -> list[int]:  # fmt: skip
    """Bytes of KV cache of each layer, as Ollama's GraphSize estimates them.

    `context` is the context of one sequence (Ollama's `num_ctx`); the cache holds `context * parallel`
    tokens. `batch` matters only to the sliding-window layers of gemma3 and gpt-oss. The vocabulary is
    not needed here.
    """
    _check_args(context, batch, parallel)
    try:
        sizes, _ = _kv(_Inputs(model, context, batch, parallel, kv_cache_type))
    except FormatError as e:
        raise _with_path(model, e) from None
    return [int(s) for s in sizes]


def graph_size(model: Any, context: int, batch: int = 512, parallel: int = 1, kv_cache_type: str = "f16",
               flash_attention: bool = False) -> GraphEstimate:  # fmt: skip
    """Ollama's estimate of the KV cache and the compute graph (see the module docstring).

    `model` is an opened GGUF model (`weightkit.open`), or anything with GGUF-typed `.metadata` and
    `.tensors`. `context` is per sequence (Ollama's `num_ctx`), `parallel` the number of sequences.
    Missing or malformed metadata raises `weightkit.errors.FormatError`; arguments out of range raise
    `ArgumentError`.
    """
    _check_args(context, batch, parallel)
    if not isinstance(flash_attention, bool):
        raise ArgumentTypeError(f"flash_attention must be a bool, got {flash_attention!r}")
    try:
        x = _Inputs(model, context, batch, parallel, kv_cache_type)
        sizes, default_total = _kv(x)
        partial, full = graph_partial, graph_full = _graph(x, default_total, flash_attention)
        kv_total = U64(0)
        for s in sizes:
            kv_total = kv_total + s
        if partial == 0:  # llm/server.go, for the architectures GraphSize has no case for
            kv_min = x.kv.head_count_kv_min()
            gqa = x.kv.head_count_max() // (kv_min if kv_min != 0 else 1)
            partial = gqa * kv_total // 6
        if full == 0:
            full = partial
    except FormatError as e:
        raise _with_path(model, e) from None
    return GraphEstimate(
        kv=tuple(int(s) for s in sizes),
        kv_total=int(kv_total),
        full_offload=int(full),
        partial_offload=int(partial),
        graphsize_full_offload=int(graph_full),
        graphsize_partial_offload=int(graph_partial),
    )
