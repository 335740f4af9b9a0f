"""ggml's backend scheduler (`ggml_backend_sched_split_graph` in `ggml/src/ggml-backend.cpp`), simulated for a
graph spread over GPUs and the CPU: which backend runs each node, the splits where the backend changes, the
copies of inputs a split needs on its own device, and the compute buffer each backend's allocator then
reserves.

The backends are the GPUs in order, then the CPU. The rules, as the scheduler applies them:

1. A tensor whose memory lives on a device (a weight, a cache) runs there, a graph input on the CPU, and an op
   on a weight where the weight is (a CPU weight is taken to the first GPU that offloads such an op when its
   batch is large enough, `op_offload`); rope and flash attention are not placed by their small weights.
2. Assignments spread to neighbouring nodes: GPU ones down and up the graph first (the CPU's stopping them),
   then all of them.
3. What is left goes where most of its inputs already are; views go with the tensor they view.
4. Walking the graph, a split starts where the backend changes (or where a node needs a CPU weight copied
   after inputs were), and each input that lives on another device is copied into the split's backend's buffer
   once, at the start of the split.

With several GPUs fully offloaded (pipeline parallelism) the inputs are kept in four copies, never freed.
What GPU backends do on their own (CUDA's graph optimization reordering nodes, flash attention's conversion
space) is not modelled: with those GPUs the compute buffers are derived; with RPC devices (which have no
graph optimization and take over no ops) they are exact, and checked against llama.cpp.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import ggml as g
from .alloc import buffer_sizes
from .ggml import INPUT, OUTPUT, Graph, Tensor
from .placement import OFFLOAD_ANY, OFFLOAD_MATMUL, Buffer

VIEW_OPS = frozenset({"VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"})
MATMULS = frozenset({"MUL_MAT", "MUL_MAT_ID"})
OFFLOAD_MIN_BATCH = 32  # op_offload_min_batch_size (GGML_OP_OFFLOAD_MIN_BATCH)
MAX_COPIES = 4  # GGML_SCHED_MAX_COPIES
CPU_BUFFER_ALIGNMENT = 32


def _batch(t: Tensor) -> int:
    """`get_op_batch_size`: how many rows an op works on, for deciding whether to offload it."""
    if t.op == "GET_ROWS":
        return 0
    if t.op == "MUL_MAT":
        return t.ne[1]
    if t.op in ("MUL_MAT_ID", "ROPE"):
        return t.ne[2]
    return t.ne[1] * t.ne[2] * t.ne[3]


class _Scheduler:
    def __init__(self, graph: Graph, gpus: Sequence[Buffer], op_offload: bool, n_copies: int) -> None:
        self.graph, self.gpus, self.op_offload, self.n_copies = graph, list(gpus), op_offload, n_copies
        self.cpu = len(gpus)
        self.backend: dict[int, int] = {}

    def of(self, t: Tensor | None) -> int:
        return -1 if t is None else self.backend.get(id(t), -1)

    def _device_backend(self, t: Tensor) -> int:
        return self.cpu if t.device < 0 else t.device

    def _buffer_backend(self, t: Tensor) -> int:
        """The backend whose buffer holds `t` (its own memory, or what it views); -1 if not placed yet."""
        root = t.view_src or t
        if root.external:
            return self._device_backend(root)
        backend = self.of(t)
        return self.of(t.view_src) if backend < 0 and t.view_src is not None else backend

    def _from_current(self, t: Tensor) -> int:
        """`ggml_backend_sched_backend_id_from_cur`."""
        root = t.view_src or t
        if root.external:
            return self._device_backend(root)
        if t.flags & INPUT:
            return self.cpu
        if t.op in ("ROPE", "FLASH_ATTN_EXT"):
            return -1
        for src in t.src:
            if src is not None and src.weight:
                backend = self._device_backend(src)
                if backend == self.cpu and self.op_offload and _batch(t) >= OFFLOAD_MIN_BATCH:
                    for gpu, buffer in enumerate(self.gpus):  # the first GPU that takes the op over
                        if buffer.offload == OFFLOAD_ANY or (buffer.offload == OFFLOAD_MATMUL and t.op in MATMULS):
                            return gpu
                return backend
        return -1

    def assign(self) -> None:
        graph, backend = self.graph, self.backend
        for t in graph.nodes:
            if t.pinned is not None:
                backend[id(t)] = self.cpu if t.pinned < 0 else t.pinned
        for t in (*graph.leafs, *graph.nodes):
            if id(t) not in backend and (b := self._from_current(t)) >= 0:
                backend[id(t)] = b
        ops = [n for n in graph.nodes if n.op not in VIEW_OPS]
        for order, gpu_only in ((ops, True), (ops[::-1], True), (ops, False), (ops[::-1], False)):
            current = -1
            for node in order:
                b = backend.get(id(node), -1)
                if b >= 0:
                    current = -1 if gpu_only and b == self.cpu else b
                elif current >= 0:
                    backend[id(node)] = current
        for node in ops:
            if id(node) in backend:
                continue
            best, count = -1, -1
            for b in range(self.cpu + 1):
                n = sum(1 for s in node.src if s is not None and self._buffer_backend(s) == b)
                if n > count:
                    best, count = b, n
            backend[id(node)] = best
        for node in graph.nodes:
            if id(node) not in backend and node.view_src is not None:
                backend[id(node)] = self.of(node.view_src)
            for s in node.src:
                if s is not None and id(s) not in backend:
                    backend[id(s)] = self.of(s.view_src) if s.view_src is not None else self.of(node)
            if id(node) not in backend:
                backend[id(node)] = 0

    def split(self) -> tuple[list[Tensor], list[Tensor], dict[int, int]]:
        """Pass 5 and the graph copy: the nodes and leaves the allocator sees, and each one's backend."""
        graph, backend = self.graph, self.backend
        copies: dict[tuple[int, int], list[Tensor]] = {}
        splits: list[tuple[int, int, list[Tensor]]] = []  # (first node index, backend, inputs)
        nodes = graph.nodes
        first = next((i for i, n in enumerate(nodes) if n.op not in VIEW_OPS), len(nodes))
        current = backend[id(nodes[first])] if first < len(nodes) else self.cpu
        splits.append((0, current, []))
        for i in range(first, len(nodes)):
            node = nodes[i]
            if node.op in VIEW_OPS:
                continue
            b = backend[id(node)]
            inputs = splits[-1][2]
            weight_elsewhere = (
                b == current
                and inputs
                and any(s is not None and s.weight and self._buffer_backend(s) != current for s in node.src)
            )
            if b != current or weight_elsewhere:
                splits.append((i, b, []))
                current, inputs = b, splits[-1][2]
            node.src = tuple(self._input(s, current, copies, inputs) for s in node.src)
        self.splits = splits
        out_nodes: list[Tensor] = []
        ids = dict(backend)
        bounds = [s[0] for s in splits[1:]] + [len(nodes)]
        for (start, b, inputs), end in zip(splits, bounds, strict=True):
            for src in inputs:
                dep = g.view_tensor(src, "NONE", src)
                ids[id(dep)] = self._buffer_backend(src)
                out_nodes.append(dep)
                cpy = copies[(id(src), b)][0]
                ids[id(cpy)] = b
                out_nodes.append(cpy)
            out_nodes.extend(nodes[start:end])
        leafs = list(graph.leafs)
        if self.n_copies > 1:  # every input kept in n_copies copies, allocated first and never freed
            extra = []
            for leaf in graph.leafs:
                if leaf.flags & INPUT:
                    leaf.flags |= OUTPUT
                    made = [leaf] + [_copy(leaf, INPUT | OUTPUT) for _ in range(self.n_copies - 1)]
                    for copy in made:
                        ids[id(copy)] = ids.get(id(leaf), self.cpu)
                    extra.extend(made)
            for _, b, inputs in splits:
                for src in inputs:
                    made = copies[(id(src), b)]
                    for copy in made:
                        ids[id(copy)] = b
                    extra.extend(made)
            leafs = extra + leafs
        return out_nodes, leafs, ids

    def _input(self, src: Tensor | None, b: int, copies: dict, inputs: list[Tensor]) -> Tensor | None:
        if src is None or self._buffer_backend(src) == b:
            return src
        key = (id(src), b)
        if key not in copies:
            flags = INPUT | OUTPUT if self.n_copies > 1 else 0
            copies[key] = [_copy(src, flags) for _ in range(self.n_copies)]
            inputs.append(src)
        return copies[key][0]


def _copy(src: Tensor, flags: int) -> Tensor:
    """`ggml_dup_tensor_layout`: the same type, shape and strides, memory of the allocator's."""
    t = Tensor(src.type, src.ne, "NONE", (), nb=src.nb)
    t.flags = flags
    return t


def assigned_devices(graph: Graph, gpus: Sequence[Buffer]) -> dict[int, int]:
    """The device (a GPU's index, -1 for the CPU) each node of `graph` runs on (by `id`), as the scheduler assigns
    them before splitting (`ggml_backend_sched_get_tensor_backend` after `ggml_backend_sched_split_graph`)."""
    scheduler = _Scheduler(graph, gpus, True, 1)
    scheduler.assign()
    cpu = scheduler.cpu
    return {key: -1 if backend == cpu else backend for key, backend in scheduler.backend.items()}


def backend_buffers(
    graph: Graph,
    gpus: Sequence[Buffer],
    *,
    op_offload: bool = True,
    pipeline: bool = False,
    snapshot_at: dict[int, list] | None = None,
    reserved: Sequence[int] = (),
) -> list[int]:
    """Compute buffer bytes of each GPU backend, then the CPU's, for `graph` spread as the scheduler spreads it,
    at least `reserved`. `snapshot_at` (graph node indices) collects the allocator's state as `alloc.buffer_sizes`
    does."""
    scheduler = _Scheduler(graph, gpus, op_offload, MAX_COPIES if pipeline else 1)
    scheduler.assign()
    nodes, leafs, ids = scheduler.split()
    if snapshot_at:  # the graph copy adds nodes: find the original nodes where they went
        where = {id(n): i for i, n in enumerate(nodes)}
        snapshot_at = {where[id(graph.nodes[i])]: got for i, got in snapshot_at.items() if i < len(graph.nodes)}
    buffers = [(b.alignment, lambda t, b=b: b.raw_size(t.type, t.ne[0], t.nbytes)) for b in gpus]
    buffers.append((CPU_BUFFER_ALIGNMENT, None))
    return buffer_sizes(leafs, nodes, buffers, lambda t: ids.get(id(t), scheduler.cpu), snapshot_at, reserved)
