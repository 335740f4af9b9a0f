"""Ollama's TestLLMServerFitGPU (llm/server_test.go at f63eea3d), as weightkit test data.

Every GPU below is described by its free memory *above* the 457 MiB minimum Ollama keeps free;
layers are sizes in MiB. Ollama compares layouts by Hash(), which ignores GPUs with no layers, and
fit_layers leaves those out, so the expected lists compare directly.
"""

from __future__ import annotations

import pytest

from weightkit.errors import FullFitRequired
from weightkit.memory.devices import GPU, MINIMUM_MEMORY, SystemMemory
from weightkit.memory.ollama.layout import fit_layers

MiB = 1 << 20
SYSTEM = SystemMemory(total=1024 * MiB, free=512 * MiB, swap=256 * MiB)


def gpu(name: str, above_min: int, *, integrated: bool = False, library: str = "", raw: bool = False) -> GPU:
    free = above_min * MiB if raw else above_min * MiB + MINIMUM_MEMORY
    return GPU(name, library, free, integrated)


# (name, gpus, layer sizes in MiB, num_gpu, require_full, expected [(id, library, layers)] or FullFitRequired)
CASES = [
    ("No GPU", [], [50, 50, 50], -1, True, []),
    ("Full single GPU", [gpu("gpu0", 256)], [50, 50, 50], -1, False, [("gpu0", "", (0, 1, 2))]),
    ("Partial single GPU", [gpu("gpu0", 256)], [100, 100, 100, 100], -1, False, [("gpu0", "", (1, 2))]),
    ("Single GPU with numGPU 1", [gpu("gpu0", 256)], [50, 50, 50], 1, False, [("gpu0", "", (1,))]),
    ("Single GPU with numGPU 0", [gpu("gpu0", 256)], [50, 50, 50], 0, False, []),
    ("Single GPU with numGPU 999", [gpu("gpu0", 256)], [100, 100, 100, 100], 999, False, [("gpu0", "", (0, 1, 2, 3))]),
    (
        "Multi GPU fits on one",
        [gpu("gpu0", 128), gpu("gpu1", 256)],
        [50, 50, 50],
        -1,
        False,
        [("gpu1", "", (0, 1, 2))],
    ),
    (
        "Multi GPU split",
        [gpu("gpu0", 128), gpu("gpu1", 256)],
        [256, 50, 50],
        -1,
        False,
        [("gpu1", "", (0,)), ("gpu0", "", (1, 2))],
    ),
    ("Multi GPU partial", [gpu("gpu0", 128), gpu("gpu1", 256)], [256, 256, 50], -1, False, [("gpu1", "", (1,))]),
    ("Multi GPU numGPU 1", [gpu("gpu0", 128), gpu("gpu1", 256)], [50, 50, 50], 1, False, [("gpu1", "", (1,))]),
    (
        "Multi GPU numGPU 2",
        [gpu("gpu0", 128), gpu("gpu1", 256)],
        [256, 50, 50],
        2,
        False,
        [("gpu1", "", (0,)), ("gpu0", "", (1,))],
    ),
    (
        "Multi GPU numGPU 999",
        [gpu("gpu0", 128), gpu("gpu1", 256)],
        [256, 256, 50],
        999,
        False,
        [("gpu1", "", (0, 1)), ("gpu0", "", (2,))],
    ),
    (
        "Multi GPU different libraries",
        [gpu("gpu0", 128, library="CUDA"), gpu("gpu1", 256, library="ROCm")],
        [128, 128, 50],
        -1,
        False,
        [("gpu1", "ROCm", (0, 1))],
    ),
    ("requireFull", [gpu("gpu0", 256)], [100, 100, 100, 100], -1, True, FullFitRequired),
    ("requireFull numGPU", [gpu("gpu0", 256, raw=True)], [100, 100, 100, 100], 4, True, FullFitRequired),
    ("iGPU", [gpu("gpu0", 256, integrated=True)], [50, 50, 50], -1, False, [("gpu0", "", (0, 1, 2))]),
    (
        "iGPU + dGPU",
        [gpu("gpu0", 128), gpu("gpu1", 256, integrated=True)],
        [50, 50, 50],
        -1,
        False,
        [("gpu1", "", (0,)), ("gpu0", "", (1, 2))],
    ),
    (
        "iGPU + dGPU fits on one",
        [gpu("gpu0", 128), gpu("gpu1", 256, integrated=True)],
        [50, 50],
        -1,
        False,
        [("gpu0", "", (0, 1))],
    ),
    (
        "iGPU + dGPU partial",
        [gpu("gpu0", 128), gpu("gpu1", 256, integrated=True)],
        [100, 100, 100, 100],
        -1,
        False,
        [("gpu1", "", (0, 1)), ("gpu0", "", (2,))],
    ),
    (
        "iGPU + dGPU numGPU 1",
        [gpu("gpu0", 128), gpu("gpu1", 256, integrated=True)],
        [100, 100, 100, 100],
        1,
        False,
        [("gpu0", "", (2,))],
    ),
    (
        "iGPU + dGPU numGPU 999",
        [gpu("gpu0", 128), gpu("gpu1", 256, integrated=True)],
        [100, 100, 100, 100],
        999,
        False,
        [("gpu0", "", (0,)), ("gpu1", "", (1, 2, 3))],
    ),
]


def test_every_ollama_case_is_here():
    assert len(CASES) == 21
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("name", "gpus", "layers", "num_gpu", "require_full", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_llm_server_fit_gpu(name, gpus, layers, num_gpu, require_full, expected):
    sizes = [mib * MiB for mib in layers]
    if expected is FullFitRequired:
        with pytest.raises(FullFitRequired):
            fit_layers(sizes, gpus, num_gpu=num_gpu, require_full=require_full, system=SYSTEM)
        return
    got = fit_layers(sizes, gpus, num_gpu=num_gpu, require_full=require_full, system=SYSTEM)
    assert [tuple(g) for g in got] == expected
