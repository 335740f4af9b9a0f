"""llama.cpp itself on several GPU-type devices, on a machine without a GPU: ggml's RPC backend.

An RPC device reports itself as a GPU, claims every op and keeps its buffers in a remote backend's memory; here
each is an RPC server in a child process on 127.0.0.1, serving the CPU backend. llama.cpp then places layers,
weights, KV cache and compute buffers across the RPC devices exactly as across GPUs (the same split points and
the same scheduler), with the sizes of the remote CPU backend (32-byte alignment, no padded rows, no op offload).
Each server advertises the free memory it is given: ggml offers no setting, so the child replaces its CPU
device's `get_memory` before it starts serving.

Needs llama.cpp built with RPC: `tools/build_llama_rpc.sh` builds the sdist's llama.cpp into a folder with
libllama, libggml-rpc and llama-fit-params; point LLAMA_CPP_LIB_PATH at it (llama-cpp-python's bindings and
tools/llama_oracle.py then load that libllama). The recording scripts use this; the tests read what they wrote.

    with RpcDevices([24 << 30, 8 << 30]) as devices:
        m = devices.measure("model.gguf", n_gpu_layers=-1, tensor_split=(3, 1), n_ctx=8192)
        m["layers"], m["devices"]          # device of each layer; weights, kv, compute per device
    fit_params("model.gguf", [24 << 30, 8 << 30], ["-np", "4", "-kvu"])   # llama-fit-params' choice
"""

from __future__ import annotations

import ctypes
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import llama_oracle as O

C = ctypes
_SERVER_TIMEOUT = 30.0
_GET_MEMORY = 2  # the index of get_memory in struct ggml_backend_device_i (ggml-backend-impl.h)
_MEMORY_FN = C.CFUNCTYPE(None, C.c_void_p, C.POINTER(C.c_size_t), C.POINTER(C.c_size_t))
_LAYER = re.compile(r"layer\s+(\d+) assigned to device (\S+?),")


def _libs() -> tuple[C.CDLL, C.CDLL]:
    ggml = C.CDLL(str(O._LIB / "libggml.so"), mode=C.RTLD_GLOBAL)
    rpc = C.CDLL(str(O._LIB / "libggml-rpc.so"))
    return ggml, rpc


def serve(port: int, free: int) -> None:
    """The child: serve the CPU backend on 127.0.0.1:port, advertising `free` bytes free and total."""
    C.CDLL(None).prctl(1, 15)  # PR_SET_PDEATHSIG: SIGTERM when the parent dies
    ggml, rpc = _libs()
    by_type = O._bind(ggml, "ggml_backend_dev_by_type", C.c_void_p, C.c_int)
    cpu = by_type(0)  # GGML_BACKEND_DEVICE_TYPE_CPU; its interface is a static, writable struct

    def get_memory(dev, free_out, total_out):
        free_out[0] = total_out[0] = free

    handler = _MEMORY_FN(get_memory)
    (C.c_void_p * 16).from_address(cpu)[_GET_MEMORY] = C.cast(handler, C.c_void_p).value
    start = O._bind(rpc, "ggml_backend_rpc_start_server", None, C.c_char_p, C.c_char_p, C.c_size_t, C.c_size_t,
                    C.POINTER(C.c_void_p))  # fmt: skip
    start(f"127.0.0.1:{port}".encode(), None, 1, 1, (C.c_void_p * 1)(cpu))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Servers:
    """RPC servers in child processes, one per free-memory figure; `endpoints` in order."""

    def __init__(self, free: Sequence[int]) -> None:
        self.procs: list[subprocess.Popen] = []
        self.endpoints: list[str] = []
        try:
            for size in free:
                port = _free_port()
                argv = [sys.executable, __file__, "serve", str(port), str(size)]
                self.procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
                self.endpoints.append(f"127.0.0.1:{port}")
            for proc, endpoint in zip(self.procs, self.endpoints, strict=True):
                _wait_listening(proc, endpoint)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(10)
        self.procs = []


def _wait_listening(proc: subprocess.Popen, endpoint: str) -> None:
    """A server serves one client at a time; this probe connects and leaves before the real client comes."""
    host, port = endpoint.rsplit(":", 1)
    deadline = time.monotonic() + _SERVER_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the RPC server for {endpoint} exited with status {proc.returncode}")
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                time.sleep(0.2)
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"the RPC server {endpoint} is not listening after {_SERVER_TIMEOUT} s")


class RpcDevices:
    """RPC devices with the given free memory, connected to this process's libllama."""

    def __init__(self, free: Sequence[int]) -> None:
        self.oracle = O.LlamaOracle()
        ggml, rpc = _libs()
        add_server = O._bind(rpc, "ggml_backend_rpc_add_server", C.c_void_p, C.c_char_p)
        dev_count = O._bind(ggml, "ggml_backend_reg_dev_count", C.c_size_t, C.c_void_p)
        dev_get = O._bind(ggml, "ggml_backend_reg_dev_get", C.c_void_p, C.c_void_p, C.c_size_t)
        self._dev_name = O._bind(ggml, "ggml_backend_dev_name", C.c_char_p, C.c_void_p)
        self._servers = _Servers(free)
        self.devices: list[int] = []
        try:
            for endpoint in self._servers.endpoints:
                reg = add_server(endpoint.encode())
                self.devices += [dev_get(reg, i) for i in range(dev_count(reg))]
        except BaseException:
            self.close()
            raise
        self.names = [self._dev_name(d).decode() for d in self.devices]

    def measure(self, path: str | Path, *, n_gpu_layers: int = -1, split_mode: int = 1, main_gpu: int = 0,
                tensor_split: Sequence[float] = (), overrides: Sequence[tuple[str, int]] = (),
                **ctx_params) -> dict:  # fmt: skip
        """Load `path` without allocating, make the context, reserve the prompt and token-generation graphs as a
        real context does, and report each layer's device and each device's (the RPC ones in order, then the
        CPU) weights, KV cache and compute buffer in bytes; `planned` is the compute buffer a no_alloc context
        plans with, which llama.cpp's fit measures. `overrides`: (pattern, device index or -1 for the CPU)."""
        bufts = [(pattern, _cpu_buffer_type() if device < 0 else _dev_buffer_type(self.devices[device]))
                 for pattern, device in overrides]  # fmt: skip
        with self.oracle.load(path, devices=self.devices, n_gpu_layers=n_gpu_layers, split_mode=split_mode,
                              main_gpu=main_gpu, tensor_split=tensor_split, overrides=bufts,
                              **ctx_params) as ctx:  # fmt: skip
            layers = {int(il): name for il, name in _LAYER.findall(ctx.log)}
            breakdown = _memory_breakdown(ctx.ctx)
            batch = ctx.reserve_batch()
            compute = ctx.compute_bytes(*batch)
            sched = O._get_sched(ctx.ctx)
            backends = [O._backend(sched, i) for i in range(O._n_backends(sched))]
            backend_device = [_backend_device(b) for b in backends]
        devices = []
        for dev in [*self.devices, None]:
            rows = [row for row in breakdown if row["device"] == dev]
            in_use = [c for c, d in zip(compute, backend_device, strict=True) if d == dev]
            devices.append({
                "weights": sum(r["model"] for r in rows),
                "kv": sum(r["context"] for r in rows),
                "compute": sum(in_use),
                "planned": sum(r["compute"] for r in rows),
            })  # fmt: skip
        names = {name: i for i, name in enumerate(self.names)}
        return {"layers": [names.get(layers[il], -1) for il in sorted(layers)], "devices": devices}

    def close(self) -> None:
        self._servers.close()

    def __enter__(self) -> RpcDevices:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_ggml_base = O._base
_buft_device = O._bind(_ggml_base, "ggml_backend_buft_get_device", C.c_void_p, C.c_void_p)
_buft_is_host = O._bind(_ggml_base, "ggml_backend_buft_is_host", C.c_bool, C.c_void_p)
_backend_get_device = O._bind(_ggml_base, "ggml_backend_get_device", C.c_void_p, C.c_void_p)
_dev_type = O._bind(_ggml_base, "ggml_backend_dev_type", C.c_int, C.c_void_p)
_dev_buffer_type = O._bind(_ggml_base, "ggml_backend_dev_buffer_type", C.c_void_p, C.c_void_p)
_cpu_buffer_type = O._bind(C.CDLL(str(O._LIB / "libggml-cpu.so")), "ggml_backend_cpu_buffer_type", C.c_void_p)
# std::map<ggml_backend_buffer_type_t, llama_memory_breakdown_data> llama_get_memory_breakdown(const llama_context *)
# (src/llama-ext.h), returned through a hidden pointer as the Itanium C++ ABI does, read as libstdc++'s tree
_breakdown = O._bind(O._llama, "_Z26llama_get_memory_breakdownPK13llama_context", C.c_void_p, C.c_void_p, C.c_void_p)


def _backend_device(backend: int) -> int | None:
    """The device a scheduler backend runs on, None for the CPU."""
    dev = _backend_get_device(backend)
    return None if _dev_type(dev) == 0 else dev


def _memory_breakdown(ctx: int) -> list[dict]:
    """Bytes of model, context (KV and recurrent state) and planned compute per buffer type, with the buffer
    type's device (None for the CPU's: host buffers and its extra buffer types, such as repacked weights).

    libstdc++'s std::map is 48 bytes: a header node (color, parent = root, leftmost, rightmost) then the node
    count; each tree node holds color, parent, left and right, then the key and the value (three size_t)."""
    out = (C.c_uint8 * 48)()
    _breakdown(C.addressof(out), ctx)
    header = (C.c_uint64 * 6).from_buffer(out)
    rows, stack, node = [], [], header[2]
    while stack or node:
        while node:
            stack.append(node)
            node = (C.c_uint64 * 4).from_address(node)[2]
        node = stack.pop()
        buft, model, context, compute = (C.c_uint64 * 4).from_address(node + 32)
        device = None if _buft_is_host(buft) else _buft_device(buft)
        if device is not None and _dev_type(device) == 0:  # the CPU's extra buffer types (CPU_REPACK, ...)
            device = None
        rows.append({"device": device, "model": model, "context": context, "compute": compute})
        node = (C.c_uint64 * 4).from_address(node)[3]
    if len(rows) != header[5]:
        raise RuntimeError(f"read {len(rows)} buffer types of llama_get_memory_breakdown's {header[5]}")
    return rows  # the map's nodes are not freed: a few dozen bytes per call


def fit_params(path: str | Path, free: Sequence[int], args: Sequence[str] = ()) -> dict:
    """What llama-fit-params (in LLAMA_CPP_LIB_PATH) chooses for `path` on RPC devices with `free` bytes each:
    {"ctx_size", "n_gpu_layers", "tensor_split", "overrides": [[pattern, buffer]]} (an RPC buffer as RPCi, i its
    device's place), or {"failed": its last error line}."""
    binary = O._LIB / "llama-fit-params"
    servers = _Servers(free)
    try:
        run = subprocess.run([str(binary), "-m", str(path), "--rpc", ",".join(servers.endpoints), *args],
                             capture_output=True, text=True, timeout=900)  # fmt: skip
    finally:
        servers.close()
    if run.returncode != 0:
        errors = [line for line in run.stderr.splitlines() if "fail" in line or "error" in line]
        return {"failed": errors[-1].strip() if errors else run.stderr[-300:]}
    m = re.fullmatch(r'-c (\d+) -ngl (-?\d+)(?: -ts ([\d,]+))?(?: -ot "(.*)")?', run.stdout.strip())
    if m is None:
        raise RuntimeError(f"llama-fit-params printed {run.stdout!r}")
    overrides = []
    for item in m[4].split(",") if m[4] else []:
        pattern, _, buffer = item.rpartition("=")
        rpc = re.fullmatch(r"RPC\d+\[(.*)\]", buffer)  # an RPC buffer names its server: RPC0[host:port]
        overrides.append([pattern, f"RPC{servers.endpoints.index(rpc[1])}" if rpc else buffer])
    return {
        "ctx_size": int(m[1]),
        "n_gpu_layers": int(m[2]),
        "tensor_split": [int(x) for x in m[3].split(",")] if m[3] else [],
        "overrides": overrides,
    }


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"]:
        sys.exit("usage: llama_devices_oracle.py serve PORT FREE_BYTES (started by RpcDevices)")
    serve(int(sys.argv[2]), int(sys.argv[3]))
    os._exit(0)
