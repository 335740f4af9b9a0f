"""Work in forked processes (`quant._forked`): every item done once, results seen by the parent, the same bytes
as on threads, and faults (an error, a killed worker, Ctrl-C) ending the call with one error and no process
left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
import pytest

import weightkit.quant as quant
from weightkit.errors import FormatError, WeightkitError
from weightkit.quant._forked import fork_map, shared_empty
from weightkit.quant._parallel import map_chunks

from ..processes import alive, children

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="weightkit forks workers on Linux only")


@pytest.fixture
def no_stray_children():
    """The test leaves no child process behind (running or a zombie)."""
    before = children()
    yield
    assert children() <= before


@pytest.mark.parametrize("n_items", [1, 7, 1000, 40_000])  # 40,000: more items than tokens fit the pipe
def test_every_item_once_across_processes(no_stray_children, n_items):
    seen = shared_empty((n_items, 1), np.int64)
    seen[:] = 0

    def fn(i: int) -> None:
        seen[i, 0] += 1

    fork_map(fn, range(n_items), 3)
    assert (seen[:, 0] == 1).all()


def test_the_children_do_their_share(no_stray_children):
    """Items long enough that the parent cannot finish them all before its children start: each of the three
    processes does some, and what the children write is seen here."""
    done_by = shared_empty((60,), np.int64)

    def fn(i: int) -> None:
        time.sleep(0.01)
        done_by[i] = os.getpid()

    fork_map(fn, range(60), 3)
    assert len(set(done_by.tolist())) == 3 and os.getpid() in done_by


def test_nested_parallel_calls_run_serially_in_every_process(no_stray_children):
    """A child has none of the parent's pool threads: work started inside an item must not wait on them."""
    out = shared_empty((64, 8), np.int64)

    def inner(i: int) -> None:
        def cell(j: int) -> None:
            out[i, j] = i * j

        map_chunks(cell, range(8))

    fork_map(inner, range(64), 2)
    assert np.array_equal(out, np.outer(np.arange(64), np.arange(8)))


def test_an_error_in_a_child_is_raised_here(no_stray_children):
    parent = os.getpid()

    def fn(i: int) -> None:
        if os.getpid() != parent:
            raise FormatError("model.safetensors", 1234, "bad bytes")
        time.sleep(0.002)

    with pytest.raises(FormatError, match=r"model\.safetensors.*1234.*bad bytes"):
        fork_map(fn, range(200), 2)


def test_an_error_that_will_not_pickle_keeps_its_message(no_stray_children):
    parent = os.getpid()

    class Local(Exception):  # defined in a function: pickle cannot find it
        pass

    def fn(i: int) -> None:
        if os.getpid() != parent:
            raise Local("lost in the pipe")
        time.sleep(0.002)

    with pytest.raises(RuntimeError, match="Local: lost in the pipe"):
        fork_map(fn, range(200), 2)


def test_a_killed_worker_is_one_clear_error(no_stray_children):
    parent = os.getpid()

    def fn(i: int) -> None:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.002)

    with pytest.raises(WeightkitError, match=r"a worker process was killed \(SIGKILL\)"):
        fork_map(fn, range(200), 2)


def test_an_interrupt_here_kills_the_workers(no_stray_children):
    """Ctrl-C in the parent (here raised by an item) ends the call at once: the children, mid-way through
    long items, are killed rather than waited for."""
    parent = os.getpid()

    def fn(i: int) -> None:
        if os.getpid() == parent:
            raise KeyboardInterrupt
        time.sleep(60)

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        fork_map(fn, range(10), 3)
    assert time.monotonic() - start < 30


def test_workers_die_with_their_parent(tmp_path):
    """A parent killed outright (no chance to clean up) takes its workers with it."""
    script = tmp_path / "parent.py"
    pids = tmp_path / "pids"
    pids.touch()
    script.write_text(
        "import os, sys, time\n"
        "from weightkit.quant._forked import fork_map\n"
        "parent = os.getpid()\n"
        "def fn(i):\n"
        "    if os.getpid() != parent:\n"
        f"        open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        "        time.sleep(60)\n"
        "    else:\n"
        "        deadline = time.monotonic() + 30\n"
        f"        while time.monotonic() < deadline and len(open({str(pids)!r}).read().split()) < 2:\n"
        "            time.sleep(0.01)\n"
        "        os.kill(parent, 9)\n"
        "fork_map(fn, range(4), 3)\n"
    )
    proc = subprocess.run([sys.executable, str(script)], timeout=60)
    assert proc.returncode == -signal.SIGKILL
    workers = [int(p) for p in pids.read_text().split()]
    assert len(workers) == 2  # both were running, mid-item, when their parent died
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(map(alive, workers)):
        time.sleep(0.05)
    assert not any(map(alive, workers))


@pytest.mark.parametrize(("qtype", "weighted"), [("Q4_K", False), ("Q6_K", False), ("IQ4_XS", True), ("Q4_0", True)])
def test_processes_give_the_bytes_threads_give(monkeypatch, no_stray_children, qtype, weighted):
    """The process path is taken (forced on for a small matrix, on two workers) and changes no byte."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((300, 512), dtype=np.float32) * 0.02).astype(ml_dtypes.bfloat16)
    w = rng.random(512).astype(np.float32) if weighted else None
    monkeypatch.setattr(quant, "workers", lambda: 2)
    monkeypatch.setattr(quant, "_quantize_chunk", lambda qtype, weighted: 17 * 512)
    monkeypatch.setattr(quant, "MIN_TASK_ELEMENTS", 0)
    monkeypatch.setenv("WEIGHTKIT_PROCESSES", "0")
    threads = quant.quantize(x, qtype, w)
    monkeypatch.setenv("WEIGHTKIT_PROCESSES", "1")
    monkeypatch.setattr(quant, "MIN_FORKED_ELEMENTS", 0)
    forks = []
    real_fork_map = quant.fork_map
    monkeypatch.setattr(quant, "fork_map", lambda *a: forks.append(a[2]) or real_fork_map(*a))
    assert np.array_equal(quant.quantize(x, qtype, w), threads)
    out = np.zeros((300, threads.size // 300), np.uint8)  # a caller's array: filled from the shared memory
    assert quant.quantize_rows(lambda a, b: x[a:b], x.shape, qtype, w, out=out) is out
    assert np.array_equal(out.reshape(-1), threads)
    assert forks == [2, 2]


@pytest.mark.parametrize(("qtype", "weighted", "elements", "forked"), [
    ("Q4_K", False, 1 << 22, True),  # searching, large
    ("Q4_K", False, (1 << 22) - 256, False),  # too small to be worth a fork
    ("Q8_0", False, 1 << 24, False),  # few numpy calls per chunk: threads are as fast
    ("Q8_0", True, 1 << 22, True),  # ... unless weighted
])  # fmt: skip
def test_which_quantizations_fork(monkeypatch, qtype, weighted, elements, forked):
    monkeypatch.setattr(quant, "workers", lambda: 2)
    monkeypatch.setenv("WEIGHTKIT_PROCESSES", "1")
    info = quant.ggml_type(qtype)
    assert (quant._processes(info, weighted, elements, 100) > 1) == forked
    monkeypatch.setenv("WEIGHTKIT_PROCESSES", "0")
    assert quant._processes(info, weighted, elements, 100) == 1
