"""Run work items in forked worker processes as well as in this one, where threads would queue on the GIL.

The quantizing kernels make many numpy calls per chunk of rows and hold the GIL between them, about a
quarter of their time: two threads cannot overlap that part, two processes can. A forked child shares this
process's memory as it was at the fork (mapped files, the tensor's row maker, its importance weights), so
an item is just an index; its results go into memory made with `shared_empty`, which parent and children
see alike. Only Linux forks here: other systems' libraries are not safe to use in a forked child.
"""

from __future__ import annotations

import ctypes
import fcntl
import math
import mmap
import os
import pickle
import signal
import struct
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from .._libc import libc_function
from ..errors import WeightkitError
from ._parallel import serial

T = TypeVar("T")

_TOKEN = struct.Struct("<I")
# Items go to the workers as 4-byte tokens in a pipe, all written before the fork: a pipe read of one
# token is atomic, and a worker killed mid-item holds no lock the others could wait on. A token stands for
# a run of consecutive items when there are more items than the pipe can hold tokens.
_PIPE_BYTES = 1 << 16
_PR_SET_PDEATHSIG = 1
_PRCTL = libc_function("prctl", (ctypes.c_int, ctypes.c_ulong))  # found here: a child must not dlopen


def can_fork() -> bool:
    """Can work go to forked processes here? (Linux, unless WEIGHTKIT_PROCESSES=0 asks for threads only.)"""
    return sys.platform == "linux" and os.environ.get("WEIGHTKIT_PROCESSES", "1") != "0"


def shared_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """A zero-filled array in anonymous shared memory: what forked children write to it is seen here."""
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    buffer = mmap.mmap(-1, max(count * dtype.itemsize, 1))  # MAP_SHARED | MAP_ANONYMOUS
    return np.frombuffer(buffer, dtype, count=count).reshape(shape)


def fork_map(fn: Callable[[T], None], items: Sequence[T], processes: int) -> None:
    """Call `fn(item)` for every item, here and in `processes - 1` forked children, all taking items from
    one queue until it is empty. `fn` must leave its results in `shared_empty` memory.

    Work started inside `fn` runs serially. An exception in a child is raised here once all have stopped,
    a child that dies (killed, out of memory) is a WeightkitError, and an exception here (Ctrl-C included)
    kills the children first: no process outlives the call.
    """
    n = len(items)
    if not n:
        return
    with serial():
        per_token = -(-n // (_PIPE_BYTES // _TOKEN.size))
        queue, feed = os.pipe()
        fcntl.fcntl(feed, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        os.write(feed, b"".join(_TOKEN.pack(i) for i in range(0, n, per_token)))
        os.close(feed)

        def drain() -> None:
            while token := os.read(queue, _TOKEN.size):
                (first,) = _TOKEN.unpack(token)
                for i in range(first, min(first + per_token, n)):
                    fn(items[i])

        children: list[tuple[int, int]] = []  # (pid, read end of the pipe its error comes on)
        try:
            for _ in range(min(processes, n) - 1):
                try:
                    children.append(_fork(drain, queue))
                except OSError:  # no more processes or memory for one: the work goes on with those there are
                    break
            drain()
        except BaseException:
            for pid, _ in children:
                os.kill(pid, signal.SIGKILL)
            _reap(children)
            raise
        finally:
            os.close(queue)
        _reap(children, raise_errors=True)


def _fork(drain: Callable[[], None], queue: int) -> tuple[int, int]:
    """Start one child running `drain`; returns its pid and the read end of the pipe its error comes on."""
    parent = os.getpid()
    read, write = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns that a forked child of a threaded process may deadlock on a lock another thread
        # held: the child here takes none (numpy kernels, a pipe, os._exit), so the warning does not apply
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
    code = 0
    try:  # the child: never returns, never runs the parent's exit handlers or flushes its buffers
        os.close(read)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it kills us
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)  # and if it dies, so do we
        if os.getppid() != parent:
            return
        drain()
    except BaseException as error:
        code = 1
        while os.read(queue, _PIPE_BYTES):  # the others stop after their current item
            pass
        os.write(write, _pickled(error))
    finally:
        os._exit(code)


def _pickled(error: BaseException) -> bytes:
    """The error as the parent can raise it again: itself, or its type and message when it won't pickle."""
    try:
        data = pickle.dumps(error)
        pickle.loads(data)
        return data
    except Exception:
        return pickle.dumps(RuntimeError(f"{type(error).__name__}: {error}"))


def _reap(children: list[tuple[int, int]], raise_errors: bool = False) -> None:
    """Wait for every child; with `raise_errors`, raise the first one's error, or say how it died."""
    first: BaseException | None = None
    for pid, read in children:
        with os.fdopen(read, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        if first is not None or not raise_errors:
            continue
        if os.WIFSIGNALED(status):
            name = signal.Signals(os.WTERMSIG(status)).name
            first = WeightkitError(f"a worker process was killed ({name}) while quantizing")
        elif os.WEXITSTATUS(status):
            first = pickle.loads(data) if data else WeightkitError("a worker process failed while quantizing")
    if first is not None:
        raise first
