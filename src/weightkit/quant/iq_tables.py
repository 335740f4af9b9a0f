"""ggml's IQ codebooks (grids, sign tables, non-linear levels), loaded once from package data.

The arrays are copied verbatim from ggml-common.h by tools/make_iq_tables.py. Everything derived from
them (float lookup tables, the quantizers' grid maps) is built on first use and cached; kernels run on a
thread pool, so the caches are filled under a lock and hold read-only arrays.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from importlib import resources
from typing import TypeVar

import numpy as np

_F = TypeVar("_F", bound=Callable)
_lock = threading.RLock()  # re-entrant: a cached builder may call other cached builders


def cached(fn: _F) -> _F:
    """Memoize a table builder; the first caller builds under the lock, later callers just read."""
    cache: dict = {}

    @functools.wraps(fn)
    def wrapper(*args):
        try:
            return cache[args]
        except KeyError:
            pass
        with _lock:
            if args not in cache:
                value = fn(*args)
                for arr in value if isinstance(value, tuple) else (value,):
                    if isinstance(arr, np.ndarray):
                        arr.flags.writeable = False
                cache[args] = value
            return cache[args]

    return wrapper  # type: ignore[return-value]


@cached
def codebooks() -> dict[str, np.ndarray]:
    """The raw tables, named as in ggml-common.h (`iq2xxs_grid`, `ksigns_iq2xs`, `IQ1S_DELTA`, ...)."""
    with resources.files("weightkit.quant").joinpath("data/iq_tables.npz").open("rb") as f, np.load(f) as z:
        tables = {name: z[name] for name in z.files}
    for arr in tables.values():
        arr.flags.writeable = False
    return tables


def grid_bytes(name: str) -> np.ndarray:
    """Grid `name` as a (entries, coordinates) int8 array: 8 coordinates per uint64, 4 per uint32."""
    grid = codebooks()[name]
    return grid.view(np.int8).reshape(grid.size, grid.dtype.itemsize)


def levels(grid: np.ndarray) -> np.ndarray:
    """Each coordinate of a grid as its level: its rank among the distinct values the grid uses."""
    coords = grid.view(np.int8).reshape(grid.size, grid.dtype.itemsize)
    return np.searchsorted(np.unique(coords), coords).astype(np.int8)


def pack_keys(lv: np.ndarray) -> np.ndarray:
    """Levels (..., width) packed as ggml's quantizers key them: coordinate k at bit 2k (8-wide grids,
    levels < 4) or 3k (4-wide grids, levels < 8), as int64.

    Each vector's levels are bytes of one little-endian word, whose fields are merged pairwise by shifts
    and masks: three long ufunc loops instead of a sum along rows of 4 or 8."""
    width = lv.shape[-1]
    b = np.ascontiguousarray(lv, dtype=np.uint8)
    if width == 8:
        w = b.view(np.uint64)[..., 0]
        w = (w | (w >> np.uint64(6))) & np.uint64(0x000F000F000F000F)  # pairs: 4 bits every 16
        w = (w | (w >> np.uint64(12))) & np.uint64(0x000000FF000000FF)  # quads: 8 bits every 32
        w = (w | (w >> np.uint64(24))) & np.uint64(0xFFFF)
    elif width == 4:
        w = b.view(np.uint32)[..., 0]
        w = (w | (w >> np.uint32(5))) & np.uint32(0x003F003F)  # pairs: 6 bits every 16
        w = (w | (w >> np.uint32(10))) & np.uint32(0xFFF)
    else:
        raise ValueError(f"grids are 4 or 8 wide, not {width}")
    return w.astype(np.int64)


def packed_levels(grid: np.ndarray) -> np.ndarray:
    """Each grid entry's levels packed as ggml's quantizers key them (`pack_keys`). These are the
    `kgrid_*` arrays of ggml-quants.c."""
    return pack_keys(levels(grid))


@cached
def sign_bits() -> np.ndarray:
    """(128, 8) bool: which of 8 values `ksigns_iq2xs[i]` negates (bit j, as `kmask_iq2xs[j]` tests)."""
    t = codebooks()
    return (t["ksigns_iq2xs"][:, None] & t["kmask_iq2xs"][None, :]) != 0


class GridSearch:
    """What ggml's `iq2xs_init_impl` / `iq3xs_init_impl` build for a quantizer: the map from packed
    levels to grid entry, and for every point off the grid the entries nearest to it.

    ggml keys a point by its levels (coordinate k at bit `bits * k`); a neighbour list holds every
    grid entry whose squared distance is among the `nwant` smallest distinct distances, ordered by
    (distance, entry). We store the lists flat: `start[key]`, `count[key]` index into `flat`.
    """

    def __init__(self, grid: np.ndarray, nwant: int) -> None:
        lv = levels(grid)
        n_entries, self.width = lv.shape
        self.bits = 2 if self.width == 8 else 3
        n_levels = 3 if self.width == 8 else 8  # quantizers clamp levels to the grid's range
        self.levels = lv
        self.pos = (2 * lv + 1).astype(np.float32)  # ggml's grid values
        self.kmap = np.full(1 << (self.bits * self.width), -1, dtype=np.int32)
        self.kmap[packed_levels(grid)] = np.arange(n_entries)
        points = (np.arange(n_levels**self.width)[:, None] // n_levels ** np.arange(self.width)) % n_levels
        keys = pack_keys(points)
        off = self.kmap[keys] < 0
        points, keys = points[off], keys[off]
        counts, lists = [], []
        for lo in range(0, len(points), 512):  # bounded memory: ~512 x entries distances at a time
            counts_c, list_c = _neighbour_lists(points[lo : lo + 512], lv, nwant)
            counts.append(counts_c)
            lists.append(list_c)
        self.count = np.zeros(len(self.kmap), dtype=np.int64)
        self.count[keys] = np.concatenate(counts)
        self.start = np.zeros(len(self.kmap), dtype=np.int64)
        self.start[keys] = np.cumsum(self.count[keys]) - self.count[keys]
        self.flat = np.concatenate(lists).astype(np.intp)  # intp: gathers by candidate need no index cast
        # coordinate-major copies: neighbour searches gather one coordinate of many entries at a time
        self.levels_t = np.ascontiguousarray(lv.T.astype(np.intp))
        self.pos_t = np.ascontiguousarray(self.pos.T)
        for arr in (self.levels, self.pos, self.kmap, self.count, self.start, self.flat, self.levels_t, self.pos_t):
            arr.flags.writeable = False

    def key(self, lv: np.ndarray) -> np.ndarray:
        """Pack levels (..., width) into ggml's map key."""
        return pack_keys(lv)


def _neighbour_lists(points: np.ndarray, lv: np.ndarray, nwant: int) -> tuple[np.ndarray, np.ndarray]:
    """For each point (levels), the grid entries at its `nwant` smallest distinct squared distances,
    ordered by (distance, entry): their counts and their concatenation."""
    d2 = np.zeros((len(points), len(lv)), dtype=np.int16)
    for k in range(lv.shape[1]):
        d2 += (points[:, k, None] - lv[None, :, k]).astype(np.int16) ** 2
    order = np.argsort(d2, axis=1, kind="stable")  # by distance, then entry
    dist = np.take_along_axis(d2, order, axis=1)
    rank = np.cumsum(np.concatenate([np.zeros((len(dist), 1), bool), dist[:, 1:] != dist[:, :-1]], axis=1), axis=1)
    keep = rank < nwant
    return keep.sum(axis=1), order[keep]


# How many distinct distances each quantizer's neighbour lists cover (ggml's `nwant`).
_NWANT = {"iq2xxs_grid": 2, "iq2xs_grid": 2, "iq2s_grid": 1, "iq1s_grid": 3, "iq3xxs_grid": 2, "iq3s_grid": 3}


@cached
def grid_search(name: str) -> GridSearch:
    return GridSearch(codebooks()[name], _NWANT[name])
