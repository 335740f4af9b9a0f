"""The layout rules one by one: fit_layers, the llama-engine flow (plan_layout), the environment, Go's sort."""

from __future__ import annotations

import random

import numpy as np
import pytest

from weightkit.errors import FullFitRequired, LayoutInputError, SystemMemoryExceeded, WeightkitError
from weightkit.memory.devices import GPU, METAL_MINIMUM_MEMORY, MINIMUM_MEMORY, SystemMemory
from weightkit.memory.ollama import layout as L
from weightkit.memory.ollama.layout import GPULayers, fit_layers, plan_layout
from weightkit.memory.ollama.layout_gosort import go_sort

MiB = 1 << 20
GiB = 1 << 30
BIG = SystemMemory(total=1 << 40, free=1 << 40, swap=0)


def usable(name: str, mib: int, *, library: str = "CUDA", integrated: bool = False) -> GPU:
    """A GPU with ``mib`` MiB free above the minimum Ollama keeps free."""
    minimum = METAL_MINIMUM_MEMORY if library == "Metal" else MINIMUM_MEMORY
    return GPU(name, library, mib * MiB + minimum, integrated)


def mib(*sizes: int) -> list[int]:
    return [s * MiB for s in sizes]


def fit(sizes, gpus, **kw):
    kw.setdefault("system", BIG)
    return [(g.id, g.layers) for g in fit_layers(sizes, gpus, **kw)]


# ---------------------------------------------------------------------------- per-GPU reservations


def test_minimum_memory_constants():
    assert 457 * MiB == MINIMUM_MEMORY
    assert 512 * MiB == METAL_MINIMUM_MEMORY
    assert GPU("0", "Metal", 0).minimum_memory == 512 * MiB
    assert GPU("0", "CUDA", 0).minimum_memory == 457 * MiB


def test_metal_reserves_512_mib():
    free = 512 * MiB + 100 * MiB  # 155 MiB usable elsewhere, 100 MiB on Metal
    assert fit(mib(50, 50, 50), [GPU("0", "CUDA", free)]) == [("0", (0, 1, 2))]
    # on Metal only two fit; then the output layer (the last) is dropped and blocks 0 and 1 go on the GPU
    assert fit(mib(50, 50, 50), [GPU("0", "Metal", free)]) == [("0", (0, 1))]


def test_gpu_overhead_is_reserved_on_every_gpu():
    gpus = [usable("a", 300), usable("b", 300)]
    assert fit(mib(100, 100, 100), gpus) == [("a", (0, 1, 2))]
    # 150 MiB of overhead each: each GPU holds one layer; two blocks go on GPUs, the output layer is dropped
    assert fit(mib(100, 100, 100), gpus, gpu_overhead=150 * MiB) == [("a", (0,)), ("b", (1,))]


def test_graph_is_reserved_and_keeps_its_gpu_in_use():
    gpus = [usable("a", 1000), usable("b", 800)]
    sizes = mib(100, 100, 100)
    assert fit(sizes, gpus) == [("a", (0, 1, 2))]
    # b already holds a 100 MiB graph: Ollama keeps using it, balancing the layers over both GPUs
    graphs = {("a", "CUDA"): 0, ("b", "CUDA"): 100 * MiB}
    assert fit(sizes, gpus, graphs=graphs) == [("a", (0, 1)), ("b", (2,))]
    # a GPU the runner does not report (absent from graphs) gets nothing
    assert fit(sizes, gpus, graphs={("b", "CUDA"): 0}) == [("b", (0, 1, 2))]


def test_backoff_takes_a_share_of_free_memory():
    gpus = [GPU("a", "CUDA", 1000 * MiB)]
    assert fit(mib(100, 100, 100, 100, 100), gpus) == [("a", (0, 1, 2, 3, 4))]
    # float32(1000 MiB) * 0.3 = 300 MiB reserved on top of 457 MiB: 243 MiB left, two blocks, no output
    assert fit(mib(100, 100, 100, 100, 100), gpus, backoff=0.3) == [("a", (2, 3))]


# ---------------------------------------------------------------------------- ordering and grouping


def test_gpus_sorted_by_free_memory_biggest_first():
    gpus = [usable("small", 100), usable("big", 400), usable("mid", 250)]
    assert fit(mib(100, 100, 100), gpus) == [("big", (0, 1, 2))]
    # needs two GPUs: the two biggest, not the smallest
    assert fit(mib(100, 100, 100, 100, 100), gpus) == [("big", (0, 1, 2)), ("mid", (3, 4))]


def test_discrete_before_integrated():
    gpus = [usable("igpu", 1000, integrated=True), usable("dgpu", 300)]
    assert fit(mib(100, 100, 100), gpus) == [("dgpu", (0, 1, 2))]
    # too much for the dGPU: the iGPU takes the first layers, the dGPU the last (faster) ones
    assert fit(mib(100, 100, 100, 100, 100), gpus) == [("igpu", (0, 1)), ("dgpu", (2, 3, 4))]


def test_library_with_most_layers_wins_first_library_on_ties():
    sizes = mib(100, 100, 100)
    cuda_rocm = [usable("0", 300, library="CUDA"), usable("0", 300, library="ROCm")]
    assert fit_layers(sizes, cuda_rocm, system=BIG) == [GPULayers("0", "CUDA", (0, 1, 2))]
    assert fit_layers(sizes, cuda_rocm[::-1], system=BIG) == [GPULayers("0", "ROCm", (0, 1, 2))]
    # never split across libraries: two 200 MiB GPUs of different libraries hold 2 layers, not 3
    mixed = [usable("0", 200, library="CUDA"), usable("0", 200, library="ROCm")]
    assert fit_layers(sizes, mixed, system=BIG) == [GPULayers("0", "CUDA", (0, 1))]


def test_ties_in_gpu_order_follow_go_sort():
    # 14 discrete GPUs, two sizes: Go's pdqsort (not a stable sort) decides the order of equal GPUs.
    gpus = [usable(f"g{i}", 600 if i % 3 else 700) for i in range(14)]
    devices = [L._Device(g) for g in gpus]
    order = [d.gpu.id for d in L._sort_by_free_memory(devices)]
    stable = [g.id for g in sorted(gpus, key=lambda g: -g.free)]
    assert sorted(order) == sorted(stable)
    assert [gpus[int(i[1:])].free for i in order] == [gpus[int(i[1:])].free for i in stable]


def test_go_sort_is_go_sort():
    # orders produced by Go 1.19's sort.Sort for keys with ties (index order of the sorted elements)
    keys = [i % 3 for i in range(20)]
    items = list(enumerate(keys))
    go_sort(items, lambda a, b: a[1] < b[1])
    assert [k for _, k in items] == sorted(keys)
    expected = [9, 18, 15, 3, 12, 0, 6, 10, 7, 4, 13, 16, 1, 19, 8, 5, 11, 14, 2, 17]
    assert [i for i, _ in items] == expected
    keys = [5, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7]
    items = list(enumerate(keys))
    go_sort(items, lambda a, b: a[1] < b[1])
    assert [k for _, k in items] == sorted(keys)
    assert [i for i, _ in items] == GO_ORDER_30


GO_ORDER_30 = [
    3,
    1,
    6,
    28,
    21,
    16,
    15,
    17,
    9,
    27,
    25,
    24,
    2,
    19,
    23,
    4,
    10,
    8,
    0,
    7,
    20,
    22,
    13,
    29,
    18,
    26,
    11,
    14,
    12,
    5,
]


def test_go_sort_agrees_with_a_sort_on_random_input():
    rng = random.Random(1)
    for n in (0, 1, 2, 12, 13, 50, 51, 200, 1000):
        data = [rng.randrange(5) for _ in range(n)]
        items = list(data)
        go_sort(items, lambda a, b: a < b)
        assert items == sorted(data)


# ---------------------------------------------------------------------------- packing and the output layer


def test_packs_onto_as_few_gpus_as_possible():
    gpus = [usable("a", 1000), usable("b", 1000), usable("c", 1000)]
    assert fit(mib(*[100] * 9), gpus) == [("a", tuple(range(9)))]
    # two GPUs, balanced (7 + 8), output layer included
    assert fit(mib(*[100] * 15), gpus) == [("a", tuple(range(7))), ("b", tuple(range(7, 15)))]


def test_binary_search_balances_layers():
    # 6 layers over two equal GPUs: the smallest capacity that fits all of them gives 3 + 3
    gpus = [usable("a", 400), usable("b", 400)]
    assert fit(mib(*[100] * 6), gpus) == [("a", (0, 1, 2)), ("b", (3, 4, 5))]


def test_output_layer_dropped_and_fit_retried():
    gpus = [usable("a", 350)]
    # all four (600 MiB) do not fit; from the back, the 300 MiB output layer would take the GPU alone
    assert fit(mib(100, 100, 100, 300), gpus) == [("a", (0, 1, 2))]
    # the output layer stays when everything fits
    assert fit(mib(100, 100, 150), gpus) == [("a", (0, 1, 2))]


def test_empty_inputs():
    assert fit([], [usable("a", 100)]) == []
    assert fit(mib(10), []) == []


# ---------------------------------------------------------------------------- num_gpu and spreading


def test_num_gpu_limits_and_forces():
    gpus = [usable("a", 250)]
    sizes = mib(100, 100, 100, 100, 100)
    assert fit(sizes, gpus) == [("a", (2, 3))]  # two fit; the output layer (4) is dropped
    assert fit(sizes, gpus, num_gpu=1) == [("a", (3,))]
    assert fit(sizes, gpus, num_gpu=0) == []
    # a request beyond what fits is forced onto the GPU (unless require_full)
    assert fit(sizes, gpus, num_gpu=4) == [("a", (0, 1, 2, 3))]
    assert fit(sizes, gpus, num_gpu=999) == [("a", (0, 1, 2, 3, 4))]


def test_num_gpu_treats_integrated_gpus_as_discrete():
    gpus = [usable("igpu", 400, integrated=True), usable("dgpu", 200)]
    # default: the dGPU gets the last layers, the iGPU the rest
    assert fit(mib(100, 100, 100, 100, 100), gpus) == [("igpu", (0, 1, 2)), ("dgpu", (3, 4))]
    # with num_gpu both count as alike and share by free memory
    assert fit(mib(100, 100, 100, 100, 100), gpus, num_gpu=5) == [("dgpu", (0,)), ("igpu", (1, 2, 3, 4))]


def test_sched_spread_uses_all_gpus():
    gpus = [usable("a", 256), usable("b", 128)]
    sizes = mib(50, 50, 50)
    assert fit(sizes, gpus) == [("a", (0, 1, 2))]
    assert fit(sizes, gpus, sched_spread=True) == [("a", (0, 1)), ("b", (2,))]


# ---------------------------------------------------------------------------- require-full and system memory


def test_require_full_raises_when_the_model_does_not_fit():
    gpus = [usable("a", 250)]
    with pytest.raises(FullFitRequired) as err:
        fit(mib(100, 100, 100, 100), gpus, require_full=True)
    assert err.value.reason == "gpu"
    assert isinstance(err.value, WeightkitError)
    # fits entirely: no error
    assert fit(mib(100, 100), gpus, require_full=True) == [("a", (0, 1))]
    # a num_gpu request that is met is enough
    assert fit(mib(100, 100, 100, 100), gpus, require_full=True, num_gpu=2) == [("a", (1, 2))]
    # without GPUs there is nothing to evict for
    assert fit(mib(100, 100), [], require_full=True) == []


def test_require_full_checks_free_system_memory():
    system = SystemMemory(total=GiB, free=150 * MiB, swap=GiB)
    with pytest.raises(FullFitRequired) as err:
        fit_layers(mib(100, 100), [], require_full=True, system=system)
    assert err.value.reason == "system"
    assert fit_layers(mib(100, 100), [], system=system) == []  # swap counts without require_full


def test_system_memory_check_counts_free_ram_plus_swap():
    sizes = mib(100, 100, 100)
    assert fit_layers(sizes, [], system=SystemMemory(total=GiB, free=200 * MiB, swap=100 * MiB)) == []
    with pytest.raises(SystemMemoryExceeded) as err:
        fit_layers(sizes, [], system=SystemMemory(total=GiB, free=200 * MiB, swap=99 * MiB))
    assert err.value.required == 300 * MiB and err.value.available == 299 * MiB
    # only what stays on the CPU counts
    one = fit_layers(sizes, [usable("a", 100)], system=SystemMemory(GiB, 200 * MiB, 0))
    assert one == [GPULayers("a", "CUDA", (1,))]
    # extra fixed CPU memory (input weights, CPU graph)
    with pytest.raises(SystemMemoryExceeded):
        fit_layers(sizes, [usable("a", 100)], system=SystemMemory(GiB, 200 * MiB, 0), cpu_fixed=1)
    # macOS has no such check, and no system information means no check
    assert fit_layers(sizes, [], system=SystemMemory(GiB, 0, 0), darwin=True) == []
    assert fit_layers(sizes, []) == []


def test_darwin_offloads_nothing_when_vram_exceeds_total_ram():
    gpus = [GPU("0", "Metal", 8 * GiB)]
    sizes = mib(400, 400, 400)
    assert fit(sizes, gpus, darwin=True, system=SystemMemory(total=2 * GiB, free=GiB, swap=0)) == [("0", (0, 1, 2))]
    assert fit(sizes, gpus, darwin=True, system=SystemMemory(total=GiB, free=GiB, swap=0)) == []


# ---------------------------------------------------------------------------- termination


def ollama_search(layers, devices, high):
    """Ollama's loop as written (float32, `high - low > 1e-6`), for `steps` steps only."""
    low = np.float32(0)
    most = L._count(L._greedy_fit(layers, devices, high, -1))
    states = []
    for _ in range(200):
        if not high - low > np.float32(1e-6):
            return None
        mid = (low + high) / np.float32(2)
        if L._count(L._greedy_fit(layers, devices, mid, -1)) == most:
            high = mid
        else:
            low = mid
        states.append((low, high))
    return states


def test_ollama_capacity_search_spins_above_16():
    # 1 MiB usable, four 100 MiB layers forced with num_gpu: the factor converges near 400
    devices = [L._Device(GPU("0", "CUDA", 1 * MiB))]
    states = ollama_search(mib(100, 100, 100, 100), devices, np.float32(1000))
    assert states is not None  # still running after 200 steps
    assert states[-1] == states[-2] == states[-50]  # stuck: nothing changes any more
    low, high = states[-1]
    assert np.nextafter(low, np.float32(np.inf)) == high and high > 16


def test_capacity_search_terminates_where_ollama_hangs():
    gpus = [usable("a", 1)]  # 1 MiB above the minimum
    assert fit(mib(100, 100, 100, 100), gpus, num_gpu=4) == [("a", (0, 1, 2, 3))]
    assert fit(mib(100, 100, 100, 100), gpus, num_gpu=2) == [("a", (1, 2))]
    two = [usable("a", 2), usable("b", 1)]
    assert fit(mib(*[50] * 10), two, num_gpu=10) == [("a", tuple(range(7))), ("b", (7, 8, 9))]
    assert fit(mib(*[50] * 10), two, num_gpu=10, sched_spread=True) == [("a", tuple(range(7))), ("b", (7, 8, 9))]


def test_capacity_search_unchanged_below_16():
    # converges near 10 (100 MiB layers on 10 MiB): Ollama terminates; same answer either way
    devices = [L._Device(GPU("0", "CUDA", 10 * MiB))]
    assert ollama_search(mib(100), devices, np.float32(1000)) is None
    # one layer requested: the output layer fits first, then is dropped for block 0 (not all layers placed)
    assert fit(mib(100, 100), [usable("a", 10)], num_gpu=1) == [("a", (0,))]


# ---------------------------------------------------------------------------- plan_layout (llamaServer.Load)


def test_plan_full_offload_uses_full_graph():
    gpus = [usable("a", 2000)]
    plan = plan_layout(mib(100, 100, 100), mib(10, 10, 10), 200 * MiB, 300 * MiB, 500 * MiB, gpus, system=BIG)
    assert plan.total_layers == 4
    assert plan.placement == (GPULayers("a", "CUDA", (0, 1, 2, 3)),)
    assert plan.output_on_gpu and plan.fully_offloaded and plan.cpu_layers == ()
    (a,) = plan.gpus
    assert (a.weights, a.kv, a.graph) == (500 * MiB, 30 * MiB, 300 * MiB)
    assert a.total == 830 * MiB
    assert (plan.vram, plan.ram, plan.total) == (830 * MiB, 0, 830 * MiB)


def test_plan_partial_offload_uses_partial_graph_and_blk0_buffer():
    # usable: 1000 - (blk.0 100 + kv[0] 10) - max graph 500 = 390 MiB: three 110 MiB blocks, no output
    gpus = [usable("a", 1000)]
    plan = plan_layout(mib(*[100] * 8), mib(*[10] * 8), 200 * MiB, 300 * MiB, 500 * MiB, gpus, system=BIG)
    assert plan.placement == (GPULayers("a", "CUDA", (5, 6, 7)),)
    assert not plan.output_on_gpu and not plan.fully_offloaded
    assert plan.cpu_layers == (0, 1, 2, 3, 4, 8)
    (a,) = plan.gpus
    assert (a.weights, a.kv, a.graph) == (300 * MiB, 30 * MiB, 500 * MiB)
    assert (plan.cpu_weights, plan.cpu_kv) == (700 * MiB, 50 * MiB)
    assert plan.vram == 830 * MiB and plan.ram == 750 * MiB and plan.total == plan.vram + plan.ram


def test_plan_reports_unused_gpus_and_the_graph_on_each_used_gpu():
    gpus = [usable("a", 600), usable("b", 600), usable("c", 600)]
    plan = plan_layout(mib(*[100] * 8), mib(*[0] * 8), 100 * MiB, 100 * MiB, 100 * MiB, gpus, system=BIG)
    assert [g.id for g in plan.gpus] == ["a", "b", "c"]
    used = {p.id for p in plan.placement}
    assert plan.fully_offloaded
    for g in plan.gpus:
        assert (g.graph == 100 * MiB) == (g.id in used)
        assert (g.layers != ()) == (g.id in used)


def test_plan_graph_on_metal_is_the_full_one():
    kv = mib(12, 12, 12)
    metal = plan_layout(mib(10, 10, 10), kv, 0, 100, 900, [usable("m", 4000, library="Metal")], system=BIG)
    assert metal.graph_partial == metal.graph_full == 100


def test_plan_projector_goes_to_first_discrete_gpu():
    gpus = [usable("igpu", 2000, integrated=True), usable("d", 2000)]
    sizes = (mib(100, 100), mib(0, 0), 10 * MiB, 0, 0)
    plan = plan_layout(*sizes, gpus, projector_weights=1950 * MiB, system=BIG)
    # the projector leaves d with 50 - 100 (buffer) -> 0 MiB, so the layers go to the iGPU
    assert {p.id for p in plan.placement} == {"igpu"}
    # Ollama reports the projector's weights on its GPU (index 1 here) even without layers
    assert plan.gpus[1].weights == 1950 * MiB and plan.gpus[1].layers == ()
    first = plan_layout(*sizes, gpus[::-1], projector_weights=1950 * MiB, system=BIG)
    assert first.gpus[0].weights == 0  # ... but not when it is the first GPU given (Ollama's check is > 0)


def test_plan_errors_and_settings():
    gpus = [usable("a", 300)]
    with pytest.raises(FullFitRequired):
        plan_layout(mib(100, 100, 100), mib(0, 0, 0), 0, 0, 0, gpus, require_full=True, system=BIG)
    with pytest.raises(SystemMemoryExceeded):
        plan_layout(mib(100, 100, 100), mib(0, 0, 0), 0, 0, 0, [], system=SystemMemory(GiB, 100 * MiB, 0))
    plan = plan_layout(mib(100, 100, 100), mib(0, 0, 0), 0, 0, 0, gpus, num_gpu=1, system=BIG)
    # the 0-byte output layer fits first, then is dropped in favour of a block, as in Ollama
    assert plan.placement == (GPULayers("a", "CUDA", (2,)),)
    with pytest.raises(LayoutInputError):
        plan_layout(mib(1, 1), mib(1), 0, 0, 0, gpus)


def test_plan_on_darwin_follows_ollamas_loop():
    # VRAM > total RAM is noticed on the first pass; the loop runs again (the GPU count grew) with num_gpu = 0
    system = SystemMemory(total=GiB, free=GiB, swap=0)
    plan = plan_layout(
        mib(400, 400, 400), mib(0, 0, 0), 0, 0, 0, [GPU("0", "Metal", 8 * GiB)], darwin=True, system=system
    )
    assert plan.placement == () and plan.num_gpu == 0 and plan.vram == 0


# ---------------------------------------------------------------------------- inputs


def test_bad_inputs():
    with pytest.raises(LayoutInputError):
        fit_layers([-1], [])
    with pytest.raises(LayoutInputError):
        fit_layers([1.5], [])
    with pytest.raises(LayoutInputError):
        fit_layers([1], [GPU("0", "CUDA", 1), GPU("0", "CUDA", 2)])
    assert isinstance(LayoutInputError("x"), ValueError)
