"""The compute buffer llama.cpp reserves (`llama_context::sched_reserve`): the graph for a prompt batch of
`n_ubatch` tokens (with `min(n_ubatch, n_outputs_max)` outputs), then the token-generation graph (one token per
sequence), each allocated by ggml's graph allocator; the buffer keeps the larger size.

A model's layers repeat (every one alike, or a pattern such as five sliding-window layers and a global one), and
so does the allocator's state from one repetition to the next. A graph of the first repetitions and the last
layer then needs the same buffer as the whole: once the state at the end of one repetition equals the state at
the end of the one before, every later repetition replays it exactly. The shortened graph is checked for that;
where the state has not settled, the whole graph is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...errors import UnsupportedError
from ...model import TensorInfo
from .alloc import buffer_sizes
from .cache import Memory
from .context import Context
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
                n_seqs: int, n_outputs: int, placement: Placement | None = None,
                layers: Sequence[int] | None = None) -> GraphBuilder:  # fmt: skip
    """The graph `llama_context::graph_reserve` builds for a batch (of `layers` only, when given)."""
    build = GRAPHS.get(hp.arch)
    if build is None:
        raise UnsupportedError(f"no compute graph for the architecture {hp.arch!r} yet")
    if n_tokens % n_seqs:
        n_tokens = -(-n_tokens // n_seqs) * n_seqs
    builder = GraphBuilder(hp, ctx, memory, tensors, n_tokens, n_seqs, n_outputs, placement, layers)
    build(builder)
    return builder


REPEATS = 3  # repetitions of the layer pattern kept in a shortened graph
MAX_PERIOD = 16


def repetition(hp: HParams, tensors: Mapping[str, TensorInfo]) -> tuple[list[int], int, int] | None:
    """The layers of a shortened graph, and the two layer positions (in that list) whose allocator states must
    agree for it to stand for the whole; None when the layers do not repeat enough to save anything."""
    kinds = _layer_kinds(hp, tensors)
    last = hp.n_layer - 1
    best = None
    for period in range(1, MAX_PERIOD + 1):
        start = 0
        for i in range(last - period - 1, -1, -1):  # the longest periodic run reaching the last-but-one layer
            if kinds[i] != kinds[i + period]:
                start = i + 1
                break
        kept = start + REPEATS * period
        if kept < last and (best is None or kept < best[0]):
            best = (kept, start, period)
    if best is None:
        return None
    kept, start, period = best
    return [*range(kept), last], start + (REPEATS - 1) * period, kept


def _layer_kinds(hp: HParams, tensors: Mapping[str, TensorInfo]) -> list[tuple]:
    """What the graph of each layer depends on: its hyperparameters and its tensors' names, shapes and types."""
    own: dict[int, list] = {il: [] for il in range(hp.n_layer)}
    for name, info in tensors.items():
        if name.startswith("blk."):
            index, _, rest = name[4:].partition(".")
            if index.isdigit() and int(index) in own:
                own[int(index)].append((rest, info.shape, int(info.dtype)))
    return [
        (
            hp.is_swa[il],
            hp.is_recurrent[il],
            hp.n_head[il],
            hp.n_head_kv[il],
            hp.n_ff[il],
            hp.has_kv(il),
            tuple(sorted(own[il])),
        )
        for il in range(hp.n_layer)
    ]


def _allocate(hp: HParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo], batch: tuple[int, int, int],
              buffers: list, placement: Placement | None, pipeline: bool, shorten: bool) -> list[int]:  # fmt: skip
    """Each buffer's size for one batch's graph: a shortened graph where it provably suffices, else the whole."""
    plan = repetition(hp, tensors) if shorten else None
    if plan is not None:
        layers, a, b = plan
        builder = build_graph(hp, ctx, memory, tensors, *batch, placement, layers)
        states: dict[int, list] = {builder.layer_starts[a]: [], builder.layer_starts[b]: []}
        sizes = _sizes(builder, buffers, placement, pipeline, states)
        first, second = states.values()
        if first and first == second:
            return sizes
    return _sizes(build_graph(hp, ctx, memory, tensors, *batch, placement), buffers, placement, pipeline, None)


def _sizes(builder: GraphBuilder, buffers: list, placement: Placement | None, pipeline: bool, states) -> list[int]:
    graph = builder.graph
    if placement is None:
        return buffer_sizes(graph.leafs, graph.nodes, [(32, None)], lambda t: 0, states)
    return backend_buffers(graph, buffers, pipeline=pipeline, snapshot_at=states)


def _batches(ctx: Context) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(tokens, sequences, outputs) of `sched_reserve`'s prompt graph and token-generation graph."""
    n_seqs = ctx.n_seq_max
    n_tokens = min(ctx.n_ctx, ctx.n_ubatch)
    return (n_tokens, n_seqs, min(n_tokens, ctx.n_outputs_max)), (n_seqs, n_seqs, n_seqs)


def compute_buffer(hp: HParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo], *,
                   shorten: bool = True) -> ComputeBuffer:  # fmt: skip
    """`sched_reserve`'s prompt and token-generation reserves, everything on the CPU (`shorten`: through the
    shortened graph where it suffices)."""
    prompt, generation = (_allocate(hp, ctx, memory, tensors, batch, [], None, False, shorten)[0]
                          for batch in _batches(ctx))  # fmt: skip
    return ComputeBuffer(prompt, generation)


def compute_buffers(hp: HParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo],
                    placement: Placement, pipeline: bool, *, shorten: bool = True) -> list[int]:  # fmt: skip
    """Each backend's compute buffer (the GPUs', then the CPU's) with the model spread over GPUs: the larger of
    the prompt and token-generation reserves, per backend."""
    buffers = [buffer_of(gpu) for gpu in placement.gpus]
    sizes = [_allocate(hp, ctx, memory, tensors, batch, buffers, placement, pipeline, shorten)
             for batch in _batches(ctx)]  # fmt: skip
    return [max(pair) for pair in zip(*sizes, strict=True)]
