"""Where Ollama puts a model's layers: which GPU holds which layer, and what stays in system RAM.

This is Ollama's layout algorithm (``llm/server.go``: ``createLayout``, ``buildLayout``,
``verifyLayout``, ``assignLayers``, ``findBestFit``, ``greedyFit``; ``ml/device.go``: GPU sorting
and grouping, ``MinimumMemory``) rewritten as pure functions over numbers. It follows Ollama at
commit ``f63eea3d273816ffc27fbeb0662ab44d236abc45`` (2026-05-24), including its float32 arithmetic
on the capacity factor, so that every placement matches Ollama's byte for byte.

Two levels:

* :func:`fit_layers` is one ``createLayout`` call: given the size of every layer (weights plus KV
  cache, the output layer last) and the GPUs, it returns the placement Ollama picks, or raises
  :class:`FullFitRequired` where Ollama returns ``ErrLoadRequiredFull``.
* :func:`plan_layout` is the llama engine's whole estimate-based flow (``llamaServer.Load``): it
  reserves blk.0 plus kv[0] on every GPU, places the vision projector, iterates ``createLayout``
  while reserving the compute graph on each GPU that gets used, picks the full- or partial-offload
  graph, and reports memory per device as Ollama does.

The environment (``OLLAMA_GPU_OVERHEAD``, ``OLLAMA_SCHED_SPREAD``) is read in one place,
:func:`weightkit.memory.env.ollama_env`; the functions here take those values as arguments, defaulting to Ollama's
defaults for an unset variable (0 bytes, no spreading).

GPUs are sorted with a port of Go's ``sort.Sort`` (:mod:`weightkit.memory.ollama.layout_gosort`), not
Python's stable sort: with more than 12 GPUs, Go's unstable pdqsort orders tied GPUs its own way,
and weightkit reproduces that order.

Where weightkit deliberately differs from Ollama
-----------------------------------------------
* **findBestFit always terminates.** Ollama narrows a float32 capacity factor while
  ``high - low > 1e-6``. Above 16 neighbouring float32 values are 2**-19 (about 1.9e-6) apart, so
  once the factor converges above 16 (``num_gpu`` set, not require-full, the GPUs oversubscribed
  more than 16 times over) the midpoint rounds to ``low`` or ``high``, nothing changes and Ollama
  loops forever. weightkit stops as soon as the midpoint equals ``low`` or ``high``. That state is a
  fixed point of Ollama's loop (the search state, and so the next midpoint, would never change
  again), so it is reached only in runs where Ollama never terminates: every answer Ollama gives is
  unchanged, and where Ollama hangs weightkit returns the fit at the smallest factor that places
  the most layers. See :func:`_find_best_fit`.
* **macOS, VRAM above total RAM** (``darwin=True``): Ollama's ``verifyLayout`` sets ``num_gpu = 0``
  but clears only its own local copy of the layout, so the ``createLayout`` call that detects the
  problem still returns the layers on GPU and only later calls place nothing. :func:`fit_layers`
  returns what those later calls return, an empty placement. :func:`plan_layout` follows Ollama's
  ``llamaServer.Load`` loop to the letter, so there the flag takes effect only when the loop
  calls ``createLayout`` again, exactly as in Ollama.
* ``system=None`` skips the system-memory checks (Ollama always has a ``SystemInfo``).
* :func:`fit_layers` leaves out GPUs that get no layers. Ollama's list can hold such empty entries;
  its own tests compare layouts by ``Hash()``, which ignores them. :func:`plan_layout` keeps them
  internally because Ollama's graph reservation counts them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ...errors import FullFitRequired, LayoutInputError, SystemMemoryExceeded
from ..devices import GPU, SystemMemory
from .layout_gosort import go_sort

__all__ = ["GPUAllocation", "GPULayers", "LayoutPlan", "fit_layers", "plan_layout"]

_U64 = (1 << 64) - 1
_F32 = np.float32
_EPSILON = _F32(1e-6)  # Go: `high-low > 1e-6` converts the constant to float32
_TWO = _F32(2)


# --------------------------------------------------------------------------------------------
# Inputs and outputs


class GPULayers(NamedTuple):
    """The layers placed on one GPU: an entry of Ollama's ``GPULayersList``."""

    id: str
    library: str
    layers: tuple[int, ...]


@dataclass(frozen=True)
class GPUAllocation:
    """What :func:`plan_layout` puts on one GPU, as Ollama's memory report (``BackendMemory``) has it."""

    id: str
    library: str
    name: str
    layers: tuple[int, ...]
    weights: int
    kv: int
    graph: int

    @property
    def total(self) -> int:
        """Weights plus KV cache plus compute graph (Ollama's ``DeviceMemory.Size``)."""
        return self.weights + self.kv + self.graph


@dataclass(frozen=True)
class LayoutPlan:
    """The result of :func:`plan_layout`.

    ``gpus`` lists every GPU given, in the order given (Ollama's ``BackendMemory.GPUs``), including
    GPUs that got nothing. ``placement`` is the layer placement in Ollama's order (GPUs with layers
    only). Layer indices run over the ``total_layers`` = block count + 1 layers; the last one is
    the output layer. ``vram`` and ``total`` are Ollama's ``MemorySize()``; ``ram`` is the rest.
    """

    gpus: tuple[GPUAllocation, ...]
    placement: tuple[GPULayers, ...]
    cpu_layers: tuple[int, ...]
    cpu_weights: int
    cpu_kv: int
    output_on_gpu: bool
    total_layers: int
    graph_full: int
    graph_partial: int
    vram: int
    ram: int
    total: int
    num_gpu: int = field(default=-1)

    @property
    def gpu_layer_count(self) -> int:
        """How many layers are offloaded, counting the output layer."""
        return sum(len(p.layers) for p in self.placement)

    @property
    def fully_offloaded(self) -> bool:
        """Every layer, the output layer included, is on a GPU."""
        return self.gpu_layer_count == self.total_layers


# --------------------------------------------------------------------------------------------
# The algorithm. A layout is a list of _Placement: a working device and the layers it holds.


class _Device:
    """A mutable working copy of a GPU (Ollama copies DeviceInfo values and edits the copies)."""

    __slots__ = ("free", "gpu", "integrated")

    def __init__(self, gpu: GPU, free: int | None = None) -> None:
        self.gpu = gpu
        self.free = gpu.free if free is None else free
        self.integrated = gpu.integrated

    def copy(self) -> _Device:
        d = _Device(self.gpu, self.free)
        d.integrated = self.integrated
        return d


@dataclass
class _Placement:
    """One entry of a layout: a device and the layers placed on it (Ollama's ``GPULayers``, mutable)."""

    device: _Device
    layers: list[int] = field(default_factory=list)


def _count(layout: Iterable[_Placement]) -> int:
    return sum(len(p.layers) for p in layout)


def _scaled(free: int, factor: np.float32) -> int:
    """Go's ``uint64(float32(free) * factor)``: float32 product, truncated to an integer."""
    return int(_F32(float(free)) * factor)


def _reverse_by_free_memory(a: _Device, b: _Device) -> bool:
    """``sort.Reverse(ml.ByFreeMemory)``'s Less: ``a`` goes first if discrete against integrated, else if freer."""
    if a.integrated != b.integrated:
        return b.integrated
    return b.free < a.free


def _sort_by_free_memory(devices: list[_Device]) -> list[_Device]:
    """``sort.Sort(sort.Reverse(ml.ByFreeMemory(gpus)))``: discrete first, then most free memory first.

    Sorted with Go's own (unstable) algorithm so that ties come out in Ollama's order.
    """
    out = list(devices)
    go_sort(out, _reverse_by_free_memory)
    return out


def _group(devices: Sequence[_Device], key) -> list[list[_Device]]:
    """Group keeping first-appearance order (``ml.ByLibrary`` / ``ml.ByPerformance``)."""
    groups: dict[object, list[_Device]] = {}
    for d in devices:
        groups.setdefault(key(d), []).append(d)
    return list(groups.values())


def _greedy_fit(
    layers: Sequence[int], devices: Sequence[_Device], capacity: np.float32, requested: int
) -> list[_Placement]:
    """``greedyFit``: fill the last device from the last layer backwards, spilling to earlier devices.

    Each device may hold ``float32(free) * capacity`` bytes. Stops after ``requested`` layers when
    ``requested >= 0``. Returns entries ordered from the first device used to the last.
    """
    device = len(devices) - 1
    entries = [_Placement(devices[device])]  # built last-device-first, reversed at the end
    free_space = _scaled(devices[device].free, capacity)
    n = len(layers)
    for i in range(n - 1, -1, -1):
        if requested >= 0 and n - 1 - i >= requested:
            break
        while True:
            if layers[i] <= free_space:
                entries[-1].layers.append(i)
                free_space -= layers[i]
                break
            device -= 1
            if device < 0:
                return _finish(entries)
            entries.append(_Placement(devices[device]))
            free_space = _scaled(devices[device].free, capacity)
    return _finish(entries)


def _finish(entries: list[_Placement]) -> list[_Placement]:
    entries.reverse()
    for e in entries:
        e.layers.reverse()
    return entries


def _find_best_fit(
    layers: Sequence[int], devices: Sequence[_Device], requested: int, force_request: bool
) -> list[_Placement]:
    """``findBestFit``: per performance group, the smallest capacity factor that still fits the most layers.

    A small factor spreads the layers evenly over the group's GPUs; the factor is found by a
    float32 binary search between 0 and 1 (or 1000 when ``requested`` layers must be forced onto
    the GPUs, "pretending almost infinite VRAM").

    Termination (the one change from Ollama): Ollama loops ``while high - low > 1e-6``. Once
    ``low`` and ``high`` are neighbouring float32 values more than 1e-6 apart (true of every
    neighbour pair at 16 and above) the float32 midpoint equals ``low`` or ``high``. ``high``
    always fits the most layers and ``low`` never does (it is 0, or a midpoint that failed), so
    the step changes nothing and Ollama repeats it forever. weightkit stops at that point instead.
    Since Ollama never leaves that state, this changes no result Ollama returns; in the runs where
    Ollama hangs, weightkit returns the fit at ``high``, the smallest factor found that places the
    most layers. Each other step strictly shrinks the float32 interval, so the loop is finite.
    """
    layout: list[_Placement] = []
    for group in _group(devices, lambda d: d.integrated):
        high = _F32(1000) if (requested >= 0 and force_request) else _F32(1)
        low = _F32(0)

        best = _greedy_fit(layers, group, high, requested)
        most = _count(best)

        while high - low > _EPSILON:
            mid = (low + high) / _TWO
            if mid in (low, high):  # weightkit: Ollama would spin here forever
                break
            trial = _greedy_fit(layers, group, mid, requested)
            if _count(trial) == most:
                high = mid
                best = trial
            else:
                low = mid

        placed = _count(best)
        layers = layers[: len(layers) - placed]
        requested -= placed
        layout = best + layout
    return layout


def _assign_layers(
    layers: Sequence[int], devices: list[_Device], require_full: bool, requested: int, last_used: int, spread: bool
) -> list[_Placement]:
    """``assignLayers``: pack the most layers onto the fewest GPUs; failing that, retry without the output layer."""
    if requested >= 0 or spread:
        # A manual num_gpu (or spreading) treats all GPUs alike, splitting by VRAM.
        for d in devices:
            d.integrated = False

    layout: list[_Placement] = []
    for _ in range(2):
        requested = min(len(layers), requested)
        if not spread:
            for i in range(last_used, len(devices)):
                force = i == len(devices) - 1 and not require_full
                layout = _find_best_fit(layers, devices[: i + 1], requested, force)
                if _count(layout) == len(layers) or _count(layout) == requested:
                    break
        else:
            layout = _find_best_fit(layers, devices, requested, not require_full)

        if _count(layout) == len(layers):
            return layout
        # Could not place everything: prefer offloading the repeating layers over the output layer.
        layers = layers[:-1]
    return layout


@dataclass
class _Settings:
    num_gpu: int
    require_full: bool
    gpu_overhead: int
    sched_spread: bool
    backoff: float
    darwin: bool
    cpu_fixed: int


def _build_layout(
    system_gpus: Sequence[_Device], layers: Sequence[int], graphs: Mapping[tuple[str, str], int] | None, s: _Settings
) -> list[_Placement]:
    """``buildLayout``: reserve per-GPU overheads, then assign layers library by library, keeping the best."""
    devices = _sort_by_free_memory([d.copy() for d in system_gpus])
    backoff = _F32(s.backoff)

    best: list[_Placement] = []
    for group in _group(devices, lambda d: d.gpu.library):
        last_used = 0
        for i, d in enumerate(group):
            if graphs is not None and d.gpu.key not in graphs:
                d.free = 0  # the runner does not report this GPU
                continue
            graph = 0 if graphs is None else graphs[d.gpu.key]
            if graph != 0:
                last_used = i  # keep using GPUs that already hold a graph
            reserved = (_scaled(d.free, backoff) + d.gpu.minimum_memory + s.gpu_overhead + graph) & _U64
            d.free = d.free - reserved if d.free > reserved else 0

        candidate = _assign_layers(layers, group, s.require_full, s.num_gpu, last_used, s.sched_spread)
        if _count(candidate) > _count(best):
            best = candidate
    return best


def _verify_layout(
    n_gpus: int,
    layers: Sequence[int],
    layout: list[_Placement],
    graphs: Mapping[tuple[str, str], int] | None,
    system: SystemMemory | None,
    s: _Settings,
) -> None:
    """``verifyLayout``: require-full and system-memory checks. May set ``s.num_gpu = 0`` (macOS)."""
    cpu_size = s.cpu_fixed
    vram_size = 0
    if graphs is not None:
        for entry in layout:
            vram_size += graphs.get(entry.device.gpu.key, 0)
    on_gpu = {i for entry in layout for i in entry.layers}
    for i, size in enumerate(layers):
        if i in on_gpu:
            vram_size += size
        else:
            cpu_size += size

    placed = _count(layout)
    if s.require_full:
        if n_gpus > 0 and placed < len(layers) and (s.num_gpu < 0 or placed < s.num_gpu):
            raise FullFitRequired(
                f"unable to load full model on GPU: {placed} of {len(layers)} layers fit", reason="gpu"
            )
        if system is not None and cpu_size > system.free:
            raise FullFitRequired(
                "model requires more system memory than is currently available: "
                f"{cpu_size} bytes needed, {system.free} free",
                reason="system",
            )

    if system is None:
        return
    if not s.darwin:
        available = (system.free + system.swap) & _U64
        if cpu_size > available:
            raise SystemMemoryExceeded(cpu_size, available)
    elif vram_size > system.total:
        # Partial offload of a model larger than total RAM can lock up a Mac: Ollama sets num_gpu = 0.
        s.num_gpu = 0


def _create_layout(
    system_gpus: Sequence[_Device],
    layers: Sequence[int],
    graphs: Mapping[tuple[str, str], int] | None,
    system: SystemMemory | None,
    s: _Settings,
) -> list[_Placement]:
    """``createLayout`` = ``buildLayout`` + ``verifyLayout``; returns the raw layout (empty entries included)."""
    layout = _build_layout(system_gpus, layers, graphs, s)
    _verify_layout(len(system_gpus), layers, layout, graphs, system, s)
    return layout


# --------------------------------------------------------------------------------------------
# Public API


def _check_sizes(name: str, values: Sequence[int]) -> list[int]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise LayoutInputError(f"{name} must hold non-negative integers (bytes), got {v!r}")
        out.append(int(v))
    return out


def _check_gpus(gpus: Sequence[GPU]) -> list[GPU]:
    gpus = list(gpus)
    seen = set()
    for g in gpus:
        if not isinstance(g, GPU):
            raise LayoutInputError(f"expected a GPU, got {g!r}")
        if g.free < 0:
            raise LayoutInputError(f"GPU {g.id!r} has negative free memory")
        if g.key in seen:
            raise LayoutInputError(f"GPU {g.id!r} ({g.library}) listed twice")
        seen.add(g.key)
    return gpus


def _public(layout: list[_Placement]) -> list[GPULayers]:
    return [GPULayers(p.device.gpu.id, p.device.gpu.library, tuple(p.layers)) for p in layout if p.layers]


def fit_layers(
    layer_sizes: Sequence[int],
    gpus: Sequence[GPU],
    *,
    num_gpu: int = -1,
    require_full: bool = False,
    system: SystemMemory | None = None,
    graphs: Mapping[tuple[str, str], int] | None = None,
    gpu_overhead: int = 0,
    sched_spread: bool = False,
    backoff: float = 0.0,
    cpu_fixed: int = 0,
    darwin: bool = False,
) -> list[GPULayers]:
    """Place layers on GPUs as one call of Ollama's ``createLayout`` does.

    ``layer_sizes[i]`` is the memory layer ``i`` needs wherever it goes: its weights plus its KV
    cache (what Ollama sums over ``BackendMemory``). Ollama's layers are the model's blocks
    ``blk.0 … blk.N-1`` followed by the output layer (``output_norm`` + ``output``, or the tied
    ``token_embd``) as the last entry, so ``len(layer_sizes)`` is the block count plus one. The
    last entry is the one dropped when not everything fits.

    ``gpus[i].free`` is the free memory as discovered; on each GPU Ollama reserves
    ``free * backoff``, the minimum memory (:data:`MINIMUM_MEMORY`, :data:`METAL_MINIMUM_MEMORY`),
    ``gpu_overhead`` (``OLLAMA_GPU_OVERHEAD``) and that GPU's compute graph, ``graphs[(id, library)]``.
    A GPU that already holds a graph stays in use. With ``graphs`` given, a GPU missing from it is
    one the runner does not report, and gets nothing; ``graphs=None`` means every GPU, no graph.

    * ``num_gpu``: the requested number of layers (``-1``: as many as fit). A request is forced
      onto the GPUs (as if they had 1000 times their memory) unless ``require_full``.
    * ``require_full``: raise :class:`FullFitRequired` when the model does not fit entirely (or,
      with ``system``, when what stays on CPU exceeds free RAM); Ollama then evicts another model.
    * ``system``: when given, raise :class:`SystemMemoryExceeded` if what stays on the CPU (plus
      ``cpu_fixed``, Ollama's input weights and CPU graph) exceeds free RAM plus free swap; on macOS
      (``darwin=True``) Ollama skips that check and instead offloads nothing when the VRAM used
      exceeds total RAM.
    * ``sched_spread``: ``OLLAMA_SCHED_SPREAD``, use all GPUs instead of as few as possible.

    :func:`weightkit.memory.env.ollama_env` reads ``gpu_overhead`` and ``sched_spread`` from the environment.

    Returns the GPUs that get layers, each with its layer indices (ascending), in Ollama's order:
    the GPU holding the lowest layers first.
    """
    sizes = _check_sizes("layer_sizes", layer_sizes)
    gpu_list = _check_gpus(gpus)
    settings = _Settings(
        num_gpu=num_gpu,
        require_full=require_full,
        gpu_overhead=gpu_overhead,
        sched_spread=sched_spread,
        backoff=backoff,
        darwin=darwin,
        cpu_fixed=cpu_fixed,
    )
    layout = _create_layout([_Device(g) for g in gpu_list], sizes, graphs, system, settings)
    if darwin and settings.num_gpu == 0:
        return []  # see the module docstring: what Ollama's next createLayout call returns
    return _public(layout)


def plan_layout(
    layer_weights: Sequence[int],
    layer_kv: Sequence[int],
    output_weights: int,
    graph_full: int,
    graph_partial: int,
    gpus: Sequence[GPU],
    *,
    num_gpu: int = -1,
    require_full: bool = False,
    system: SystemMemory | None = None,
    gpu_overhead: int = 0,
    sched_spread: bool = False,
    projector_weights: int = 0,
    darwin: bool = False,
) -> LayoutPlan:
    """The llama engine's estimate-based layout (Ollama's ``llamaServer.Load``), as numbers.

    * ``layer_weights[i]``: bytes of the tensors of block ``blk.i``; ``layer_kv[i]``: its KV cache
      (``GraphSize``'s ``kv``). Both have one entry per block.
    * ``output_weights``: ``output_norm`` plus ``output`` (or ``token_embd`` when the output is tied).
      It becomes the last layer, index ``len(layer_weights)``.
    * ``graph_full`` / ``graph_partial``: the compute-graph sizes after ``llm/server.go``'s fallback
      (``weightkit.memory.ollama.graph.graph_size`` gives both); on Metal (the first GPU given) the
      partial size is the full size.
    * ``projector_weights``: a vision projector, loaded on the first discrete GPU (else the first
      GPU) in the order given; it is taken from that GPU's free memory before the layout.

    The other keywords are those of :func:`fit_layers`. The steps: every GPU gives up ``blk.0`` plus
    ``kv[0]`` as a buffer and the projector takes its GPU's share (:func:`_reserve_buffers`); the
    layout is computed repeatedly, reserving the larger of the two graphs on each GPU it uses, until
    the number of GPUs used stops growing (:func:`_settle_layout`); each used GPU is then charged the
    full-offload graph if every layer, the output layer included, is on GPUs, else the partial one,
    and memory is reported per device (:func:`_report`).

    Raises :class:`FullFitRequired` and :class:`SystemMemoryExceeded` as :func:`fit_layers` does.
    """
    weights = _check_sizes("layer_weights", layer_weights)
    kv = _check_sizes("layer_kv", layer_kv)
    if len(weights) != len(kv):
        raise LayoutInputError(f"{len(weights)} layer weights but {len(kv)} KV sizes: need one of each per block")
    (output_weights, graph_full, graph_partial, projector_weights) = _check_sizes(
        "sizes", [output_weights, graph_full, graph_partial, projector_weights]
    )
    gpu_list = _check_gpus(gpus)
    if gpu_list and gpu_list[0].library == "Metal":
        graph_partial = graph_full  # no partial-offload overhead on Metal

    devices = [_Device(g) for g in gpu_list]
    projector_gpu = _reserve_buffers(devices, weights, kv, projector_weights)
    layers = _Layers([*weights, output_weights], [*kv, 0])
    settings = _Settings(num_gpu, require_full, gpu_overhead, sched_spread, backoff=0.0, darwin=darwin, cpu_fixed=0)
    layout, graphs = _settle_layout(devices, layers, graph_full, graph_partial, system, settings)
    graph = graph_full if _count(layout) >= layers.count else graph_partial
    for entry in layout:
        graphs[entry.device.gpu.key] = graph
    return _report(gpu_list, layout, graphs, layers, projector_gpu, projector_weights, graph_full, graph_partial,
                   settings.num_gpu)  # fmt: skip


@dataclass(frozen=True)
class _Layers:
    """Weights and KV cache of every layer, the output layer last (with no KV)."""

    weights: list[int]
    kv: list[int]

    @property
    def count(self) -> int:
        return len(self.weights)

    @property
    def sizes(self) -> list[int]:
        return [w + c for w, c in zip(self.weights, self.kv, strict=True)]


def _reserve_buffers(devices: list[_Device], weights: list[int], kv: list[int], projector: int) -> int:
    """Take ``blk.0`` plus ``kv[0]`` from every GPU as a buffer, and the projector from the first discrete
    GPU (else the first); returns the projector's GPU index (-1 without GPUs)."""
    if weights:
        buffer = weights[0] + kv[0]
        for d in devices:
            d.free = d.free - buffer if d.free > buffer else 0
    if not devices:
        return -1
    index = next((i for i, d in enumerate(devices) if not d.integrated), 0)
    d = devices[index]
    d.free = d.free - projector if d.free > projector else 0
    return index


def _settle_layout(
    devices: list[_Device],
    layers: _Layers,
    graph_full: int,
    graph_partial: int,
    system: SystemMemory | None,
    settings: _Settings,
) -> tuple[list[_Placement], dict[tuple[str, str], int]]:
    """``createLayout`` again and again, reserving the larger graph on every GPU a round uses, until a
    round uses no more GPUs than the one before. Returns the layout and the graphs reserved so far."""
    graphs = {d.gpu.key: 0 for d in devices}
    layout: list[_Placement] = []
    while True:
        previous = layout
        layout = _create_layout(devices, layers.sizes, graphs, system, settings)
        if len(layout) <= len(previous):
            return layout, graphs
        for entry in layout:
            graphs[entry.device.gpu.key] = max(graph_partial, graph_full)


def _report(
    gpus: list[GPU],
    layout: list[_Placement],
    graphs: Mapping[tuple[str, str], int],
    layers: _Layers,
    projector_gpu: int,
    projector_weights: int,
    graph_full: int,
    graph_partial: int,
    num_gpu: int,
) -> LayoutPlan:
    """Memory per device as Ollama's report has it, with two of its quirks: a GPU reserved a graph in an
    earlier round but unused at the end still reports that graph, and the projector's weights are reported
    on its GPU only when that is not the first GPU given."""
    owner = {i: entry.device.gpu.key for entry in layout for i in entry.layers}
    allocations = []
    for index, g in enumerate(gpus):
        mine = tuple(sorted(i for i, key in owner.items() if key == g.key))
        weights = sum(layers.weights[i] for i in mine)
        if index == projector_gpu and projector_gpu > 0:
            weights += projector_weights
        kv = sum(layers.kv[i] for i in mine)
        allocations.append(GPUAllocation(g.id, g.library, g.name, mine, weights, kv, graphs[g.key]))
    cpu_layers = tuple(i for i in range(layers.count) if i not in owner)
    cpu_weights = sum(layers.weights[i] for i in cpu_layers)
    cpu_kv = sum(layers.kv[i] for i in cpu_layers)
    vram = sum(a.total for a in allocations)
    total = cpu_weights + cpu_kv + vram  # MemorySize: input weights and CPU graph are 0 for this engine
    return LayoutPlan(
        gpus=tuple(allocations),
        placement=tuple(_public(layout)),
        cpu_layers=cpu_layers,
        cpu_weights=cpu_weights,
        cpu_kv=cpu_kv,
        output_on_gpu=(layers.count - 1) in owner,
        total_layers=layers.count,
        graph_full=graph_full,
        graph_partial=graph_partial,
        vram=vram,
        ram=total - vram,
        total=total,
        num_gpu=num_gpu,
    )
