"""ggml's graph allocator (`ggml/src/ggml-alloc.c`: `ggml_gallocr` over a `ggml_dyn_tallocr`), simulated: the
size of the one buffer a backend needs for a graph's intermediate tensors.

The rules, in ggml's order:

- Every leaf that has no memory of its own (the graph inputs) is placed first, in leaf order.
- A counting pass gives each tensor its number of consumers (one per source slot) and each tensor owning
  memory its number of live views.
- Then, node by node: the node is placed (views never are), and each source loses a consumer; a source with
  none left and no live view is freed (a view's release counts against the tensor it views). Outputs are never
  freed.
- An op ggml may run in place (`ggml_op_can_inplace`) takes over the memory of its first source that this
  allocator placed, that is not an output, has the same type, shape and strides, and has this node as its only
  consumer and no views.
- Placement is best fit among the free blocks below the top, ties going to the later block, else the top
  block; sizes are rounded up to the buffer's alignment, and freed blocks merge with their neighbours. The
  buffer's size is the highest end ever reached.

With one buffer of unlimited size (the CPU's, and every GPU's but Vulkan's and Metal's huge ones) ggml uses one
chunk, which is what this simulates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from operator import attrgetter

from .ggml import INPUT, OUTPUT, Graph, Tensor, any_input

#: ggml_op_can_inplace
INPLACE_OPS = frozenset({
    "FILL", "SCALE", "DIAG_MASK_ZERO", "DIAG_MASK_INF", "ADD", "ADD_ID", "ADD1", "SUB", "MUL", "DIV", "SQR", "SQRT",
    "LOG", "UNARY", "ROPE", "ROPE_BACK", "SILU_BACK", "RMS_NORM", "RMS_NORM_BACK", "CLAMP", "SOFT_MAX", "SOFT_MAX_BACK",
})  # fmt: skip


def buffer_size(graph: Graph, align: int = 32) -> int:
    """Bytes of the one buffer ggml's allocator reserves for `graph` (the CPU buffer type aligns to 32)."""
    return buffer_sizes(graph.leafs, graph.nodes, [(align, None)], lambda t: 0)[0]


State = tuple  # what the allocator holds at a point: free blocks, tops, and the live tensors' places


_sources = attrgetter("src")

AllocSize = Callable[[Tensor], int] | None  # a buffer type's get_alloc_size (None: ggml_nbytes)


def placed_bytes(tensors: Iterable[Tensor], buffers: Sequence[tuple[int, AllocSize]],
                 buffer_of: Callable[[Tensor], int]) -> list[int]:  # fmt: skip
    """The bytes of each buffer that the tensors the allocator places among `tensors` take side by side, each
    rounded up to its buffer's alignment."""
    if len(buffers) == 1 and buffers[0][1] is None:  # one buffer, `ggml_nbytes` long: nothing to ask
        align = buffers[0][0]
        return [sum(-(-t.nbytes // align) * align for t in tensors if t.view_src is None and not t.external)]
    total = [0] * len(buffers)
    for t in tensors:
        if not t.external and t.view_src is None:
            buffer = buffer_of(t)
            align, size = buffers[buffer]
            total[buffer] += -(-(t.nbytes if size is None else size(t)) // align) * align
    return total


def fit_side_by_side(total: Sequence[int], reserved: Sequence[int]) -> bool:
    """Whether a graph whose tensors take `total` bytes side by side needs no allocator pass in buffers of the
    sizes `reserved`: a buffer's end never passes the sum of what was placed in it."""
    return all(need <= have for need, have in zip(total, reserved, strict=True))


Move = (
    tuple  # one step of the allocator: (PLACE, tensor, buffer, size, node), (TAKE, node, parent, node), (FREE, tensor)
)
PLACE, TAKE, FREE = 0, 1, 2
_BOUND_EVERY = 512  # the moves made between checks of `make_moves`'s bound


def allocator_moves(leafs: Sequence[Tensor], nodes: Sequence[Tensor], buffers: Sequence[tuple[int, AllocSize]],
                    buffer_of: Callable[[Tensor], int]) -> tuple[list[Move], list[int]]:  # fmt: skip
    """What `ggml_gallocr_reserve_n` does with the graph, in order, as moves: each tensor given memory (in the
    buffer `buffer_of` gives it, its size as `buffers` says rounded up to the buffer's alignment, at which node:
    -1 for the leaves and inputs placed first), each node taking over its parent's memory, each tensor freed.
    None of them depends on where the memory is, so a graph's moves are known before any is made. Also where each
    node's moves begin (one more entry: the end)."""
    aligns = [align for align, _ in buffers]
    sizes = [size for _, size in buffers]
    align = aligns[0]
    moves: list[Move] = []
    add = moves.append
    owned: set[Tensor] = set()  # tensors placed and still owning their memory
    own, disown = owned.add, owned.discard
    # each tensor's consumers and live views left, a tensor dropped when none are (plain dicts: Python's fast
    # paths for subscripts take no subclass)
    children = dict(Counter(chain.from_iterable(map(_sources, nodes))))
    views = dict(Counter(node.view_src for node in nodes if node.view_src is not None and node.op != "NONE"))
    one = len(buffers) == 1 and sizes[0] is None  # every tensor in buffer 0, `ggml_nbytes` long: nothing to ask

    def place(t: Tensor, position: int) -> None:
        if one:
            add((PLACE, t, 0, -(-t.nbytes // align) * align, position))
        else:
            buffer = buffer_of(t) if len(buffers) > 1 else 0
            size = sizes[buffer]
            n = t.nbytes if size is None else size(t)
            add((PLACE, t, buffer, -(-n // aligns[buffer]) * aligns[buffer], position))
        own(t)

    for leaf in leafs:
        if not leaf.external and leaf.view_src is None and leaf not in owned:
            place(leaf, -1)
    if any_input(nodes):  # else every input is a leaf, placed already
        for t in (s for node in nodes for s in (node, *node.src) if s is not None and s.flags & INPUT):
            if not t.external and t.view_src is None and t not in owned:
                place(t, -1)
    starts = []
    mark = starts.append
    for index, node in enumerate(nodes):
        mark(len(moves))
        if node.view_src is None and not node.external and node not in owned:
            if node.op in INPLACE_OPS:
                for parent in node.src:
                    if (parent is not None and children[parent] == 1 and parent in owned and parent not in views
                            and not parent.flags & OUTPUT and node.type == parent.type and node.ne == parent.ne
                            and node.nb == parent.nb):  # fmt: skip
                        add((TAKE, node, parent, index))  # the node (alike: type, shape, strides) takes it over
                        disown(parent)
                        own(node)
                        break
                else:
                    place(node, index)
            elif one:
                add((PLACE, node, 0, -(-node.nbytes // align) * align, index))
                own(node)
            else:
                place(node, index)
        for parent in node.src:
            if parent is None or parent.external:  # a weight or a cache: never the allocator's to free
                continue
            left = children[parent] - 1
            if left:
                children[parent] = left
                continue
            del children[parent]
            if parent in views:
                continue
            root = parent.view_src
            if root is None:
                if parent in owned and not parent.flags & OUTPUT:
                    disown(parent)
                    add((FREE, parent))
                continue
            left = views[root] - 1
            if left:
                views[root] = left
                continue
            del views[root]
            if root not in children and root in owned and not root.flags & OUTPUT:
                disown(root)
                add((FREE, root))
    starts.append(len(moves))
    return moves, starts


_END = 1 << 62  # the size of the last free block: it reaches to infinity


def _insert_at(starts: list[int], at: int) -> int:
    """Where `ggml_dyn_tallocr_insert_block` puts a new free block starting at `at`: before the first one not below
    it, as it scans (the list is not always sorted: a zero-size block can be left inside a range another allocation
    took)."""
    i = 0
    for start in starts:
        if start >= at:
            break
        i += 1
    return i


def _make(moves: Iterable[Move], free: list[tuple[list[int], list[int]]], tops: list[int], offset: dict,
          made: dict | None) -> None:  # fmt: skip
    """Makes `moves` as `ggml_dyn_tallocr` with one chunk does, the steps written out (a call for each cost a seventh
    more): `free` holds each buffer's free blocks (starts, sizes: in ggml's order, the last reaching to infinity),
    `tops` its highest end, `offset` each owned tensor's (buffer, offset, size), `made` (if kept) who placed it."""
    pop = offset.pop
    for move in moves:
        kind = move[0]
        if kind == PLACE:  # best fit ('<=': the later of equal blocks); the last block, reaching to infinity (and
            _, t, buffer, size, index = move  # smaller than that), only where no block below it fits
            starts, sizes = free[buffer]
            best, best_size, i = 0, _END, 0
            for block in sizes:
                if size <= block <= best_size:
                    best, best_size = i, block
                i += 1  # noqa: SIM113 (a counter: enumerate costs more here)
            at = starts[best]
            if best_size == size:
                del starts[best], sizes[best]  # (a block equal to it before it would leave the same lists)
            else:
                starts[best] = at + size
                sizes[best] = best_size - size
            if at + size > tops[buffer]:
                tops[buffer] = at + size
            offset[t] = (buffer, at, size)
            if made is not None:
                made[t] = index
        elif kind == FREE:
            buffer, at, size = pop(move[1])
            starts, sizes = free[buffer]
            end = at + size
            i = 0
            for start in starts:
                if start + sizes[i] == at:  # grow this block forward, maybe into the next one
                    sizes[i] += size
                    if i + 1 < len(starts) and starts[i + 1] == end:
                        sizes[i] += sizes[i + 1]
                        del starts[i + 1], sizes[i + 1]
                    break
                if start == end:  # grow it backward (no block before it ends at `at`: it would have grown)
                    starts[i], sizes[i] = at, sizes[i] + size
                    break
                i += 1
            else:  # a new block (rarer: a call here costs little)
                starts.insert(i := _insert_at(starts, at), at)
                sizes.insert(i, size)
        else:
            offset[move[1]] = pop(move[2])
            if made is not None:
                made[move[1]] = move[3]


def _stays_within(moves: Sequence[Move], limit: int) -> bool:
    """Whether one buffer's moves provably never end above `limit`, told without making them. While no free block
    borders another and none is empty (so at the start), a tensor placed in the last block finds each block below
    it smaller than itself (best fit would take one that is not), and each of those is followed by a live tensor
    of its own: it ends within the live bytes, (live tensors) x (its size - 1), and its size. A tensor placed in
    another block ends below the last one's start, and no release leaves blocks bordering: one found ending where
    it starts grows over it and merges with the next block, which is the one (if any) starting where it ends, the
    list being sorted. An empty tensor's release, though, adds an empty block unless a block starts where it was
    placed, as one does if no other tensor was placed or freed in between (a release could grow that block down,
    a placing move it up). From the first such, every end stays within the ends bounded so far (the last block's
    start among them) plus what is still to place (a placing moves that start up by at most its size)."""
    size_of: dict = {}
    live = count = reached = 0
    empty = None  # an empty tensor placed (or what took it over) and not yet freed
    for i, move in enumerate(moves):
        kind = move[0]
        if kind == TAKE:
            size_of[move[1]] = size_of.pop(move[2])
            if move[2] is empty:
                empty = move[1]
            continue
        if empty is not None:
            if move[1] is not empty:  # (its release may leave an empty block)
                return reached + sum(m[3] for m in moves[i:] if m[0] == PLACE) <= limit
            empty = None
        if kind == PLACE:
            size = size_of[move[1]] = move[3]
            if not size:
                empty = move[1]
                continue
            end = live + count * (size - 1) + size
            if end > reached:
                if end > limit:
                    return False
                reached = end
            live += size
            count += 1
        else:
            size = size_of.pop(move[1])
            if size:
                live -= size
                count -= 1
    return True


def make_moves(moves: Sequence[Move], n_buffers: int, snapshots: Mapping[int, list[list[State]]] | None = None,
               previous: int = 0, bound: tuple[int, int] | None = None) -> list[int]:  # fmt: skip
    """The allocator's moves made over `n_buffers` buffers: each buffer's size, the highest end
    ever reached. `snapshots` maps a move's index to lists that receive the state just before it (as
    `buffer_sizes` says; `previous`: the node of the snapshot before the first). `bound`: one buffer's limit and
    the bytes the moves place in all; its size is that limit as soon as the moves are seen to stay within it: the
    end reached so far within it, and the last block's start plus the bytes still to place (a tensor placed in
    another free block ends below that start, one placed in the last block ends its size above it, and only
    placing moves it up)."""
    free = [([0], [_END]) for _ in range(n_buffers)]
    tops = [0] * n_buffers
    offset: dict = {}
    if not snapshots:
        limit, left = bound or (0, 0)
        if bound and _stays_within(moves, limit):
            return [limit]
        step = _BOUND_EVERY if bound else len(moves) or 1
        for start in range(0, len(moves), step):
            chunk = moves[start : start + step] if bound else moves  # (no copy of the moves without a bound)
            _make(chunk, free, tops, offset, None)
            if bound:
                left -= sum(move[3] for move in chunk if move[0] == PLACE)
                if tops[0] <= limit and free[0][0][-1] + left <= limit:
                    return [limit]
        return tops
    made: dict = {}  # the node that gave each tensor its memory
    done = 0
    for stop in (*sorted(at for at in snapshots if at < len(moves)), len(moves)):  # the moves up to a snapshot
        _make(moves[done:stop], free, tops, offset, made)
        done = stop
        for index, got in snapshots[stop] if stop < len(moves) else ():
            live = tuple(sorted((*where, index - made[t] if made[t] >= previous else id(t))
                                for t, where in offset.items()))  # fmt: skip
            previous = index
            free_lists = tuple(tuple(zip(*blocks, strict=True)) for blocks in free)
            got.append((free_lists, tuple(tops), live))
    return tops


def buffer_sizes(leafs: Sequence[Tensor], nodes: Sequence[Tensor], buffers: Sequence[tuple[int, AllocSize]],
                 buffer_of: Callable[[Tensor], int], snapshot_at: Mapping[int, list[State]] | None = None,
                 reserved: Sequence[int] = ()) -> list[int]:  # fmt: skip
    """`ggml_gallocr_reserve_n`: one pass over the graph, each tensor placed in the buffer `buffer_of` gives it;
    `buffers` holds each buffer type's alignment and allocation size. Returns each buffer's size, at least
    `reserved` (the sizes an earlier graph reserved: the buffers keep the largest). Where every tensor of the
    graph fits in them side by side, no pass is needed: a buffer's end never passes the sum of what was placed in
    it.

    `snapshot_at` maps node indices to lists that receive the allocator's state just before that node: its free
    blocks and tops, and where each live tensor is: one made since the snapshot before named by how many nodes
    back (its place in the repetition it is carried from, which says what will use it: two tensors a layer swaps
    are told apart), the others (inputs, and what every later layer reads) by identity."""
    bound = None
    if reserved and not snapshot_at:
        placed = placed_bytes((*leafs, *nodes), buffers, buffer_of)
        if fit_side_by_side(placed, reserved):
            return list(reserved)
        if len(buffers) == 1:  # (what the moves place is at most what the graph's tensors take side by side)
            bound = (reserved[0], placed[0])
    moves, starts = allocator_moves(leafs, nodes, buffers, buffer_of)
    snapshots: dict[int, list] = {}
    for index, got in sorted((snapshot_at or {}).items()):
        if index < len(nodes):
            snapshots.setdefault(starts[index], []).append((index, got))
    tops = make_moves(moves, len(buffers), snapshots, min(snapshot_at, default=0) if snapshot_at else 0, bound)
    return [max(top, have) for top, have in zip(tops, reserved or [0] * len(tops), strict=True)]
