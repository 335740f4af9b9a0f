"""The compute buffer llama.cpp reserves (`llama_context::sched_reserve`): the graph for a prompt batch of
`n_ubatch` tokens (with `min(n_ubatch, n_outputs_max)` outputs), then the token-generation graph (one token per
sequence), each allocated by ggml's graph allocator; the buffer keeps the larger size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...errors import UnsupportedError
from ...model import TensorInfo
from .alloc import buffer_size
from .cache import Memory
from .context import Context
from .graph import GraphBuilder
from .graphs import GRAPHS
from .hparams import HParams


@dataclass(frozen=True)
class ComputeBuffer:
    """The two reserved graphs' sizes; llama.cpp's buffer is the larger (a `no_alloc` measure, as `fit` does,
    sees only the prompt graph's)."""

    prompt: int
    generation: int

    @property
    def bytes(self) -> int:
        return max(self.prompt, self.generation)


def graph_bytes(hp: HParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo],
                n_tokens: int, n_seqs: int, n_outputs: int) -> int:  # fmt: skip
    """Bytes ggml's allocator reserves for one graph (`llama_context::graph_reserve`)."""
    build = GRAPHS.get(hp.arch)
    if build is None:
        raise UnsupportedError(f"no compute graph for the architecture {hp.arch!r} yet")
    if n_tokens % n_seqs:
        n_tokens = -(-n_tokens // n_seqs) * n_seqs
    graph = build(GraphBuilder(hp, ctx, memory, tensors, n_tokens, n_seqs, n_outputs))
    return buffer_size(graph)


def compute_buffer(hp: HParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo]) -> ComputeBuffer:
    """`sched_reserve`'s prompt and token-generation reserves."""
    n_seqs = ctx.n_seq_max
    n_tokens = min(ctx.n_ctx, ctx.n_ubatch)
    prompt = graph_bytes(hp, ctx, memory, tensors, n_tokens, n_seqs, min(n_tokens, ctx.n_outputs_max))
    generation = graph_bytes(hp, ctx, memory, tensors, n_seqs, n_seqs, n_seqs)
    return ComputeBuffer(prompt, generation)
