"""A llama.cpp context's parameters, and what llama.cpp makes of them (`llama_init_from_model`'s checks and the
`llama_context` constructor in `src/llama-context.cpp`): the padded context, per-sequence streams, batch sizes,
and whether flash attention is on. A setting llama.cpp refuses is refused here with llama.cpp's reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ...dtypes import GGMLType, ggml_type
from ...errors import ArgumentError
from ...model import TensorInfo
from .hparams import LlamaCppHParams

FLASH_ATTN = ("auto", "on", "off")
#: the KV cache types llama-server accepts (`common/arg.cpp`)
CACHE_TYPES = {t.name.lower(): t for t in (GGMLType.F32, GGMLType.F16, GGMLType.BF16, GGMLType.Q8_0, GGMLType.Q4_0,
                                           GGMLType.Q4_1, GGMLType.IQ4_NL, GGMLType.Q5_0, GGMLType.Q5_1)}  # fmt: skip
MAX_SEQUENCES = 256  # LLAMA_MAX_SEQ
#: llama_pooling_type
POOLING_UNSPECIFIED, POOLING_NONE, POOLING_MEAN, POOLING_CLS, POOLING_LAST, POOLING_RANK = -1, 0, 1, 2, 3, 4


def pad(x: int, n: int) -> int:
    """`GGML_PAD`."""
    return (x + n - 1) // n * n


@dataclass(frozen=True)
class ContextParams:
    """`llama_context_params`, as far as memory goes; the defaults are `llama_context_default_params`.

    `n_ctx` 0 means the model's trained context; `n_outputs_max` 0 means `n_batch`.
    """

    n_ctx: int = 512
    n_batch: int = 2048
    n_ubatch: int = 512
    n_seq_max: int = 1
    flash_attn: str = "auto"
    type_k: str = "f16"
    type_v: str = "f16"
    swa_full: bool = True
    kv_unified: bool = False
    embeddings: bool = False
    offload_kqv: bool = True
    n_outputs_max: int = 0
    pooling_type: int = POOLING_UNSPECIFIED

    def __post_init__(self) -> None:
        for name in ("n_ctx", "n_batch", "n_ubatch", "n_outputs_max"):
            _count(name, getattr(self, name), 0)
        _count("n_seq_max", self.n_seq_max, 0)
        if self.flash_attn not in FLASH_ATTN:
            raise ArgumentError(f"flash_attn {self.flash_attn!r}: one of {', '.join(FLASH_ATTN)}")
        for name in ("type_k", "type_v"):
            if getattr(self, name) not in CACHE_TYPES:
                raise ArgumentError(f"{name} {getattr(self, name)!r}: one of {', '.join(CACHE_TYPES)}")


def _count(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ArgumentError(f"{name} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class Context:
    """The `cparams` a context ends up with."""

    n_ctx: int  # padded to 256, and to whole streams
    n_ctx_seq: int  # cells per stream
    n_batch: int
    n_ubatch: int
    n_seq_max: int
    n_stream: int
    n_outputs_max: int
    flash_attn: bool  # as the KV cache is built: "auto" counts as on
    auto_fa: bool
    causal: bool
    type_k: GGMLType
    type_v: GGMLType
    swa_full: bool
    kv_unified: bool
    embeddings: bool
    offload_kqv: bool
    pooling: int
    #: the LoRA adapters applied (`llama_context::loras`, each at a nonzero scale, in the order the graph goes
    #: through them): each adapter's tensors by name (`<weight>.lora_a`, `<weight>.lora_b`), which the graph
    #: multiplies beside the weights they adapt
    loras: tuple[Mapping[str, TensorInfo], ...] = field(default=(), compare=False)


class ContextRefused(ArgumentError):
    """llama.cpp refuses to make the context (`llama_init_from_model` returns NULL); the reason is its own."""


def make_context(hp: LlamaCppHParams, p: ContextParams) -> Context:
    """What llama_init_from_model and the llama_context constructor do with `p` for this model."""
    if p.n_batch == 0 and p.n_ubatch == 0:
        raise ContextRefused("n_batch and n_ubatch cannot both be zero")
    if p.n_ctx == 0 and hp.n_ctx_train == 0:
        raise ContextRefused("n_ctx and model->hparams.n_ctx_train cannot both be zero")
    type_k, type_v = CACHE_TYPES[p.type_k], CACHE_TYPES[p.type_v]
    flash_attn = p.flash_attn
    if hp.is_mla and type_k != type_v:
        raise ContextRefused(f"model does not support different K ({p.type_k}) and V ({p.type_v}) cache types")
    if ggml_type(type_v).quantized and flash_attn != "on":
        if flash_attn == "off":
            raise ContextRefused("quantized V cache requires flash_attn to be enabled")
        flash_attn = "on"  # llama.cpp: "enabling flash_attn since it is required for quantized V cache"
    if flash_attn != "off":
        for name, kind, heads in (("K", type_k, hp.head_k), ("V", type_v, hp.head_v)):
            block = ggml_type(kind).block_size
            for il in range(hp.n_layer):
                if heads(il) % block:
                    raise ContextRefused(
                        f"{name} cache type {kind.name.lower()} with block size {block} does not divide "
                        f"n_embd_head_{name.lower()}={heads(il)}"
                    )
    n_seq_max = max(1, p.n_seq_max)
    if n_seq_max > MAX_SEQUENCES:
        raise ContextRefused(f"n_seq_max must be <= {MAX_SEQUENCES}")
    n_ctx = p.n_ctx or hp.n_ctx_train
    causal = hp.causal
    n_batch = min(n_ctx, p.n_batch) if causal else p.n_batch  # the context before its padding
    n_ubatch = min(n_batch, p.n_ubatch or p.n_batch)
    n_outputs_max = n_batch if p.n_outputs_max == 0 else p.n_outputs_max
    n_ctx = pad(n_ctx, 256)
    if p.kv_unified:
        n_ctx_seq = n_ctx
    else:
        n_ctx_seq = pad(n_ctx // n_seq_max, 256)
        if n_ctx_seq == 0:
            raise ContextRefused("n_ctx_seq == 0")
        n_ctx = n_ctx_seq * n_seq_max
    return Context(
        n_ctx=n_ctx,
        n_ctx_seq=n_ctx_seq,
        n_batch=n_batch,
        n_ubatch=n_ubatch,
        n_seq_max=n_seq_max,
        n_stream=1 if p.kv_unified else n_seq_max,
        n_outputs_max=n_outputs_max,
        flash_attn=flash_attn != "off",
        auto_fa=flash_attn == "auto",
        causal=causal,
        type_k=type_k,
        type_v=type_v,
        swa_full=p.swa_full,
        kv_unified=p.kv_unified,
        embeddings=p.embeddings,
        offload_kqv=p.offload_kqv,
        pooling=p.pooling_type if p.pooling_type != POOLING_UNSPECIFIED else max(hp.pooling, POOLING_NONE),
    )
