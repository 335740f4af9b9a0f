"""llama.cpp's handcrafted GGUF files (`get_handcrafted_file` in tests/test-gguf.cpp), rewritten in Python so
that for a seed and a kind they are the bytes the C++ test writes; and the random keys and tensors of its round
trips (`get_random_gguf_context`).

The C++ draws from `std::mt19937` and shuffles with libstdc++'s `std::shuffle`; `Mt19937` and `shuffle` below
draw the same numbers in the same order (GCC 12's `uniform_int_distribution` on a 32-bit generator is Lemire's
nearly-divisionless method, and its shuffle draws one number per two swaps when the range allows).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import struct

import numpy as np

from weightkit.dtypes import GGML_TYPES, GGMLType

_U64 = 2**64 - 1
GGUF_TYPE_COUNT = 13
GGML_TYPE_COUNT = 43
GGUF_DEFAULT_ALIGNMENT = 32
# gguf_type_size: bytes of one value of each GGUF value type (0 for STRING and ARRAY)
GGUF_TYPE_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 8: 0, 9: 0, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY, _INT32, _UINT32 = 8, 9, 5, 4

_HAS_KV, _HAS_TENSORS, _HAS_DATA = 1000, 2000, 3000


class Kind(enum.IntEnum):
    """`handcrafted_file_type`, with upstream's numbers (their order decides what each file holds)."""

    HEADER_BAD_MAGIC = 10
    HEADER_BAD_VERSION_0 = 15
    HEADER_BAD_VERSION_1 = 20
    HEADER_BAD_VERSION_FUTURE = 30
    HEADER_BAD_N_TENSORS = 40
    HEADER_BAD_N_KV = 50
    HEADER_EMPTY = 800
    KV_BAD_KEY_SIZE = 10 + _HAS_KV
    KV_EMPTY_KEY = 15 + _HAS_KV
    KV_BAD_TYPE = 20 + _HAS_KV
    KV_DUPLICATE_KEY = 40 + _HAS_KV
    KV_BAD_ALIGN = 50 + _HAS_KV
    KV_WRONG_TYPE_ALIGN = 55 + _HAS_KV
    KV_SUCCESS = 800 + _HAS_KV
    TENSORS_BAD_NAME_SIZE = 10 + _HAS_TENSORS
    TENSORS_BAD_N_DIMS = 20 + _HAS_TENSORS
    TENSORS_BAD_SHAPE = 30 + _HAS_TENSORS
    TENSORS_ZERO_DIM = 35 + _HAS_TENSORS
    TENSORS_NE_TOO_BIG = 40 + _HAS_TENSORS
    TENSORS_NBYTES_TOO_BIG = 45 + _HAS_TENSORS
    TENSORS_NBYTES_PAD_WRAP = 46 + _HAS_TENSORS
    TENSORS_BAD_TYPE = 50 + _HAS_TENSORS
    TENSORS_BAD_OFFSET = 60 + _HAS_TENSORS
    TENSORS_DUPLICATE_NAME = 70 + _HAS_TENSORS
    TENSORS_BAD_ALIGN = 75 + _HAS_TENSORS
    TENSORS_INCONSISTENT_ALIGN = 80 + _HAS_TENSORS
    TENSORS_SUCCESS = 800 + _HAS_TENSORS
    TENSORS_CUSTOM_ALIGN = 810 + _HAS_TENSORS
    DATA_NOT_ENOUGH_DATA = 10 + _HAS_DATA
    DATA_BAD_ALIGN = 15 + _HAS_DATA
    DATA_INCONSISTENT_ALIGN = 20 + _HAS_DATA
    DATA_MEM_SIZE_OVERFLOW = 30 + _HAS_DATA
    DATA_SUCCESS = 800 + _HAS_DATA
    DATA_CUSTOM_ALIGN = 810 + _HAS_DATA

    @property
    def has_data(self) -> bool:
        """Upstream opens these with a ggml context (tensor data read); the others without (header only)."""
        return self >= _HAS_DATA

    @property
    def expect_success(self) -> bool:
        """`expect_context_not_null`: whether ggml is meant to open the file."""
        if self == Kind.TENSORS_ZERO_DIM:
            return True
        return self % 1000 >= 800


_ALIGNMENT_KEY = {
    Kind.KV_BAD_ALIGN, Kind.KV_WRONG_TYPE_ALIGN, Kind.TENSORS_BAD_ALIGN, Kind.TENSORS_CUSTOM_ALIGN,
    Kind.DATA_BAD_ALIGN, Kind.DATA_CUSTOM_ALIGN,
}  # fmt: skip


class Mt19937:
    """`std::mt19937(seed)`: numpy's legacy seeding is the same `init_genrand`. Draws are buffered; a copy
    keeps the state as a snapshot and makes a generator of it only if it draws past the buffer."""

    _CHUNK = 4096  # more than any one handcrafted file draws after its tensor configs and kv types

    def __init__(self, seed: int) -> None:
        self._state: np.random.RandomState | None = np.random.RandomState(seed)
        self._snapshot: tuple | None = None
        self._buf: list[int] = []
        self._pos = 0

    def __call__(self) -> int:
        return self.take(1)[0]

    def take(self, n: int) -> list[int]:
        """The next `n` outputs."""
        while self._pos + n > len(self._buf):
            if self._state is None:
                self._state = np.random.RandomState(0)  # any seed: its state is replaced at once
                self._state.set_state(self._snapshot)
            more = self._state.randint(0, 2**32, self._CHUNK, dtype=np.uint32).tolist()
            self._buf = self._buf[self._pos :] + more
            self._pos = 0
        out = self._buf[self._pos : self._pos + n]
        self._pos += n
        return out

    def words(self, n: int) -> bytes:
        """The next `n` outputs as little-endian uint32 bytes (drawn in bulk: tensor data takes millions)."""
        held = len(self._buf) - self._pos
        if n <= held:
            return struct.pack(f"<{n}I", *self.take(n))
        if self._state is None:
            self._state = np.random.RandomState(0)
            self._state.set_state(self._snapshot)
        head = np.array(self._buf[self._pos :], "<u4")
        self._buf, self._pos = [], 0
        return head.tobytes() + self._state.randint(0, 2**32, n - held, dtype="<u4").tobytes()

    def copy(self) -> Mt19937:
        """A generator in the same state (C++ passes `std::mt19937` by value)."""
        twin = Mt19937.__new__(Mt19937)
        twin._state = None
        twin._snapshot = self._snapshot if self._state is None else self._state.get_state()
        twin._buf, twin._pos = self._buf, self._pos  # never changed in place: `take` makes a new list
        return twin


def uniform_below(rng: Mt19937, n: int) -> int:
    """libstdc++'s `uniform_int_distribution{0, n - 1}(rng)` on a 32-bit generator (n < 2^32)."""
    product = rng() * n
    low = product & 0xFFFFFFFF
    if low < n:
        threshold = (2**32 - n) % n
        while low < threshold:
            product = rng() * n
            low = product & 0xFFFFFFFF
    return product >> 32


def shuffle(items: list, rng: Mt19937) -> None:
    """libstdc++'s `std::shuffle` for fewer than 2^16 items: one draw decides two swaps."""
    n = len(items)
    if n == 0:
        return
    i = 1
    if n % 2 == 0:
        j = uniform_below(rng, 2)
        items[i], items[j] = items[j], items[i]
        i += 1
    while i != n:
        span = i + 1
        x = uniform_below(rng, span * (span + 1))
        for j in (x // (span + 1), x % (span + 1)):
            items[i], items[j] = items[j], items[i]
            i += 1


_TYPE_SIZES = {int(t): (info.type_size, info.block_size) for t, info in GGML_TYPES.items()}


def type_size(t: int) -> int:
    """`ggml_type_size` (0 for the types ggml removed)."""
    return _TYPE_SIZES[t][0]


def block_size(t: int) -> int:
    """`ggml_blck_size`."""
    return _TYPE_SIZES[t][1]


def row_size(t: int, ne: int) -> int:
    """`ggml_row_size`, with size_t's wrap-around."""
    return ((type_size(t) * ne) & _U64) // block_size(t)


def pad(x: int, n: int) -> int:
    """`GGML_PAD` on uint64 (a mask, so not a multiple for an `n` that is no power of two)."""
    return (x + n - 1) & (_U64 ^ (n - 1))


def tensor_configs(rng: Mt19937) -> list[tuple[int, list[int]]]:
    """`get_tensor_configs`: (type, ne) of up to 100 tensors."""
    configs = []
    for _ in range(100):
        t = rng() % GGML_TYPE_COUNT
        if type_size(t) == 0:
            continue
        shape = [1, 1, 1, 1]
        shape[0] = (1 + rng() % 10) * block_size(t)
        n_dims = 1 + rng() % 4
        for i in range(1, n_dims):
            shape[i] = 1 + rng() % 10
        configs.append((t, shape))
    return configs


def kv_types(rng: Mt19937) -> list[tuple[int, int]]:
    """`get_kv_types` (which takes its generator by value: `rng` is left as it was)."""
    rng = rng.copy()
    types = []
    for _ in range(100):
        t = rng() % GGUF_TYPE_COUNT
        if t == _ARRAY:
            t_arr = rng() % GGUF_TYPE_COUNT
            if t_arr != _ARRAY:
                types.append((t, t_arr))
            continue
        types.append((t, -1))
    shuffle(types, rng)
    return types


def _u64(n: int) -> bytes:
    return struct.pack("<Q", n & _U64)


def _i64s(values: list[int]) -> bytes:
    return struct.pack(f"<{len(values)}q", *values)


def _gguf_string(s: bytes) -> bytes:
    return _u64(len(s)) + s


def _pad_file(out: bytearray, alignment: int) -> None:
    while len(out) % alignment:
        out.append(0)


@functools.lru_cache(maxsize=1)
def _drawn(seed: int) -> tuple[list[tuple[int, list[int]]], list[tuple[int, int]], Mt19937]:
    """What every kind with tensors draws first: the tensor configs, the kv types, and the generator after."""
    rng = Mt19937(seed)
    configs = tensor_configs(rng)
    return configs, kv_types(rng), rng.copy()


def handcrafted_file(seed: int, kind: Kind) -> bytes:
    """The bytes `get_handcrafted_file(seed, kind)` writes."""
    if kind >= _HAS_TENSORS:
        configs, kvs, rng = _drawn(seed)
    else:  # no tensor configs drawn: the kv types come straight from the seed
        rng = Mt19937(seed)
        configs = []
        kvs = kv_types(rng) if kind >= _HAS_KV else []
    alignment = GGUF_DEFAULT_ALIGNMENT
    out = bytearray(b"FUGG" if kind == Kind.HEADER_BAD_MAGIC else b"GGUF")
    version = {Kind.HEADER_BAD_VERSION_0: 0, Kind.HEADER_BAD_VERSION_1: 1, Kind.HEADER_BAD_VERSION_FUTURE: 4}
    out += struct.pack("<I", version.get(kind, 3))

    if kind == Kind.DATA_MEM_SIZE_OVERFLOW:
        configs = [(GGMLType.I8, [0x7FFFFFFFFFFFFFC0, 1, 1, 1])] * 2
    if kind == Kind.TENSORS_NBYTES_PAD_WRAP:  # ggml_nbytes = 2^64 - 16: padding it wraps to 0
        configs = [(GGMLType.F32, [4, 2**30 - 1, 2**30 + 1, 1])]
    out += _u64(-1 if kind == Kind.HEADER_BAD_N_TENSORS else len(configs))

    n_kv = len(kvs) + (kind in _ALIGNMENT_KEY)
    out += _u64(-1 if kind == Kind.HEADER_BAD_N_KV else n_kv)
    if kind < _HAS_KV:
        _pad_file(out, alignment)
        return bytes(out)

    out += _shared_kvs(seed) if kind >= _HAS_TENSORS else _kv_section(kind, kvs, rng)
    if kind in _ALIGNMENT_KEY:
        out += _gguf_string(b"general.alignment")
        out += struct.pack("<i", _INT32 if kind == Kind.KV_WRONG_TYPE_ALIGN else _UINT32)
        alignment = 1 if kind.expect_success else 13
        out += struct.pack("<I", alignment)
    if kind < _HAS_TENSORS:
        _pad_file(out, alignment)
        return bytes(out)

    if kind in (Kind.TENSORS_INCONSISTENT_ALIGN, Kind.DATA_INCONSISTENT_ALIGN):
        alignment = 1
    offset = _write_tensor_infos(out, kind, configs, alignment)
    _pad_file(out, alignment)
    if kind.has_data:
        nbytes = {Kind.DATA_NOT_ENOUGH_DATA: offset - 1, Kind.DATA_MEM_SIZE_OVERFLOW: 32}.get(kind, offset)
        out += (bytes(range(256)) * (nbytes // 256 + 1))[:nbytes]
    return bytes(out)


@functools.lru_cache(maxsize=1)
def _shared_kvs(seed: int) -> bytes:
    """The metadata section every kind with tensors writes alike (but for its alignment key)."""
    _, kvs, rng = _drawn(seed)
    return _kv_section(Kind.TENSORS_SUCCESS, kvs, rng.copy())


def _kv_section(kind: Kind, kvs: list[tuple[int, int]], rng: Mt19937) -> bytes:
    out = bytearray()
    for i, (t, t_arr) in enumerate(kvs):
        if kind == Kind.KV_BAD_TYPE:
            t = t_arr = GGUF_TYPE_COUNT
        key = b"" if kind == Kind.KV_EMPTY_KEY else b"my_key_%d" % (i // 2 if kind == Kind.KV_DUPLICATE_KEY else i)
        out += _u64(-1) if kind == Kind.KV_BAD_KEY_SIZE else _u64(len(key))
        out += key + struct.pack("<i", t)
        words = rng.take(16)
        if _STRING in (t, t_arr):  # upstream keeps NULs out of strings
            words = [w | 0x01010101 for w in words]
        data = struct.pack("<16I", *words)
        if t == _STRING:
            n = rng() % len(data)
            out += _u64(n) + data[:n]
        elif t == _ARRAY:
            out += struct.pack("<i", t_arr)
            if t_arr == _STRING:
                n_str = rng() % 17
                out += _u64(n_str)
                for j in range(n_str):
                    n = rng() % 5
                    out += _u64(n) + data[4 * j : 4 * j + n]
            else:
                size = GGUF_TYPE_SIZE[t_arr]
                n = (rng() % len(data)) // size
                out += _u64(n) + data[: n * size]
        else:
            out += data[: 1 if kind == Kind.KV_BAD_TYPE else GGUF_TYPE_SIZE[t]]
    return bytes(out)


def _write_tensor_infos(out: bytearray, kind: Kind, configs: list[tuple[int, list[int]]], alignment: int) -> int:
    """The tensor infos; returns the size of the data section they describe."""
    offset = 0
    for i, (config_type, shape) in enumerate(configs):
        t = GGMLType.I64 if kind == Kind.TENSORS_NBYTES_TOO_BIG else config_type
        name = b"my_tensor" if kind == Kind.TENSORS_DUPLICATE_NAME else b"my_tensor_%d" % i
        if kind == Kind.TENSORS_BAD_NAME_SIZE:
            name += b"_with_a_very_long_name_which_is_longer_than_what_is_allowed_for_ggml_tensors"
        out += _gguf_string(name)
        n_dims = 2 if kind in (Kind.TENSORS_NE_TOO_BIG, Kind.TENSORS_NBYTES_TOO_BIG) else 1
        n_dims = next((d + 1 for d in (3, 2, 1) if shape[d] != 1), n_dims)
        if kind == Kind.TENSORS_ZERO_DIM:
            n_dims = 2
        out += struct.pack("<I", 5 if kind == Kind.TENSORS_BAD_N_DIMS else n_dims)
        if kind == Kind.TENSORS_BAD_SHAPE:
            out += _i64s([-1] * n_dims)
        elif kind == Kind.TENSORS_ZERO_DIM:
            out += _i64s([shape[0], 0])
        elif kind == Kind.TENSORS_NE_TOO_BIG:
            out += _i64s([4 * (2**31 - 1)] * n_dims)
        elif kind == Kind.TENSORS_NBYTES_TOO_BIG:
            big_ne = _U64 // type_size(t)
            # int64_t(1.01f * std::pow(big_ne, 1.0f / n_dims)): a float's 1.01 and 1/n_dims, a double's pow
            root = float(np.float32(1.01)) * math.pow(float(big_ne), float(np.float32(1) / np.float32(n_dims)))
            out += _i64s([pad(int(root) + 1, block_size(t))] * n_dims)
        else:
            out += _i64s(shape[:n_dims])
        out += struct.pack("<i", GGML_TYPE_COUNT if kind == Kind.TENSORS_BAD_TYPE else t)
        out += _u64(-1 if kind == Kind.TENSORS_BAD_OFFSET else offset)
        ne = 0 if kind == Kind.TENSORS_ZERO_DIM else math.prod(shape[:n_dims])
        offset = (offset + pad(row_size(t, ne), alignment)) & _U64
    return offset


@dataclasses.dataclass
class RandomContext:
    """What `get_random_gguf_context(seed)` puts in its gguf context: keys in ggml's order, each as (GGUF type,
    element type or None, value: an int, float, bool or str, raw bytes of an array's elements, or a list of
    str), and tensors as (name, GGML type, ne as ggml keeps it, data)."""

    kvs: dict[str, tuple[int, int | None, object]]
    tensors: list[tuple[str, int, list[int], bytes]]


def _wrap(x: int, bits: int) -> int:
    """`x` converted to a signed integer of `bits` bits, as C++ converts an unsigned long."""
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def _random_scalar(t: int, rng: Mt19937) -> tuple[int, object]:
    """One `gguf_set_val_*` of the switch in `get_random_gguf_context`: (the type set, the value)."""
    if t in (6, 12):  # FLOAT32, and FLOAT64, which upstream sets with gguf_set_val_f32 too
        return 6, float(np.array((rng() % 1024 - 512) & _U64, np.uint64).astype(np.float32))
    r = rng()
    values = {
        0: lambda: r % (1 << 7), 1: lambda: r % (1 << 7) - (1 << 6), 2: lambda: r % (1 << 15),
        3: lambda: r % (1 << 15) - (1 << 14), 4: lambda: r, 5: lambda: _wrap(r - (1 << 30), 32),
        7: lambda: r % 2 == 0, 8: lambda: str(r), 10: lambda: r, 11: lambda: r - (1 << 30),
    }  # fmt: skip
    return t, values[t]()


def random_gguf_context(seed: int) -> RandomContext:
    """`get_random_gguf_context(seed)` of test-gguf.cpp: 256 random keys (a key set again moves to the end, as
    `gguf_set_val_*` does) and up to 256 random tensors filled with random words."""
    rng = Mt19937(seed)
    kvs: dict[str, tuple[int, int | None, object]] = {}
    for _ in range(256):
        key = f"my_key_{rng() % 1024}"
        t = rng() % GGUF_TYPE_COUNT
        if t != _ARRAY:
            kvs.pop(key, None)
            t, value = _random_scalar(t, rng)
            kvs[key] = (t, None, value)
            continue
        t_arr, n = rng() % GGUF_TYPE_COUNT, rng() % 1024
        if t_arr == _ARRAY:  # upstream sets nothing
            continue
        if t_arr == _STRING:
            value: object = [str(w) for w in rng.take(n)]
        else:
            nbytes = n * GGUF_TYPE_SIZE[t_arr]
            value = rng.words(-(-nbytes // 4))[:nbytes]
            if t_arr == 7:  # BOOL: 0 or 1 per byte
                value = bytes(b & 1 for b in value)
        kvs.pop(key, None)
        kvs[key] = (_ARRAY, t_arr, value)
    shapes = []
    for i in range(256):
        t = rng() % GGML_TYPE_COUNT
        if type_size(t) == 0:
            continue
        n_dims = 1 + rng() % 4
        ne = [(1 + rng() % 10) * block_size(t)] + [1 + rng() % 10 for _ in range(1, n_dims)]
        shapes.append((f"my_tensor_{i}", t, ne))
    tensors = []
    for name, t, ne in shapes:
        nbytes = row_size(t, math.prod(ne))
        tensors.append((name, t, ne, rng.words(-(-nbytes // 4))[:nbytes]))
    return RandomContext(kvs, tensors)
