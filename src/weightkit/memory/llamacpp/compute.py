"""The compute buffer llama.cpp reserves (`llama_context::sched_reserve`): the graph for a prompt batch of
`n_ubatch` tokens (with `min(n_ubatch, n_outputs_max)` outputs), then the token-generation graph (one token per
sequence), each allocated by ggml's graph allocator; the buffer keeps the larger size.

A model's layers repeat (every one alike, or a pattern such as five sliding-window layers and a global one), and
so does the allocator's state from one repetition to the next. A graph of three repetitions, the layers that
end the pattern's last (partial) repetition and the last layer then needs the same buffer as the whole: if the
state at the start of the third repetition equals the state at the start of the second, every middle repetition
of the whole graph replays the second exactly, and its final one (where inputs are freed after their last use)
starts from the state the third starts from. The shortened graph is checked for that; where the state has not
settled, the whole graph is built.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import chain
from operator import attrgetter

from ...errors import UnsupportedError
from ...model import TensorInfo
from .alloc import (
    FREE,
    INPLACE_OPS,
    PLACE,
    TAKE,
    Move,
    allocator_moves,
    buffer_sizes,
    fit_side_by_side,
    make_moves,
    placed_bytes,
)
from .architectures import architecture
from .cache import Memory
from .context import Context
from .ggml import INPUT, Graph, PairDiverged, Tensor, any_input, pair, unpair
from .graph_builder import GraphBuilder, Weights
from .hparams import LlamaCppHParams
from .placement import Placement, buffer_of
from .sched import assigned_devices, backend_buffers


@dataclass(frozen=True)
class ComputeBuffer:
    """The prompt graph's size (all a `no_alloc` measure, as `fit` does, sees) and the buffer's: the larger of
    the prompt and token-generation graphs' (the latter's unknown where it cannot exceed the former's)."""

    prompt: int
    bytes: int


def build_graph(hp: LlamaCppHParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo], n_tokens: int,
                n_seqs: int, n_outputs: int, placement: Placement | None = None,
                layers: Sequence[int] | None = None, *, pin_norms: bool = True,
                weights: Weights | None = None) -> GraphBuilder:  # fmt: skip
    """The graph `llama_context::graph_reserve` builds for a batch (of `layers` only, when given; `pin_norms`:
    with the layers' norms pinned to their devices where llama.cpp pins them; `weights`: the weights' tensors
    made so far, shared by the graphs of one placement)."""
    build = architecture(hp.arch).graph
    if n_tokens % n_seqs:
        n_tokens = -(-n_tokens // n_seqs) * n_seqs
    builder = GraphBuilder(hp, ctx, memory, tensors, n_tokens, n_seqs, n_outputs, placement, layers, pin_norms, weights)
    try:
        build(builder)
    except (AttributeError, TypeError) as e:  # an operation was handed a tensor the model lacks (None)
        if not builder.absent:
            raise
        raise UnsupportedError(
            f"the model has no tensor {builder.absent[-1]!r}, which llama.cpp's {hp.arch} graph needs "
            "(llama.cpp refuses to load it: missing tensor)"
        ) from e
    return builder


MAX_PERIOD = 16
CYCLES = (1, 2, 3, 4)  # the allocator's state recurs every repetition, or cycles through a few


@dataclass(frozen=True)
class Repetition:
    """Layers `start`, `start + period`, ... begin `reps` alike repetitions; `tail` layers of the pattern's next
    repetition follow them, and then the last layer."""

    start: int
    period: int
    reps: int
    tail: int
    last: int

    TOTALED = 2  # the repetitions of a graph whose tensors are added up: the second stands for every middle one
    REPLAYED = 4  # the repetitions of a graph whose allocator moves are repeated: the third stands for the middle
    REPLAYED_FIRST = 3  # and where the replay comes first (the sparse-attention models'): the tail follows the third

    def layers(self, reps: int) -> list[int]:
        """The layers of a graph of `reps` repetitions, the tail and the last layer."""
        return [*range(self.start + reps * self.period + self.tail), self.last]

    def rep_starts(self, reps: int) -> list[int]:
        """Where each of those repetitions begins, as positions in `layers(reps)`."""
        return [self.start + j * self.period for j in range(reps)]

    def state_starts(self, reps: int) -> list[int]:
        """Where a graph of `reps` repetitions compares the allocator's states: where each repetition begins, and
        where the tail does (the state there comes of the repetitions before it, as at the start of the whole
        graph's next repetition; the last layer, which may differ from the pattern, starts none)."""
        return self.rep_starts(reps + 1 if self.tail else reps)

    def trials(self, after: int = 0) -> list[int]:
        """The repetitions shortened graphs try, more than `after`: four (most models settle within four), eight,
        sixteen, while they save something; where four would not, two or three (with a tail, whose start can
        close a cycle: Granite 4.0-H's three repetitions of ten layers, a 24-layer Qwen3-Next's five of four)."""
        if self.saves(4) or not self.tail:
            return [reps for reps in (4, 8, 16) if reps > after and self.saves(reps)]
        return [reps for reps in (2, 3) if reps > after and self.saves(reps)]

    def saves(self, reps: int, quarters: int = 1) -> bool:
        """Whether a graph of `reps` repetitions leaves `quarters` quarters of the layers out at least (less would
        not pay for the risk of building the whole graph as well)."""
        return reps < self.reps and len(self.layers(reps)) * 4 <= (self.last + 1) * (4 - quarters)

    def shown(self, cycle: tuple[int, int]) -> int:
        """The fewest repetitions in which a cycle of the allocator's states (where it begins, its length) seen in
        a graph of the same layers shows, and that need no second graph."""
        first, period = cycle
        reps = first + period + (0 if self.tail else 1)
        return reps + (self.reps - reps) % period

    def in_phase(self, cycle: tuple[int, int]) -> int:
        """The fewest repetitions of a graph that ends as the whole does once the allocator's states cycle: its last
        state compared (at its tail's start, else at its last repetition's) falls in the cycle, in the whole's
        phase."""
        first, period = cycle
        reps = max(first + (0 if self.tail else 1), 1)
        return reps + (self.reps - reps) % period


def repetition(hp: LlamaCppHParams, kinds: Sequence[int], reps: int | None = None) -> Repetition | None:
    """How the layers repeat (their `layer_kinds`), if they repeat enough for a shortened graph to save a quarter
    of the layers: one the allocator runs over (`reps` None: `Repetition.trials`), or one of `reps` repetitions
    (whose tensors are added up, or whose allocator moves are repeated) and the whole graph more."""
    if reps is None and hp.is_dsa:  # each layer's sparse-attention mask starts from a leaf of its own, placed before
        return None  # any node: the allocator's state never repeats
    last = hp.n_layer - 1
    best, best_size = None, (True, hp.n_layer + 1)  # a plan of four repetitions or more first, then the fewest layers
    for period in range(1, MAX_PERIOD + 1):
        start = 0
        for i in range(last - period - 1, -1, -1):  # the longest periodic run reaching the last-but-one layer
            if kinds[i] != kinds[i + period]:
                start = i + 1
                break
        plan = Repetition(start, period, *divmod(last - start, period), last)
        if reps is None:
            trials = plan.trials()
            size = (trials[0] < 4, len(plan.layers(trials[0]))) if trials else best_size
        else:  # a quarter of the layers left out, as `Repetition.saves` asks
            size = (False, len(plan.layers(reps)))
            size = size if plan.reps > reps and size[1] * 4 <= hp.n_layer * 3 else best_size
        if size < best_size:
            best, best_size = plan, size
    return best


def layer_kinds(hp: LlamaCppHParams, tensors: Mapping[str, TensorInfo], placement: Placement | None,
                loras: Sequence[Mapping[str, TensorInfo]] = ()) -> list[int]:  # fmt: skip
    """What the graph of each layer depends on (its hyperparameters, its tensors' names, shapes and types, those
    of the LoRA adapters applied to it, and its device), as a number per layer: equal for layers alike (numbers,
    which `repetition` compares many times over, where the tuples would be compared tensor by tensor)."""
    own: dict[str, list] = {str(il): [] for il in range(hp.n_layer)}  # by the number as the names spell it
    layer_of = own.get
    for k, group in enumerate((tensors, *loras)):
        for name, info in group.items():  # (a layer's tensor: blk.<number>.<rest>; the graphs read no other)
            parts = name.split(".", 2)
            if parts[0] == "blk" and len(parts) == 3 and (layer := layer_of(parts[1])) is not None:
                layer.append((k, parts[2], info.shape, info.dtype))
    numbers: dict[tuple, int] = {}
    return [
        numbers.setdefault(
            (
                hp.is_swa[il],
                hp.is_recurrent[il],
                hp.n_head[il],
                hp.n_head_kv[il],
                hp.n_ff[il],
                hp.has_kv(il),
                hp.rescaled(il),
                None if placement is None else placement.device_of(il),
                frozenset(own[str(il)]),  # (a layer names each tensor once: a set, not sorted)
            ),
            len(numbers),
        )
        for il in range(hp.n_layer)
    ]


@dataclass(frozen=True)
class _Reserve:
    """What stays the same across the graphs of one reservation: the model, the context and its memory, where
    the layers are, the buffers of the devices, pipeline parallelism and whether norms are pinned."""

    hp: LlamaCppHParams
    ctx: Context
    memory: Memory
    tensors: Mapping[str, TensorInfo]
    placement: Placement | None = None
    pipeline: bool = False
    pin_norms: bool = True
    shorten: bool = True  # through a shortened graph where it suffices
    weights: Weights = field(default_factory=dict)  # the weights' tensors, made once for every graph
    whole: list[GraphBuilder] = field(default_factory=list)  # the whole graphs built so far
    replays: list[_Replay] = field(default_factory=list)  # the shortened graphs' moves assembled so far

    @cached_property
    def kinds(self) -> list[int]:
        return layer_kinds(self.hp, self.tensors, self.placement, self.ctx.loras)

    @cached_property
    def plan(self) -> Repetition | None:
        return repetition(self.hp, self.kinds)

    @cached_property
    def replayed(self) -> Repetition | None:
        """How the layers repeat where the whole graph's allocator moves are assembled from a shortened graph's,
        everything on the CPU: the sparse-attention models' first (their allocator state never repeats), the
        others' where the allocator's state is not seen to cycle."""
        if not self.shorten or self.placement is not None:
            return None
        return repetition(self.hp, self.kinds, self.replayed_reps)

    @cached_property
    def replayed_reps(self) -> int:
        """The repetitions of the graph replayed: three where the replay comes first, else the four of the graph
        the allocator already ran over (whose state was not seen to cycle)."""
        return Repetition.REPLAYED_FIRST if self.hp.is_dsa else Repetition.REPLAYED

    @cached_property
    def totaled(self) -> Repetition | None:
        return repetition(self.hp, self.kinds, Repetition.TOTALED)

    def build(self, batch: tuple[int, int, int], layers: Sequence[int] | None = None) -> GraphBuilder:
        return build_graph(self.hp, self.ctx, self.memory, self.tensors, *batch, self.placement, layers,
                           pin_norms=self.pin_norms, weights=self.weights)  # fmt: skip

    def sizes(self, builder: GraphBuilder, states: dict[int, list] | None = None,
              reserved: Sequence[int] = ()) -> list[int]:  # fmt: skip
        """Each buffer's size for the graph, at least `reserved`: the sizes an earlier graph reserved."""
        graph = builder.graph
        if self.placement is None:
            return buffer_sizes(graph.leafs, graph.nodes, [(32, None)], lambda t: 0, states, reserved)
        buffers = [buffer_of(gpu) for gpu in self.placement.gpus]
        return backend_buffers(graph, buffers, pipeline=self.pipeline, snapshot_at=states, reserved=reserved)

    def allocate(self, batch: tuple[int, int, int], trials: Sequence[int],
                 reserved: Sequence[int] = ()) -> tuple[list[int], tuple[int, int] | None]:  # fmt: skip
        """Each buffer's size for one batch's graph (at least `reserved`): a shortened graph of one of `trials`
        repetitions where it provably suffices, else the whole; and the cycle of the allocator's states that
        proved it (None: the whole graph was built).

        The allocator's state at the start of each repetition (and of the tail) is taken in a graph of a few
        repetitions (its last one ends the graph as the whole graph's last one does: inputs freed after their last
        use). Once the state at the start of repetition i recurs c repetitions later, every later middle
        repetition replays one of those c, and the whole graph's final repetition (or tail) starts from the state a
        shortened graph's does when their numbers of repetitions agree modulo c and its final repetition (or
        tail) starts at i or later."""
        if self.replayed is not None and self.hp.is_dsa:
            plan, reps = self.replayed, self.replayed_reps
            sizes = replayed_sizes(self.build(batch, plan.layers(reps)), plan, reps, reserved, self.replays)
            if sizes is not None:
                return sizes, None
        plan = self.plan
        tried: dict[int, list[int]] = {}
        built: dict[tuple[int, ...], GraphBuilder] = {}  # the shortened graphs, by their layers
        for reps in trials:
            layers = plan.layers(reps)
            builder = built[tuple(layers)] = self.build(batch, layers)
            states: dict[int, list] = {builder.layer_starts[at]: [] for at in plan.state_starts(reps)}
            tried[reps] = self.sizes(builder, states, reserved)
            cycle = _cycle([state for got in states.values() for state in got])
            if cycle is None:
                continue
            in_phase = reps if (plan.reps - reps) % cycle[1] == 0 else plan.in_phase(cycle)
            if in_phase in tried:
                return tried[in_phase], cycle
            if plan.saves(in_phase):
                return self.sizes(self.build(batch, plan.layers(in_phase)), reserved=reserved), cycle
            break
        if reserved and self.fits(batch, reserved):
            return list(reserved), None
        if self.replayed is not None and not self.hp.is_dsa:
            layers = self.replayed.layers(self.replayed_reps)
            builder = built.get(tuple(layers)) or self.build(batch, layers)
            sizes = replayed_sizes(builder, self.replayed, self.replayed_reps, reserved, self.replays)
            if sizes is not None:
                return sizes, None
        self.whole.append(self.build(batch))
        return self.sizes(self.whole[-1], reserved=reserved), None

    def fits(self, batch: tuple[int, int, int], reserved: Sequence[int]) -> bool:
        """Whether the tensors of the batch's whole graph fit side by side in the buffers `reserved` (it then needs
        no allocator pass: the token-generation graph, as a rule), told from a graph of `Repetition.TOTALED`
        repetitions where the layers repeat, everything on the CPU: every middle repetition of the whole graph
        adds the tensors of the shortened graph's second (from its first new node or leaf to the third's; what
        the first one's last layer leaves to be expanded by the next is in each), whatever the allocator does.
        That the middle repetitions are alike (a layer's tensors do not tell everything: Qwen3-VL's deepstack
        layers, SmolLM3's layers without rope) is seen in a whole graph of another batch built before."""
        if self.placement is not None or not self.whole or any(self.hp.is_recurrent):
            return False  # (a recurrent layer's states, a row per sequence, rarely leave the graph room)
        plan = self.totaled
        if plan is None:
            return False
        reps = plan.TOTALED
        middle = range(plan.start + 2 * plan.period, plan.start + plan.reps * plan.period)
        if not _alike(self.whole[0], middle, plan.period):
            return False
        builder = self.build(batch, plan.layers(reps))
        graph, buffers = builder.graph, [(32, None)]
        second, third = plan.rep_starts(reps + 1)[1:]
        middle = (*graph.leafs[builder.leaf_starts[second] : builder.leaf_starts[third]],
                  *graph.nodes[builder.layer_starts[second] : builder.layer_starts[third]])  # fmt: skip
        (total,) = placed_bytes((*graph.leafs, *graph.nodes), buffers, lambda t: 0)
        (each,) = placed_bytes(middle, buffers, lambda t: 0)
        return fit_side_by_side([total + (plan.reps - reps) * each], reserved)


@dataclass(frozen=True)
class _Replay:
    """A shortened graph's allocator moves assembled into the whole graph's (`replayed_sizes`), kept for the
    other batch's graph: where its moves are these but for their sizes (each naming the tensor at the same place,
    as the token-generation graph's do as a rule: the same layers at another batch size), the same assembly with
    its own sizes is its whole graph's moves, and none of the checks or renaming is needed again."""

    tensors: tuple[Tensor, ...]  # the shortened graph's nodes, then its leaves
    layout: tuple  # the plan, its repetitions, the graph's nodes, and where its layers' nodes and leaves begin
    moves: list[Move]
    compared: tuple[tuple[slice, slice], ...]  # the moves whose sizes the checks found alike
    placed: tuple[slice, ...]  # the moves of the repetition repeated
    left_out: int
    whole: list[Move] = field(default_factory=list)  # (empty: not assembled, the graph fitting side by side)
    origin: list[int] = field(default_factory=list)  # the move of `moves` each of `whole` makes

    def moves_of(self, graph: Graph, layout: tuple) -> list[Move] | None:
        """`graph`'s allocator moves, named as this replay's graph's tensors, where its structure is this replay's
        graph's (then so are its moves but for their sizes: what `alloc.allocator_moves` decides follows from it)
        and its sizes are alike where the checks ask; else None. No moves listed: the check runs at C speed but
        for the in-place ops' sources."""
        if not self.whole or layout != self.layout:
            return None
        tensors = (*graph.nodes, *graph.leafs)
        if len(tensors) != len(self.tensors):
            return None
        mine = len(graph.nodes)
        rename = dict(zip(tensors, self.tensors, strict=True)).get
        if _structure(graph.nodes, graph.leafs, rename) != _structure(self.tensors[:mine], self.tensors[mine:]):
            return None
        return self.resized(dict(zip(self.tensors, map(_nbytes, tensors), strict=True)))

    def resized(self, nbytes: Mapping[Tensor, int]) -> list[Move] | None:
        """This replay's moves with each tensor placed `nbytes` long (another graph's sizes, by this graph's
        tensors), or None where the sizes the checks compared are not alike in them."""
        moves = [(PLACE, m[1], m[2], -(-nbytes[m[1]] // 32) * 32, m[4]) if m[0] == PLACE else m
                 for m in self.moves]  # fmt: skip
        if all(_place_sizes(moves[a]) == _place_sizes(moves[b]) for a, b in self.compared):
            return moves
        return None

    def side_by_side(self, moves: list[Move]) -> int:
        """The bytes the whole graph whose shortened graph made `moves` places, side by side."""
        return _placed(moves) + self.left_out * sum(_placed(moves[s]) for s in self.placed)

    def sizes(self, moves: list[Move], reserved: Sequence[int]) -> list[int]:
        """The CPU buffer's size for the whole graph whose shortened graph made `moves` (at least `reserved`)."""
        placed = self.side_by_side(moves)
        if reserved and fit_side_by_side([placed], reserved):
            return list(reserved)  # (the token-generation graph, as a rule: no allocator pass needed)
        whole = self.whole
        if moves is not self.moves:
            whole = [(PLACE, m[1], m[2], moves[o][3], m[4]) if m[0] == PLACE else m
                     for m, o in zip(whole, self.origin, strict=True)]  # fmt: skip
        (top,) = make_moves(whole, 1, bound=(reserved[0], placed) if reserved else None)
        return [max(top, *reserved, 0)]


def replayed_sizes(builder: GraphBuilder, plan: Repetition, reps: int, reserved: Sequence[int],
                   replays: list[_Replay]) -> list[int] | None:  # fmt: skip
    """The CPU buffer's size for the whole graph (at least `reserved`), from the allocator moves of `builder`'s
    graph of `reps` repetitions (three or four), or None where its repetitions' moves are not alike: by one of
    `replays` (those of the other graphs of the reservation) where it fits, else by its own, kept in `replays`."""
    graph = builder.graph
    if any_input(graph.nodes):  # inputs placed in node order: not split by repetition
        return None
    layout = (plan, reps, len(graph.nodes), tuple(builder.layer_starts), tuple(builder.leaf_starts))
    for replay in replays:
        if (moves := replay.moves_of(graph, layout)) is not None:
            return replay.sizes(moves, reserved)
    moves, starts = allocator_moves(graph.leafs, graph.nodes, [(32, None)], lambda t: 0)
    replay = _replayed(builder, plan, reps, moves, starts, layout, reserved)
    if replay is None:
        return None
    if replay.whole:
        replays.append(replay)
    return replay.sizes(moves, reserved)


def _replayed(builder: GraphBuilder, plan: Repetition, reps: int, moves: list[Move], starts: list[int],
              layout: tuple, reserved: Sequence[int]) -> _Replay | None:  # fmt: skip
    """The whole graph's allocator moves assembled from `moves`, those of `builder`'s graph of `reps` repetitions
    (not assembled where the graph fits side by side in `reserved`), or None where its repetitions' moves are not
    alike.

    None of the allocator's moves (`alloc.allocator_moves`: which tensor is placed, taken over or freed, and when)
    depends on where memory is, so the whole graph's moves are the shortened graph's with the moves of its
    third repetition repeated after it, once for each repetition left out: their own leaves are placed with the
    leaves, in leaf order. The third repetition's moves are checked to be the second's, the tensors they name
    being each the same tensor or the same place one repetition on (what a layer hands the next); what follows
    the third (a fourth repetition, the tail, the last layer) may name only such tensors, then the whole graph's
    own, or the graph's inputs. The allocator then makes every move, as it does over the whole graph."""
    graph = builder.graph
    bounds = plan.rep_starts(reps + 1)
    node_at = [builder.layer_starts[at] for at in bounds]
    leaf_at = [builder.leaf_starts[at] for at in bounds]
    where: dict[Tensor, tuple[int, int, int]] = {}  # the repetition, nodes (0) or leaves (1), and the place in it
    for k in range(reps):
        for kind, made, at in ((0, graph.nodes, node_at), (1, graph.leafs, leaf_at)):
            for pos, t in enumerate(made[at[k] : at[k + 1]], at[k] - at[k + 1]):  # counted back from its end (the
                where[t] = (k, kind, pos)  # first repetition also reads the inputs in first)
    leaf_index = {t: i for i, t in enumerate(graph.leafs)}
    leaf_moves = moves[: starts[0]]
    cut = [0, *(next((i for i, m in enumerate(leaf_moves) if leaf_index[m[1]] >= at), len(leaf_moves))
                for at in leaf_at)]  # fmt: skip

    def rep_moves(k: int) -> tuple[list[Move], list[Move]]:
        return leaf_moves[cut[k + 1] : cut[k + 2]], moves[starts[node_at[k]] : starts[node_at[k + 1]]]

    shared: set[Tensor] = set()  # what the repetitions name alike: the same tensor in each
    handed: set[Tensor] = set()  # what each names at the same place in its own repetition or one before

    def alike(a: list[Move], b: list[Move]) -> bool:
        """Whether `b` makes `a`'s moves a repetition later."""
        if len(a) != len(b):
            return False
        for ma, mb in zip(a, b, strict=True):
            if ma[0] != mb[0] or (ma[0] == PLACE and ma[2:4] != mb[2:4]):
                return False
            for ta, tb in ((ma[1], mb[1]), (ma[2], mb[2])) if ma[0] == TAKE else ((ma[1], mb[1]),):
                if ta is tb:
                    shared.add(ta)
                    continue
                place = where.get(ta)
                if place is None or where.get(tb) != (place[0] + 1, *place[1:]):
                    return False
                handed.update((ta, tb))
        return True

    middle = 2  # the repetition repeated (the third): what follows it follows the repeated ones
    template = rep_moves(middle)
    if not all(map(alike, rep_moves(middle - 1), template)) or shared & handed:
        return None
    shared.update([t for t in where if t.flags & INPUT])  # a graph's inputs are made once, before the layers
    repeated_named = {t for k in range(1, middle + 1) for ms in rep_moves(k) for m in ms for t in _named(m)}
    shared.update(t for t, place in where.items() if place[0] == 0 and t not in repeated_named and t not in handed)
    # (what the first repetition makes for every later one, as Gemma 4's per-layer inputs: no repetition after it
    # names it, so the last one frees that very tensor)
    later = moves[starts[node_at[middle + 1]] :]  # what follows the repeated repetition
    if any(where.get(t, (reps,))[0] <= middle and t not in shared and t not in handed
           for m in later for t in _named(m)):  # fmt: skip
        return None  # they name what a repetition made that the repetitions do not name alike: not known to repeat
    left_out = plan.reps - reps
    leaf_spans = [slice(cut[k + 1], cut[k + 2]) for k in (middle - 1, middle)]  # (as `rep_moves` cuts them)
    node_spans = [slice(starts[node_at[k]], starts[node_at[k + 1]]) for k in (middle - 1, middle)]
    unassembled = _Replay(tuple((*graph.nodes, *graph.leafs)), layout, moves,
                          ((leaf_spans[0], leaf_spans[1]), (node_spans[0], node_spans[1])), (leaf_spans[1],
                          node_spans[1]), left_out)  # fmt: skip
    if reserved and fit_side_by_side([unassembled.side_by_side(moves)], reserved):
        return unassembled  # (the token-generation graph, as a rule: no allocator pass needed)

    # a tensor a repetition up to the repeated one made (and not every repetition names alike) is named, `shift`
    # repetitions on, by the tensor at its place in that repetition while the graph built has it; later, a node by
    # the second's or the third's in turn (a node lives into the next repetition at most: the repeated moves name
    # no tensor of the first, so the one of two repetitions before is freed), a leaf by a number (the leaves of
    # every repetition are placed first, and live together)
    at_place = {place: t for t, place in where.items() if place[0] <= middle}
    step = len(graph.nodes) + len(graph.leafs)

    def name(t: Tensor, shift: int) -> Tensor | int:
        place = where.get(t)
        if place is None or place[0] > middle or t in shared:
            return t
        k, kind, pos = place
        on = k + shift
        if on <= middle:
            return at_place[on, kind, pos] if shift else t
        return at_place[1 + (on - 1) % 2, 0, pos] if kind == 0 else on * step - pos

    def renamed(ms: list[Move], shift: int) -> list[Move]:
        """`ms` made `shift` repetitions later."""
        out: list[Move] = []
        add = out.append
        for m in ms:
            kind = m[0]
            if kind == FREE:
                add((FREE, name(m[1], shift)))
            elif kind == PLACE:
                add((PLACE, name(m[1], shift), *m[2:]))
            else:
                add((TAKE, name(m[1], shift), name(m[2], shift), m[3]))
        return out

    leafs = {t for t, (k, kind, _) in where.items() if k <= middle and kind == 1 and t not in shared}  # (renamed
    # anew every repetition: the leaves of the repetitions up to the repeated one)
    try:  # the nodes' moves, a repetition in two (a place the second or the third lacks: not known to repeat)
        by_parity = {shift: renamed(template[1], shift) for shift in (1, 2)}
        tail = renamed(later, left_out)
    except KeyError:
        return None
    patched = [i for i, m in enumerate(template[1]) if not leafs.isdisjoint(_named(m))]

    def repeated_nodes(shift: int) -> list[Move]:
        ms = by_parity[2 - shift % 2]
        if patched:
            ms = list(ms)
            for i in patched:
                (ms[i],) = renamed([template[1][i]], shift)
        return ms

    repeated = range(1, left_out + 1)
    whole = [*leaf_moves[: cut[middle + 2]], *chain.from_iterable(renamed(template[0], v) for v in repeated),
             *leaf_moves[cut[middle + 2] :], *moves[starts[0] : starts[node_at[middle + 1]]],
             *chain.from_iterable(map(repeated_nodes, repeated)), *tail]  # fmt: skip
    origin = [*range(cut[middle + 2]), *list(range(cut[middle + 1], cut[middle + 2])) * left_out,
              *range(cut[middle + 2], starts[node_at[middle + 1]]),
              *list(range(starts[node_at[middle]], starts[node_at[middle + 1]])) * left_out,
              *range(starts[node_at[middle + 1]], len(moves))]  # fmt: skip
    return replace(unassembled, whole=whole, origin=origin)


def _place_sizes(moves: list[Move]) -> list[int]:
    """The sizes of the tensors `moves` place, in order."""
    return [m[3] for m in moves if m[0] == PLACE]


def _placed(moves: list[Move]) -> int:
    """The bytes the tensors `moves` place take side by side in the CPU buffer (a buffer's end never passes it)."""
    return sum(m[3] for m in moves if m[0] == PLACE)


_op, _flags, _external, _view_src, _sources, _nbytes = map(attrgetter, ("op", "flags", "external", "view_src",
                                                                       "src", "nbytes"))  # fmt: skip


def _structure(nodes: Sequence[Tensor], leafs: Sequence[Tensor],
               rename: Callable[[Tensor | None], Tensor | None] | None = None) -> tuple:  # fmt: skip
    """What the allocator's moves over a graph follow from but for their sizes: each node's op and sources
    (`rename`d: by their place in another graph), each tensor's flags, ownership and view (a leaf has no op or
    sources), and whether each source of a node that may run in place is alike to it in type, shape and strides."""
    srcs = list(map(_sources, nodes))
    sources, views = chain.from_iterable(srcs), chain(map(_view_src, nodes), map(_view_src, leafs))
    return (list(map(_op, nodes)), list(map(len, srcs)), list(map(rename, sources) if rename else sources),
            list(map(rename, views) if rename else views), list(map(_flags, chain(nodes, leafs))),
            list(map(_external, chain(nodes, leafs))),
            [t.type == s.type and t.ne == s.ne and t.nb == s.nb
             for t in nodes if t.op in INPLACE_OPS for s in t.src if s is not None])  # fmt: skip


def _named(move: Move) -> tuple:
    """The tensors a move names."""
    return (move[1], move[2]) if move[0] == TAKE else (move[1],)


def _alike(builder: GraphBuilder, layers: range, period: int) -> bool:
    """Whether each of `layers` adds the same nodes and leaves (ops, types, shapes) to the whole graph `builder`
    built as the layer `period` before it."""

    def added(il: int) -> list[tuple]:
        nodes, leafs = builder.layer_starts, builder.leaf_starts
        added = (*builder.graph.nodes[nodes[il] : nodes[il + 1]], *builder.graph.leafs[leafs[il] : leafs[il + 1]])
        return [(t.op, t.type, t.ne, t.view_src is None) for t in added]

    return all(added(il) == added(il - period) for il in layers)


def _cycle(states: list) -> tuple[int, int] | None:
    """Where the first cycle among the states at the starts of the repetitions begins, and its length (the final
    one's start may close it: what that repetition frees that the others keep goes after its start)."""
    for i in range(len(states)):
        for c in CYCLES:
            if i + c < len(states) and states[i] == states[i + c]:
                return i, c
    return None


def _batches(ctx: Context) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(tokens, sequences, outputs) of `sched_reserve`'s prompt graph and token-generation graph."""
    n_seqs = ctx.n_seq_max
    n_tokens = min(ctx.n_ctx, ctx.n_ubatch)
    return (n_tokens, n_seqs, min(n_tokens, ctx.n_outputs_max)), (n_seqs, n_seqs, n_seqs)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector held off while graphs are built, allocated and dropped: its passes over their tens
    of thousands of tensors, each time a few hundred more are made, cost a tenth of an estimate and find nothing (a
    tensor points only to its sources: reference counting frees them). The graphs are dropped before it resumes,
    so that it does not resume with a pass over them all."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _reserve(reserve: _Reserve, batches: Sequence[tuple[int, int, int]]) -> list[list[int]]:
    """Each batch's buffer sizes, each at least the previous batch's (the buffers keep the largest size). The
    token-generation graph's layers repeat as the prompt graph's do: its first shortened graph is the one the
    prompt graph's cycle shows in, and where the prompt graph needed the whole, so does it (whose tensors all fit
    in the prompt graph's buffer as a rule: it then needs no allocator pass). A graph of fewer than four
    repetitions is tried for it only where it leaves half the layers out: its state settles less often in so few
    (Granite 4.0-H's carried tensors move up a little every repetition of ten), and a failed try costs a whole
    graph more."""
    if len(batches) == 2 and reserve.replayed is not None and reserve.hp.is_dsa:
        sizes = _replayed_as_one(reserve, batches)
        if sizes is not None:
            return sizes
    plan = reserve.plan if reserve.shorten else None
    trials = plan.trials() if plan is not None else []
    out: list[list[int]] = []
    for batch in batches:
        sizes, cycle = reserve.allocate(batch, trials, out[-1] if out else ())
        out.append(sizes)
        if cycle is None:
            trials = []
        else:
            shown = plan.shown(cycle)
            trials = [reps for reps in (shown, *plan.trials(shown)) if plan.saves(reps, 1 if reps >= 4 else 2)]
    return out


def _replayed_as_one(reserve: _Reserve, batches: Sequence[tuple[int, int, int]]) -> list[list[int]] | None:
    """The prompt and token-generation graphs' CPU buffer sizes from one build, where both are replayed from the
    same layers (the sparse-attention models'): the batch's counts are `Pair`s of the two batches', so that each
    tensor has both graphs' sizes; the moves are listed, checked and assembled once and made with each graph's
    sizes. None where the two graphs would go different ways anywhere (`PairDiverged`: in the architecture's
    code, in an in-place check, or in the sizes the replay's checks compared): they are then built apart."""
    plan, reps = reserve.replayed, reserve.replayed_reps
    try:
        builder = reserve.build(tuple(map(pair, *batches)), plan.layers(reps))
        token_bytes = unpair((*builder.graph.nodes, *builder.graph.leafs))
        prompt = replayed_sizes(builder, plan, reps, (), reserve.replays)
    except PairDiverged:
        prompt = None
    moves = reserve.replays[-1].resized(token_bytes) if prompt is not None and reserve.replays else None
    if moves is None:
        reserve.replays.clear()  # (named by the paired graph's tensors)
        return None
    return [prompt, reserve.replays[-1].sizes(moves, prompt)]


def compute_buffer(hp: LlamaCppHParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo], *,
                   shorten: bool = True) -> ComputeBuffer:  # fmt: skip
    """`sched_reserve`'s prompt and token-generation reserves, everything on the CPU (`shorten`: through the
    shortened graph where it suffices)."""
    with _collector_paused():
        (prompt,), (larger,) = _reserve(_Reserve(hp, ctx, memory, tensors, shorten=shorten), _batches(ctx))
    return ComputeBuffer(prompt, larger)


def resolve_flash_attn(hp: LlamaCppHParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo],
                       placement: Placement) -> Context:  # fmt: skip
    """`--flash-attn auto` over devices (`resolve_fused_ops`): the graph of one token per sequence is split with
    flash attention on; where a layer's flash attention runs on another device than the layer (its KV cache kept
    in system memory, or the scheduler carrying it across a partial offload's boundary), llama.cpp turns flash
    attention off for the context's graphs. The caches stay as made (V not transposed). The layers a shortened
    graph leaves out repeat those it keeps, on the same device, and are scheduled alike."""
    if not (ctx.auto_fa and ctx.flash_attn):
        return ctx
    plan = repetition(hp, layer_kinds(hp, tensors, placement, ctx.loras))
    trials = plan.trials() if plan is not None else []
    layers = plan.layers(trials[0]) if trials else None
    builder = build_graph(hp, ctx, memory, tensors, *_batches(ctx)[1], placement, layers)
    devices = assigned_devices(builder.graph, [buffer_of(gpu) for gpu in placement.gpus])
    if any(devices.get(id(node)) != placement.device_of(il) for node, il in builder.flash_attn_nodes):
        return replace(ctx, flash_attn=False)
    return ctx


def compute_buffers(hp: LlamaCppHParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo],
                    placement: Placement, pipeline: bool, *, planned: bool = False,
                    shorten: bool = True) -> list[int]:  # fmt: skip
    """Each backend's compute buffer (the GPUs', then the CPU's) with the model spread over GPUs: the larger of
    the prompt and token-generation reserves, per backend. `planned`: what a context made without allocating
    plans instead (`ggml_backend_sched_reserve_size`, which llama.cpp's fit measures): the prompt graph alone,
    split after the scheduler is reset, which forgets the pinned norms."""
    with _collector_paused():  # (the reservation, and its graphs, dropped as `_reserve` returns)
        return _reserve(_Reserve(hp, ctx, memory, tensors, placement, pipeline, pin_norms=not planned,
                                 shorten=shorten), _batches(ctx)[:1] if planned else _batches(ctx))[-1]  # fmt: skip
