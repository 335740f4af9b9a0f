"""The IQ codebooks shipped as package data, the search tables derived from them, and the helpers
that reproduce ggml's scalar arithmetic."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from weightkit.quant._scale_search import nearest_int, seq_sum
from weightkit.quant.iq_math import best_index
from weightkit.quant.iq_tables import codebooks, grid_search, levels, pack_keys, packed_levels, sign_bits

from ..scripts import load_script

REPO = Path(__file__).resolve().parents[2]

# sha256 of each table's little-endian bytes, as extracted from ggml-common.h
TABLES = {
    "kmask_iq2xs": ("|u1", (8,), "5ac9831b2e30eb285ef34f8501620f878432d5c04331ad1ae47f977a83ba41a5"),
    "ksigns_iq2xs": ("|u1", (128,), "a76742a603f8beca5212ecce0f1f02f11a4887fd2f7c8b15aca0ea3eb3380c31"),
    "iq2xxs_grid": ("<u8", (256,), "05826b5d3e472a3a78f196be62ac78acf81df0f909626e12ab9fa2a5d490dd54"),
    "iq2xs_grid": ("<u8", (512,), "06e47aaca60b4dc1d9b5a3f34540437058a6b142b4d7a59d5ded769b4d1bf1de"),
    "iq2s_grid": ("<u8", (1024,), "e1aa1473412b0552c2174c30ef22ab4073f6a181b85a17056e8249bd2932fd88"),
    "iq3xxs_grid": ("<u4", (256,), "46e35f5a997efdee6c99ce57854c8a0d4f0ff8ca57e5e8a60c0793ea580acf5d"),
    "iq3s_grid": ("<u4", (512,), "bd1af4945a1717c65610b0284e4628b9a1ba3b306fae3a06f6e5f597356e349f"),
    "iq1s_grid": ("<u8", (2048,), "07540ffc1aeaf6ad4d97e96b0fcc765aae39671d4ae4a27bbd0e796fde167c6a"),
    "kvalues_iq4nl": ("|i1", (16,), "61aa47540aa024b5d6ddaa839b84ffe59f3d5a349af5c6c7ffcb5e0474b46163"),
    "IQ1S_DELTA": ("<f4", (), "31b67dba7cfd6e2d7540f9c96d90a45b8f2d44956620723024d4e1beeacd4602"),
    "IQ1M_DELTA": ("<f4", (), "31b67dba7cfd6e2d7540f9c96d90a45b8f2d44956620723024d4e1beeacd4602"),
}
# distinct coordinate values of each grid
GRID_VALUES = {
    "iq2xxs_grid": [8, 25, 43],
    "iq2xs_grid": [8, 25, 43],
    "iq2s_grid": [8, 25, 43],
    "iq3xxs_grid": [4, 12, 20, 28, 36, 44, 52, 62],
    "iq3s_grid": [1, 3, 5, 7, 9, 11, 13, 15],
    "iq1s_grid": [-1, 0, 1],
}
# total neighbour-list lengths of ggml's iq2xs_init_impl / iq3xs_init_impl tables
NEIGHBOURS = {
    "iq2xxs_grid": 113157,
    "iq2xs_grid": 181721,
    "iq2s_grid": 44716,
    "iq1s_grid": 327721,
    "iq3xxs_grid": 18985,
    "iq3s_grid": 24733,
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_table_bytes(name: str) -> None:
    dtype, shape, sha = TABLES[name]
    arr = codebooks()[name]
    assert arr.dtype.str == dtype and arr.shape == shape
    assert hashlib.sha256(arr.tobytes()).hexdigest() == sha
    assert not arr.flags.writeable


def test_table_set() -> None:
    assert set(codebooks()) == set(TABLES)


@pytest.mark.parametrize("name", sorted(GRID_VALUES))
def test_grid_structure(name: str) -> None:
    grid = codebooks()[name]
    coords = grid.view(np.int8).reshape(grid.size, -1)
    assert sorted(np.unique(coords)) == GRID_VALUES[name]
    assert len(np.unique(grid)) == grid.size  # no entry twice
    # ggml's quantizers key entries by packed levels, and the grids are sorted by that key
    assert np.all(np.diff(packed_levels(grid)) > 0)
    assert levels(grid).max() == len(GRID_VALUES[name]) - 1


def test_signs_and_values() -> None:
    t = codebooks()
    assert list(t["kmask_iq2xs"]) == [1 << j for j in range(8)]
    ks = t["ksigns_iq2xs"].astype(np.int64)
    assert np.array_equal(ks & 127, np.arange(128))  # the low 7 bits are the index
    assert np.all(np.bitwise_count(ks.astype(np.uint8)) % 2 == 0)  # bit 7 restores even parity
    assert np.array_equal(sign_bits()[5], [True, False, True] + [False] * 4 + [False])
    kv = t["kvalues_iq4nl"]
    assert kv[0] == -127 and kv[-1] == 113 and np.all(np.diff(kv.astype(int)) > 0)
    assert t["IQ1S_DELTA"] == np.float32(0.125) == t["IQ1M_DELTA"]


@pytest.mark.parametrize(("width", "bits"), [(8, 2), (4, 3)])
def test_pack_keys_puts_coordinate_k_at_bits_times_k(width: int, bits: int) -> None:
    lv = np.random.default_rng(width).integers(0, 1 << bits, (3, 500, width))
    want = (lv << (bits * np.arange(width))).sum(axis=-1)
    assert np.array_equal(pack_keys(lv), want)
    assert np.array_equal(pack_keys(lv.astype(np.int8)[:, ::2]), want[:, ::2])  # any int dtype, strided too


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_grid_search_tables(name: str) -> None:
    gs = grid_search(name)
    grid = codebooks()[name]
    assert np.array_equal(gs.kmap[packed_levels(grid)], np.arange(grid.size))
    assert len(gs.flat) == gs.count.sum() == NEIGHBOURS[name]
    # spot-check neighbour lists against a brute-force search: every entry within the `nwant`
    # smallest distinct distances, ordered by (distance, entry)
    nwant = {"iq2s_grid": 1, "iq1s_grid": 3, "iq3s_grid": 3}.get(name, 2)
    lv = gs.levels.astype(np.int64)
    off = np.flatnonzero(gs.count)
    for key in np.random.default_rng(0).choice(off, 40, replace=False):
        point = (key >> (gs.bits * np.arange(gs.width))) & ((1 << gs.bits) - 1)
        d2 = ((lv - point) ** 2).sum(axis=1)
        cutoff = np.unique(d2)[nwant - 1]
        expected = sorted(np.flatnonzero(d2 <= cutoff), key=lambda j: (d2[j], j))
        got = gs.flat[gs.start[key] : gs.start[key] + gs.count[key]]
        assert list(got) == expected
        assert gs.kmap[key] < 0


def test_nearest_int_rounds_half_to_even() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.7, -3.7, 0.0], dtype=np.float32)
    assert list(nearest_int(x)) == [0, 2, 2, 0, -2, -2, 0, 4, -4, 0]


def test_best_index_matches_ggml_search() -> None:
    values = codebooks()["kvalues_iq4nl"].astype(np.float32)
    mid = (values[:-1] + values[1:]) / 2
    rng = np.random.default_rng(6)
    near = [np.nextafter(mid, np.float32(side * np.inf)) for side in (-1, 1)]  # one ulp either side
    x = np.concatenate([
        values, np.nextafter(values, np.float32(-np.inf)), np.nextafter(values, np.float32(np.inf)), mid, *near,
        mid - 0.25, rng.uniform(-140, 130, 4000), rng.standard_normal(500) * 10.0 ** rng.integers(-40, 38, 500),
        [-1000, 1000, 0.0, -0.0, 1e-45, -1e-45, np.inf, -np.inf, np.nan],
    ]).astype(np.float32)  # fmt: skip

    def ggml(v: float) -> int:  # best_index_int8, transcribed
        if v <= values[0]:
            return 0
        if v >= values[-1]:
            return 15
        ml, mu = 0, 15
        while mu - ml > 1:
            mav = (ml + mu) // 2
            if v < values[mav]:
                mu = mav
            else:
                ml = mav
        return mu - 1 if np.float32(v - values[mu - 1]) < np.float32(values[mu] - v) else mu

    assert list(best_index(values, x)) == [ggml(v) for v in x]


def test_seq_sum_along_rows_is_left_to_right() -> None:
    t = (np.random.default_rng(1).standard_normal((50, 37)) * 10.0 ** np.arange(-3, 4).repeat(6)[:37]).astype(
        np.float32
    )
    expected = np.zeros(50, dtype=np.float32)
    for j in range(t.shape[1]):
        expected = expected + t[:, j]
    assert np.array_equal(seq_sum(t, axis=-1), expected)
    assert np.array_equal(seq_sum(t[None], axis=2)[0], expected)
    assert np.array_equal(seq_sum(t[:1, :], axis=-1), expected[:1])  # a single row: nothing left to slice
    for shape, axis in (((1, 3), -1), ((3, 2), 0), ((3,), 0)):  # C's sum starts from +0: never -0
        assert np.signbit(seq_sum(np.full(shape, -0.0, dtype=np.float32), axis=axis)).sum() == 0


def test_make_iq_tables_parser() -> None:
    """The extraction script reads GGML_TABLE blocks and #defines as ggml-common.h writes them."""
    mod = load_script(REPO / "tools" / "make_iq_tables.py")
    header = """
        #define IQ1S_DELTA 0.125f
        GGML_TABLE_BEGIN(int8_t, kvalues_iq4nl, 16)
            -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
        GGML_TABLE_END()
        GGML_TABLE_BEGIN(uint64_t, iq1s_grid_gpu, 2)
            0x1, 0x2,
        GGML_TABLE_END()
        GGML_TABLE_BEGIN(uint64_t, iq1s_grid, 2)
            0xffffffffffffffff, 0x0101010101010101,
        GGML_TABLE_END()
    """
    assert mod.parse_table(header, "kvalues_iq4nl") == ("int8_t", list(codebooks()["kvalues_iq4nl"]))
    assert mod.parse_table(header, "iq1s_grid") == ("uint64_t", [2**64 - 1, 0x0101010101010101])
    assert mod.parse_define(header, "IQ1S_DELTA") == 0.125
