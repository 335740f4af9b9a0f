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
from .ggml import Graph
from .graph import GraphBuilder
from .graphs import GRAPHS
from .hparams import HParams
from .placement import Placement, buffer_of
from .sched import backend_buffers


@dataclass(frozen=True)
class ComputeBuffer:
    """The two reserved graphs' sizes; llama.cpp's buffer is the larger (a `no_alloc` measure, as `fit` does,
    sees only the prompt graph's)."""

    prompt: int
    generation: int

    @property
    def bytes(self) -> int:
        return max(self.prompt, self.generation)


def build_graph(hp: HParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo], n_tokens: int,
                n_seqs: int, n_outputs: int, placement: Placement | None = None) -> Graph:  # fmt: skip
    """The graph `llama_context::graph_reserve` builds for a batch."""
    build = GRAPHS.get(hp.arch)
    if build is None:
        raise UnsupportedError(f"no compute graph for the architecture {hp.arch!r} yet")
    if n_tokens % n_seqs:
        n_tokens = -(-n_tokens // n_seqs) * n_seqs
    return build(GraphBuilder(hp, ctx, memory, tensors, n_tokens, n_seqs, n_outputs, placement))


def _batches(ctx: Context) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(tokens, sequences, outputs) of `sched_reserve`'s prompt graph and token-generation graph."""
    n_seqs = ctx.n_seq_max
    n_tokens = min(ctx.n_ctx, ctx.n_ubatch)
    return (n_tokens, n_seqs, min(n_tokens, ctx.n_outputs_max)), (n_seqs, n_seqs, n_seqs)


def compute_buffer(hp: HParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo]) -> ComputeBuffer:
    """`sched_reserve`'s prompt and token-generation reserves, everything on the CPU."""
    prompt, generation = (buffer_size(build_graph(hp, ctx, memory, tensors, *batch)) for batch in _batches(ctx))
    return ComputeBuffer(prompt, generation)


def compute_buffers(hp: HParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo],
                    placement: Placement, pipeline: bool) -> list[int]:  # fmt: skip
    """Each backend's compute buffer (the GPUs', then the CPU's) with the model spread over GPUs: the larger of
    the prompt and token-generation reserves, per backend."""
    buffers = [buffer_of(gpu) for gpu in placement.gpus]
    sizes = [
        backend_buffers(build_graph(hp, ctx, memory, tensors, *batch, placement), buffers, pipeline=pipeline)
        for batch in _batches(ctx)
    ]
    return [max(pair) for pair in zip(*sizes, strict=True)]
