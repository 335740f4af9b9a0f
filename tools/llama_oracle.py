"""llama.cpp itself, through ctypes, as the reference for what it allocates: KV cache, recurrent state, output and
compute buffers, and the graph it reserves, for a GGUF loaded without reading tensor data.

The library is the libllama of an installed `llama-cpp-python` (0.3.36: its build compiles llama.cpp, about 10
minutes on 2 cores). Models load with `no_alloc` and no mmap (`load_mode = 0`), so a skeleton GGUF (tensor
infos and a data hole) is enough. The scripts that record reference outputs import this module; the tests
never do: they read what the scripts wrote.

    oracle = LlamaOracle()
    with oracle.load("model.gguf", n_ctx=8192, flash_attn_type=1) as ctx:
        ctx.compute_bytes(), ctx.cache_bytes(), ctx.output_mib, ctx.log

Exact byte counts come from the graph llama.cpp reserves (`llama_graph_reserve`, exported from libllama under
its C++ name): the KV and recurrent cache tensors are its leaves, and the scheduler's buffer size after the
prompt and token-generation reserves is the compute buffer a real context allocates. The buffer is reserved
with malloc and never touched; on Linux with the default overcommit heuristic a reserve larger than free
memory fails, so set /proc/sys/vm/overcommit_memory to 1 to record the largest cases.
"""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import llama_cpp as L

_LIB = Path(os.environ.get("LLAMA_CPP_LIB_PATH") or Path(L.__file__).parent / "lib")  # the libllama llama_cpp loaded
_base = ctypes.CDLL(str(_LIB / "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
_llama = ctypes.CDLL(str(_LIB / "libllama.so"))


class Tensor(ctypes.Structure):
    """`struct ggml_tensor` (ggml.h) at this version: 336 bytes."""


Tensor._fields_ = [
    ("type", ctypes.c_int),
    ("buffer", ctypes.c_void_p),
    ("ne", ctypes.c_int64 * 4),
    ("nb", ctypes.c_size_t * 4),
    ("op", ctypes.c_int),
    ("op_params", ctypes.c_int32 * 16),
    ("flags", ctypes.c_int32),
    ("src", ctypes.POINTER(Tensor) * 10),
    ("view_src", ctypes.POINTER(Tensor)),
    ("view_offs", ctypes.c_size_t),
    ("data", ctypes.c_void_p),
    ("name", ctypes.c_char * 64),
    ("extra", ctypes.c_void_p),
    ("padding", ctypes.c_char * 8),
]
assert ctypes.sizeof(Tensor) == 336


class Graph(ctypes.Structure):
    """The leading fields of `struct ggml_cgraph` (ggml-impl.h)."""

    _fields_ = [
        ("size", ctypes.c_int),
        ("n_nodes", ctypes.c_int),
        ("n_leafs", ctypes.c_int),
        ("nodes", ctypes.POINTER(ctypes.POINTER(Tensor))),
        ("grads", ctypes.c_void_p),
        ("grad_accs", ctypes.c_void_p),
        ("leafs", ctypes.POINTER(ctypes.POINTER(Tensor))),
    ]


def _bind(lib, name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = restype, list(argtypes)
    return fn


_op_name = _bind(_base, "ggml_op_name", ctypes.c_char_p, ctypes.c_int)
_type_name = _bind(_base, "ggml_type_name", ctypes.c_char_p, ctypes.c_int)
_nbytes = _bind(_base, "ggml_nbytes", ctypes.c_size_t, ctypes.c_void_p)
_unary_op = _bind(_base, "ggml_get_unary_op", ctypes.c_int, ctypes.c_void_p)
_unary_name = _bind(_base, "ggml_unary_op_name", ctypes.c_char_p, ctypes.c_int)
_n_backends = _bind(_base, "ggml_backend_sched_get_n_backends", ctypes.c_int, ctypes.c_void_p)
_backend = _bind(_base, "ggml_backend_sched_get_backend", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
_buffer_size = _bind(_base, "ggml_backend_sched_get_buffer_size", ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p)
_get_sched = _bind(_llama, "_ZNK13llama_context9get_schedEv", ctypes.c_void_p, ctypes.c_void_p)
_graph_reserve = _bind(_llama, "_Z19llama_graph_reserveP13llama_contextjjj", ctypes.POINTER(Graph),
                       ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32)  # fmt: skip

GGML_OP_UNARY = next(i for i in range(200) if _op_name(i) == b"UNARY")
_LOG: list[str] = []


@L.llama_log_callback
def _collect(level, text, user_data):
    _LOG.append(text.decode(errors="replace"))


@dataclass
class Node:
    """One tensor of a reserved graph, as plain data."""

    index: int
    op: str
    name: str
    type: str
    ne: tuple[int, ...]
    nb: tuple[int, ...]
    nbytes: int
    flags: int
    srcs: tuple[int | None, ...]  # indices into the graph's tensors (leaves first, then nodes)
    view_src: int | None
    has_buffer: bool


@dataclass
class ReservedGraph:
    leafs: list[Node] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)


class Context:
    """A llama_context made with `no_alloc`: its log, and exact sizes on request."""

    def __init__(self, model, ctx, log: str, params: dict) -> None:
        self.model, self.ctx, self.log, self.params = model, ctx, log, params

    def _mib(self, pattern: str) -> list[float]:
        return [float(m) for m in re.findall(pattern, self.log)]

    @property
    def output_mib(self) -> float:
        """The `output buffer size` line (the buffer is allocated for real, even with no_alloc)."""
        return sum(self._mib(r"output buffer size =\s+([0-9.]+) MiB"))

    @property
    def compute_log_mib(self) -> float:
        """The `compute buffer size` line: with no_alloc, the prompt graph's planned size."""
        return sum(self._mib(r"compute buffer size =\s+([0-9.]+) MiB"))

    @property
    def flash_attention(self) -> bool:
        """On or off as the context ended up: as asked, or as `resolve_fused_ops` resolved "auto"."""
        requested = self.params.get("flash_attn_type", -1)
        if requested != -1 or "enabling flash_attn since it is required" in self.log:
            return requested != 0
        return "Flash Attention enabled" in self.log

    def graph(self, n_tokens: int, n_seqs: int, n_outputs: int) -> ReservedGraph:
        """The worst-case graph llama.cpp reserves for a batch (built and allocated by its scheduler)."""
        g = _graph_reserve(self.ctx, n_tokens, n_seqs, n_outputs)
        if not g:
            raise RuntimeError("llama_graph_reserve failed (see the log)")
        g = g.contents
        order = [g.leafs[i] for i in range(g.n_leafs)] + [g.nodes[i] for i in range(g.n_nodes)]
        index = {ctypes.addressof(p.contents): i for i, p in enumerate(order)}
        out = ReservedGraph()
        for i, p in enumerate(order):
            t = p.contents
            op = _op_name(t.op).decode()
            if t.op == GGML_OP_UNARY:
                op = "UNARY:" + _unary_name(_unary_op(ctypes.byref(t))).decode()
            node = Node(
                index=i,
                op=op,
                name=t.name.decode(errors="replace"),
                type=_type_name(t.type).decode(),
                ne=tuple(t.ne),
                nb=tuple(t.nb),
                nbytes=_nbytes(ctypes.byref(t)),
                flags=t.flags,
                srcs=tuple(index.get(ctypes.addressof(s.contents)) if s else None for s in t.src),
                view_src=index.get(ctypes.addressof(t.view_src.contents)) if t.view_src else None,
                has_buffer=bool(t.buffer) or bool(t.data),
            )
            (out.leafs if i < g.n_leafs else out.nodes).append(node)
        return out

    def reserve_batch(self) -> tuple[int, int, int]:
        """(tokens, sequences, outputs) of the prompt graph `sched_reserve` reserves for this context."""
        n_tokens = min(L.llama_n_ctx(self.ctx), L.llama_n_ubatch(self.ctx))
        n_outputs = self.params.get("n_outputs_max") or L.llama_n_batch(self.ctx)
        return n_tokens, L.llama_n_seq_max(self.ctx), min(n_tokens, n_outputs)

    def compute_bytes(self, n_tokens: int, n_seqs: int, n_outputs: int) -> list[int]:
        """Each backend's compute buffer after reserving the prompt graph (n_tokens, n_outputs) and then the
        token-generation graph (n_seqs tokens and outputs), as a real context does: the buffers only grow."""
        self.graph(n_tokens, n_seqs, n_outputs)
        self.graph(n_seqs, n_seqs, n_seqs)
        sched = _get_sched(self.ctx)
        return [_buffer_size(sched, _backend(sched, i)) for i in range(_n_backends(sched))]

    def close(self) -> None:
        if self.ctx:
            L.llama_free(self.ctx)
            L.llama_model_free(self.model)
            self.ctx = self.model = None

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _BuftOverride(ctypes.Structure):
    """`struct llama_model_tensor_buft_override`: a name pattern and a buffer type."""

    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


class LlamaOracle:
    """Loads GGUFs into no_alloc contexts (CPU only), collecting llama.cpp's log for each."""

    def __init__(self) -> None:
        L.llama_log_set(_collect, None)
        L.llama_backend_init()

    def load(self, path: str | Path, *, devices: Sequence[int] | None = None, split_mode: int = 1,
             main_gpu: int = 0, tensor_split: Sequence[float] = (), overrides: Sequence[tuple[str, int]] = (),
             **params) -> Context:  # fmt: skip
        """`params` are llama_context_params fields (n_ctx, n_batch, n_ubatch, n_seq_max, flash_attn_type,
        type_k, type_v, swa_full, kv_unified, embeddings, n_outputs_max, ...), plus n_gpu_layers. `devices`
        (ggml_backend_dev_t handles), `split_mode` (0 none, 1 layer, 2 row), `main_gpu` and `tensor_split` place
        the model as llama_model_params do; `overrides` are (pattern, buffer type handle) pairs
        (`tensor_buft_overrides`)."""
        _LOG.clear()
        mp = L.llama_model_default_params()
        mp.no_alloc = True
        mp.load_mode = 0
        mp.n_gpu_layers = params.pop("n_gpu_layers", 0)
        mp.split_mode, mp.main_gpu = split_mode, main_gpu
        keep = []  # arrays llama_model_params point into, alive until the model is loaded
        if devices is not None:
            keep.append((ctypes.c_void_p * (len(devices) + 1))(*devices, None))
            mp.devices = ctypes.addressof(keep[-1])
        if tensor_split:
            keep.append((ctypes.c_float * L.llama_max_devices())(*tensor_split))
            mp.tensor_split = ctypes.cast(keep[-1], ctypes.POINTER(ctypes.c_float))
        if overrides:
            patterns = [ctypes.c_char_p(p.encode()) for p, _ in overrides]
            keep.append(patterns)
            keep.append((_BuftOverride * (len(overrides) + 1))(
                *(_BuftOverride(p, buft) for p, (_, buft) in zip(patterns, overrides, strict=True))))  # fmt: skip
            mp.tensor_buft_overrides = ctypes.addressof(keep[-1])
        model = L.llama_model_load_from_file(str(path).encode(), mp)
        if not model:
            raise RuntimeError(f"llama.cpp could not load {path}: {''.join(_LOG)[-2000:]}")
        cp = L.llama_context_default_params()
        for key, value in params.items():
            if not hasattr(cp, key):
                raise AttributeError(f"llama_context_params has no field {key}")
            setattr(cp, key, value)
        ctx = L.llama_init_from_model(model, cp)
        log = "".join(_LOG)
        if not ctx:
            L.llama_model_free(model)
            raise ContextRefused(log)
        return Context(model, ctx, log, dict(params))


class ContextRefused(RuntimeError):
    """llama_init_from_model returned NULL; the message is llama.cpp's last error line."""

    def __init__(self, log: str) -> None:
        errors = [line for line in log.splitlines() if "llama_init_from_model" in line or "failed" in line]
        super().__init__(errors[-1].strip() if errors else log[-500:])
        self.log = log
