"""libmtmd itself, through ctypes, as the reference for what a vision or audio projector (`--mmproj`) takes: what
llama-server's fit asks of it, `mtmd_get_memory_usage`, which loads the projector without reading its data
(clip's `no_alloc`), reserves the warmup graph and returns each device's bytes: the weights' (the sum of their
`ggml_nbytes`) plus the compute buffer.

The library is the libmtmd of an installed `llama-cpp-python` (0.3.36). `mtmd_get_memory_usage` is exported
under its C++ name and returns a `std::map<ggml_backend_dev_t, size_t>`: called here with the hidden pointer
for the result as its first argument (the x86-64 System V convention for a returned class), the map read as
libstdc++ lays out its red-black tree. That sum does not tell weights from compute buffer; clip's own log does,
to the hundredth of a MiB, with the graph's node count and whether flash attention took: `projector_log` loads
the projector as `mtmd_get_memory_usage` does (`clip_init`, no_alloc, warmup) with clip's log collected.

    usage = projector_memory("mmproj.gguf", flash_attn_type=-1)   # {"CPU": bytes}
    log = projector_log("mmproj.gguf", flash_attn_type=-1)        # {"compute_mib": ..., "nodes": ..., ...}
    nodes = projector_graph("mmproj.gguf")                        # the reserved graph's nodes, from ggml's log

With `GGML_SCHED_DEBUG=2` ggml's scheduler logs every node it assigns (op, name, size): `projector_graph`
collects those lines, to diff a reproduced graph against clip's. The scripts that record reference outputs
import this module; the tests never do.
"""

from __future__ import annotations

import ctypes
import os
import re

import llama_cpp.mtmd_cpp as M

_mtmd = M._libmtmd
_base = ctypes.CDLL(os.path.join(os.path.dirname(_mtmd._name), "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
_usage = _mtmd["_Z21mtmd_get_memory_usagePKc19mtmd_context_params"]
_usage.restype = None
_usage.argtypes = [ctypes.c_void_p, ctypes.c_char_p, M.mtmd_context_params]
_dev_name = _base.ggml_backend_dev_name
_dev_name.restype, _dev_name.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
_LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_log_set = _base.ggml_log_set
_log_set.restype, _log_set.argtypes = None, [_LOG_CALLBACK, ctypes.c_void_p]
_mtmd_log_set = _mtmd.mtmd_log_set
_mtmd_log_set.restype, _mtmd_log_set.argtypes = None, [_LOG_CALLBACK, ctypes.c_void_p]
_clip_free = _mtmd["_Z9clip_freeP8clip_ctx"]
_clip_free.restype, _clip_free.argtypes = None, [ctypes.c_void_p]
_LOG: list[str] = []


class _ClipParams(ctypes.Structure):
    """`struct clip_context_params` (clip.h)."""

    _fields_ = [("use_gpu", ctypes.c_bool), ("device", ctypes.c_void_p), ("flash_attn_type", ctypes.c_int),
                ("image_min_tokens", ctypes.c_int), ("image_max_tokens", ctypes.c_int), ("warmup", ctypes.c_bool),
                ("cb_eval", ctypes.c_void_p), ("cb_eval_user_data", ctypes.c_void_p), ("no_alloc", ctypes.c_bool),
                ("progress_callback", ctypes.c_void_p), ("progress_callback_user_data", ctypes.c_void_p)]  # fmt: skip


_clip_init = _mtmd["_Z9clip_initPKc19clip_context_params"]
_clip_init.restype = None
_clip_init.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _ClipParams]  # the result (three pointers) returned in memory


@_LOG_CALLBACK
def _collect(level, text, user_data):
    _LOG.append(text.decode(errors="replace"))


def _read_map(buffer: ctypes.Array) -> dict[int, int]:
    """A libstdc++ `std::map<void *, size_t>` at `buffer`: the header node at offset 8 (color, parent, leftmost,
    rightmost), the count at 40; each node holds its value after its 32-byte base."""
    base = ctypes.addressof(buffer)
    count = ctypes.c_size_t.from_address(base + 40).value
    found: dict[int, int] = {}
    stack = [ctypes.c_void_p.from_address(base + 16).value]  # the root
    while stack:
        node = stack.pop()
        if not node:
            continue
        found[ctypes.c_void_p.from_address(node + 32).value] = ctypes.c_size_t.from_address(node + 40).value
        stack += [ctypes.c_void_p.from_address(node + 16).value, ctypes.c_void_p.from_address(node + 24).value]
    assert len(found) == count
    return found


def projector_memory(path: str, *, use_gpu: bool = True, flash_attn_type: int = -1) -> dict[str, int]:
    """What `mtmd_get_memory_usage` gives llama-server's fit for the projector at `path`, per device name
    (weights plus compute buffer); empty where libmtmd refuses the file."""
    params = M.mtmd_context_params_default()
    params.use_gpu, params.flash_attn_type, params.warmup, params.n_threads = use_gpu, flash_attn_type, True, 1
    result = (ctypes.c_char * 48)()  # sizeof(std::map)
    _usage(ctypes.addressof(result), os.fsencode(path), params)
    return {_dev_name(dev).decode(): size for dev, size in _read_map(result).items()}


def projector_graph(path: str, *, flash_attn_type: int = -1) -> list[str]:
    """The scheduler's log of the reserved warmup graph (GGML_SCHED_DEBUG=2 must be set before libggml loads):
    one line per node that is not a view, `node #i (op): name (size) ...`."""
    _LOG.clear()
    _log_set(_collect, None)
    projector_memory(path, flash_attn_type=flash_attn_type)
    text = "".join(_LOG)
    return [line for line in text.splitlines() if line.startswith("node #")]


def projector_log(path: str, *, use_gpu: bool = True, flash_attn_type: int = -1) -> dict:
    """What clip logs when it loads the projector as `mtmd_get_memory_usage` does: each backend's compute buffer
    in MiB, the warmup graph's node count, whether flash attention is on."""
    _LOG.clear()
    _mtmd_log_set(_collect, None)
    params = _ClipParams(use_gpu=use_gpu, flash_attn_type=flash_attn_type, warmup=True, no_alloc=True)
    result = (ctypes.c_void_p * 3)()
    _clip_init(ctypes.addressof(result), os.fsencode(path), params)
    for ctx in result:
        if ctx:
            _clip_free(ctx)
    text = "".join(_LOG)
    # a file with a vision and an audio encoder loads a context for each: their figures added, their warmups listed
    found: dict = {"compute_mib": {}}
    for m in re.finditer(r"(\S+) compute buffer size = +([0-9.]+) MiB", text):
        found["compute_mib"][m[1]] = round(found["compute_mib"].get(m[1], 0) + float(m[2]), 2)
    graphs = re.findall(r"graph splits = (\d+), nodes = (\d+)", text)
    found["splits"], found["nodes"] = (sum(int(graph[i]) for graph in graphs) for i in (0, 1))
    found["flash_attn"] = re.findall(r"flash attention is (enabled|disabled)", text)[-1] == "enabled"
    # each context logs its warmup size twice (the batching check, then the reserve)
    found["warmup"] = ", ".join(dict.fromkeys(re.findall(r"warmup with (?:image|audio) size = ([0-9x ]+)\n", text)))
    return found
