"""Decoding many tensors at once (quant.dequantize_many, ModelFile.load) and the pool that runs the chunks."""

from __future__ import annotations

import threading
import time
from collections import Counter

import numpy as np
import pytest

import weightkit
from weightkit import quant
from weightkit.dtypes import GGML_TYPES, GGMLType
from weightkit.gguf import GGUFWriter
from weightkit.quant._parallel import map_chunks

# (type, shape): mixed block sizes, an empty tensor, a scalar, and one large enough to be cut into chunks.
CASES = [
    ("Q4_K", (3, 512)),
    ("F32", ()),
    ("Q8_0", (0, 64)),
    ("IQ4_NL", (2, 256)),
    ("F16", (5,)),
    ("Q5_0", (1100, 1024)),
    ("TQ1_0", (256,)),
]


def random_raw(qtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Bytes of a tensor of `qtype`: random codes, float16 scales kept finite so outputs compare simply."""
    info = GGML_TYPES[quant.ggml_type(qtype).type]
    n = int(np.prod(shape, dtype=np.int64))
    x = rng.standard_normal((max(n // info.block_size, 0), info.block_size)).astype(np.float32)
    return quant.quantize(x.reshape(-1, info.block_size) if n else x, qtype).reshape(-1)


def test_dequantize_many_matches_one_call_each():
    rng = np.random.default_rng(7)
    tensors = [(random_raw(t, s, rng), t, s) for t, s in CASES]
    together = quant.dequantize_many(tensors)
    for (raw, qtype, shape), out in zip(tensors, together, strict=True):
        alone = quant.dequantize(raw, qtype, shape)
        assert out.shape == shape and out.dtype == np.float32
        assert np.array_equal(out.view(np.uint32), alone.view(np.uint32)), qtype
        assert out.ctypes.data % 64 == 0  # every tensor starts on its own cache line


# Same-type tensors share runs of the output; odd-sized F16 ones leave alignment gaps that break a run.
SMALL = [("Q8_0", (3, 64)), ("F16", (5,)), ("Q8_0", (2, 32)), ("F16", (7,)), ("Q4_K", (1, 256)),
         ("Q8_0", (4, 96)), ("F16", (16,)), ("F16", (3,))]  # fmt: skip


def counted_kernels(monkeypatch) -> Counter:
    """Count each type's kernel calls from now on."""
    calls: Counter = Counter()
    for name in {qtype for qtype, _ in SMALL}:
        kernel = quant.DEQUANTIZERS[GGMLType[name]]

        def counting(blocks, out, kernel=kernel, name=name):
            calls[name] += 1
            kernel(blocks, out)

        monkeypatch.setitem(quant.DEQUANTIZERS, GGMLType[name], counting)
    return calls


def test_dequantize_many_decodes_small_tensors_of_a_type_in_one_call(monkeypatch):
    rng = np.random.default_rng(5)
    tensors = [(random_raw(t, s, rng), t, s) for t, s in SMALL]
    alone = [quant.dequantize(*t) for t in tensors]
    calls = counted_kernels(monkeypatch)
    together = quant.dequantize_many(tensors)
    # Q8_0: three tensors, one call; F16: (5,) and (7,) are each followed by a gap, (16,) and (3,) are not.
    assert calls == {"Q8_0": 1, "F16": 3, "Q4_K": 1}
    for a, b in zip(together, alone, strict=True):
        assert a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))
        assert a.ctypes.data % 64 == 0


def test_dequantize_many_chunks_across_tensor_boundaries(monkeypatch):
    """Chunks of 3 blocks: Q8_0's 6 + 2 + 12 blocks are cut at 3, 6 | 8 (2 + 1 of the next), ..."""
    monkeypatch.setattr(quant, "CHUNK_ELEMENTS", 3 * 32)
    monkeypatch.setattr(quant, "MIN_TASK_ELEMENTS", 32)
    rng = np.random.default_rng(6)
    tensors = [(random_raw(t, s, rng), t, s) for t, s in SMALL]
    alone = [quant.dequantize(*t) for t in tensors]
    calls = counted_kernels(monkeypatch)
    together = quant.dequantize_many(tensors)
    assert calls["Q8_0"] == 7  # 20 blocks in chunks of 3
    for a, b in zip(together, alone, strict=True):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_dequantize_many_checks_everything_before_decoding():
    rng = np.random.default_rng(1)
    good = (random_raw("Q4_0", (4, 32), rng), "Q4_0", (4, 32))
    with pytest.raises(ValueError, match="takes 144 bytes, but 143 were given"):
        quant.dequantize_many([good, (bytes(143), "Q4_K", (256,))])
    with pytest.raises(ValueError, match="not a multiple"):
        quant.dequantize_many([good, (bytes(18), "Q4_0", (2, 16))])
    assert quant.dequantize_many([]) == []


def test_map_chunks_runs_every_item_once_on_several_threads(monkeypatch):
    monkeypatch.setenv("WEIGHTKIT_THREADS", "2")
    seen, threads = [], set()
    lock = threading.Lock()

    def work(i: int) -> None:
        with lock:
            seen.append(i)
            threads.add(threading.get_ident())
        np.sort(np.random.default_rng(i).standard_normal(20_000))  # releases the GIL: the other thread joins

    map_chunks(work, range(200))
    assert sorted(seen) == list(range(200))
    assert len(threads) == 2


def test_map_chunks_raises_the_tasks_error_after_all_work_stopped(monkeypatch):
    monkeypatch.setenv("WEIGHTKIT_THREADS", "2")
    done = []

    def work(i: int) -> None:
        if i == 3:
            raise KeyError("task 3")
        done.append(i)

    with pytest.raises(KeyError, match="task 3"):
        map_chunks(work, range(50))
    count = len(done)
    time.sleep(0.05)
    assert len(done) == count and 3 not in done  # nothing still running after the call returned


def test_map_chunks_inside_a_task_runs_serially(monkeypatch):
    """A task that itself maps chunks must not wait on the pool its caller occupies (it would deadlock)."""
    monkeypatch.setenv("WEIGHTKIT_THREADS", "2")
    totals = []

    def outer(i: int) -> None:
        inner = []
        map_chunks(inner.append, range(10))
        totals.append(sum(inner))

    map_chunks(outer, range(4))
    assert totals == [45] * 4


@pytest.fixture
def mixed_gguf(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "mixed.gguf"
    with GGUFWriter(path, {"general.architecture": "llama"}) as w:
        for i, (qtype, shape) in enumerate(CASES):
            if 0 in shape or not shape:
                continue  # GGUF tensors have at least one dimension, each positive
            w.add_tensor(f"t{i}.{qtype}", random_raw(qtype, shape, rng).tobytes(), dtype=qtype, shape=shape)
        w.add_tensor("plain", rng.standard_normal((3, 4)).astype(np.float32))
    return path


def test_load_gives_what_tensor_gives(mixed_gguf):
    with weightkit.open(mixed_gguf) as m:
        everything = m.load()
        assert list(everything) == list(m.tensors)
        for name, arr in everything.items():
            one = m.tensor(name)
            assert arr.dtype == one.dtype and arr.shape == one.shape
            assert np.array_equal(arr.view(np.uint8), one.view(np.uint8)), name
        some = m.load(["plain", "t0.Q4_K"], dtype=np.float16)
        assert list(some) == ["plain", "t0.Q4_K"] and all(a.dtype == np.float16 for a in some.values())
        with pytest.raises(KeyError):
            m.load(["missing"])


@pytest.mark.needs_torch
def test_load_hands_out_torch_tensors(mixed_gguf):
    import torch

    with weightkit.open(mixed_gguf, framework="torch") as m:
        loaded = m.load()
        assert all(isinstance(t, torch.Tensor) for t in loaded.values())
        assert torch.equal(loaded["t0.Q4_K"], m.tensor("t0.Q4_K"))


@pytest.mark.needs_torch
def test_kernels_take_torch_tensors():
    """quantize and dequantize accept torch tensors (bfloat16 included) as they accept numpy arrays."""
    import torch

    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(0)).bfloat16()
    as_numpy = x.float().numpy()  # bfloat16 widens to float32 exactly
    for qtype in ("Q8_0", "Q4_K"):
        raw = quant.quantize(x, qtype)
        assert np.array_equal(raw, quant.quantize(as_numpy, qtype))
        from_torch = quant.dequantize(torch.from_numpy(raw), qtype, (8, 256))
        assert np.array_equal(from_torch, quant.dequantize(raw, qtype, (8, 256)))
