"""Record ggml's verdict on llama.cpp's handcrafted GGUF files into tests/data/gguf_peer_cases.json (needs
llama-cpp-python; the tests only read the JSON).

For every kind of tests/test-gguf.cpp's `get_handcrafted_file` and seeds 0-99, the file that
tests/gguf/handcrafted.py makes is opened with ggml's `gguf_init_from_file` as the C++ test opens it (with a
ggml context, so the tensor data is read, for the DATA_ kinds; without one for the others). Recorded per kind
and seed: whether ggml opened the file, and the sha256 of what `gguf_write_to_file` writes back from it (the
context it read, `only_meta`, where no data was read; else a new context with its metadata and tensors). Per
seed, a digest of the input files, so that a test can tell the generator has drifted.

    python tests/data/make_gguf_peer_cases.py
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("gguf_peer_cases.json")
SEEDS = range(100)


class InitParams(ctypes.Structure):
    """ggml's `struct gguf_init_params`."""

    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.POINTER(ctypes.c_void_p))]


class GGMLInitParams(ctypes.Structure):
    """ggml's `struct ggml_init_params`."""

    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


_SETTERS = {0: ("u8", ctypes.c_uint8), 1: ("i8", ctypes.c_int8), 2: ("u16", ctypes.c_uint16),
            3: ("i16", ctypes.c_int16), 4: ("u32", ctypes.c_uint32), 5: ("i32", ctypes.c_int32),
            6: ("f32", ctypes.c_float), 7: ("bool", ctypes.c_bool), 8: ("str", ctypes.c_char_p),
            10: ("u64", ctypes.c_uint64), 11: ("i64", ctypes.c_int64)}  # fmt: skip


def load_ggml() -> ctypes.CDLL:
    sys.path.insert(0, str(REPO / "tools"))
    import ggml_oracle

    lib = ggml_oracle.lib
    lib.gguf_init_from_file.restype = ctypes.c_void_p
    lib.gguf_init_from_file.argtypes = [ctypes.c_char_p, InitParams]
    lib.gguf_write_to_file.restype = ctypes.c_bool
    lib.gguf_write_to_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_bool]
    lib.gguf_free.argtypes = [ctypes.c_void_p]
    lib.ggml_free.argtypes = [ctypes.c_void_p]
    lib.gguf_init_empty.restype = ctypes.c_void_p
    lib.gguf_set_kv.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.gguf_add_tensor.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.ggml_get_first_tensor.restype = ctypes.c_void_p
    lib.ggml_get_first_tensor.argtypes = [ctypes.c_void_p]
    lib.ggml_get_next_tensor.restype = ctypes.c_void_p
    lib.ggml_get_next_tensor.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    for name, ctype in _SETTERS.values():
        getattr(lib, f"gguf_set_val_{name}").argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctype]
    lib.gguf_set_arr_str.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t]
    lib.gguf_set_arr_data.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    lib.ggml_tensor_overhead.restype = ctypes.c_size_t
    lib.ggml_init.restype = ctypes.c_void_p
    lib.ggml_init.argtypes = [GGMLInitParams]
    lib.ggml_new_tensor.restype = ctypes.c_void_p
    lib.ggml_new_tensor.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    lib.ggml_set_name.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.ggml_get_data.restype = ctypes.c_void_p
    lib.ggml_get_data.argtypes = [ctypes.c_void_p]
    return lib


def copy_with_data(lib: ctypes.CDLL, gguf_ctx: int, ctx: ctypes.c_void_p) -> int:
    """A new gguf context with `gguf_ctx`'s metadata and the tensors ggml read into `ctx`, as llama.cpp's tools
    make one to write tensor data (a context ggml has read holds no tensor data to write)."""
    out = lib.gguf_init_empty()
    lib.gguf_set_kv(out, gguf_ctx)
    t = lib.ggml_get_next_tensor(ctx, lib.ggml_get_first_tensor(ctx))  # after the "binary blob" of all data
    while t:
        lib.gguf_add_tensor(out, t)
        t = lib.ggml_get_next_tensor(ctx, t)
    return out


def ggml_writes_random_context(lib: ctypes.CDLL, seed: int, out: Path) -> str:
    """test-gguf.cpp's `test_roundtrip`: the context `get_random_gguf_context(seed)` makes, built through ggml's
    own setters from tests/gguf/handcrafted.py's port of its draws, written by `gguf_write_to_file`; the
    sha256 of the file."""
    from tests.gguf.handcrafted import random_gguf_context

    made = random_gguf_context(seed)
    gctx = lib.gguf_init_empty()
    for key, (t, element, value) in made.kvs.items():
        k = key.encode()
        if element is None:
            name, ctype = _SETTERS[t]
            getattr(lib, f"gguf_set_val_{name}")(gctx, k, ctype(value.encode() if t == 8 else value))
        elif element == 8:
            strings = (ctypes.c_char_p * len(value))(*(v.encode() for v in value))
            lib.gguf_set_arr_str(gctx, k, strings, len(value))
        else:
            size = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}[element]
            lib.gguf_set_arr_data(gctx, k, element, value, len(value) // size)
    total = sum(len(data) + 64 for *_, data in made.tensors)
    ctx = lib.ggml_init(GGMLInitParams(256 * lib.ggml_tensor_overhead() + total, None, False))
    for name, t, ne, data in made.tensors:
        tensor = lib.ggml_new_tensor(ctx, t, len(ne), (ctypes.c_int64 * len(ne))(*ne))
        lib.ggml_set_name(tensor, name.encode())
        ctypes.memmove(lib.ggml_get_data(tensor), data, len(data))
        lib.gguf_add_tensor(gctx, tensor)
    try:
        assert lib.gguf_write_to_file(gctx, str(out).encode(), False)
        return hashlib.sha256(out.read_bytes()).hexdigest()
    finally:
        lib.gguf_free(gctx)
        lib.ggml_free(ctx)


def ggml_verdict(lib: ctypes.CDLL, path: Path, out: Path, with_data: bool) -> str | None:
    """Open `path` as test-gguf.cpp does; None if ggml refuses it, else the sha256 of what it writes back."""
    ctx = ctypes.c_void_p()
    params = InitParams(False, ctypes.pointer(ctx) if with_data else None)
    gguf_ctx = lib.gguf_init_from_file(str(path).encode(), params)
    if not gguf_ctx:
        assert not ctx.value, "ggml left a context behind for a file it refused"
        return None
    written = copy_with_data(lib, gguf_ctx, ctx) if with_data else gguf_ctx
    try:
        assert lib.gguf_write_to_file(written, str(out).encode(), not with_data)
        return hashlib.sha256(out.read_bytes()).hexdigest()
    finally:
        if with_data:
            lib.gguf_free(written)
            lib.ggml_free(ctx)
        lib.gguf_free(gguf_ctx)


def main() -> None:
    sys.path.insert(0, str(REPO))
    from tests.gguf.handcrafted import Kind, handcrafted_file

    lib = load_ggml()
    opens = {k.name: "" for k in Kind}
    written: dict[str, list[str | None]] = {k.name: [] for k in Kind}
    files, random_contexts = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / "in.gguf", Path(tmp) / "out.gguf"
        for seed in SEEDS:
            digest = hashlib.sha256()
            for kind in Kind:
                data = handcrafted_file(seed, kind)
                digest.update(hashlib.sha256(data).digest())
                path.write_bytes(data)
                sha = ggml_verdict(lib, path, out, kind.has_data)
                opens[kind.name] += "1" if sha else "0"
                written[kind.name].append(sha)
            files.append(digest.hexdigest())
            random_contexts.append(ggml_writes_random_context(lib, seed, out))
    doc = {
        "source": "llama.cpp tests/test-gguf.cpp and ggml/src/gguf.cpp, as llama-cpp-python 0.3.36 bundles them",
        "opens": opens,  # per kind, one character per seed: 1 where gguf_init_from_file opened the file
        "written_sha256": {name: shas for name, shas in written.items() if any(shas)},
        "files_sha256": files,  # per seed: sha256 of the sha256s of its files, in the order of Kind
        "random_context_sha256": random_contexts,  # per seed: what ggml writes of get_random_gguf_context
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
