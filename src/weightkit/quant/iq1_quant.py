"""IQ1_S and IQ1_M quantizers, byte-exact with ggml's `quantize_iq1_s` / `quantize_iq1_m`.

With only three levels (-1, 0, 1) shifted by ±IQ1S_DELTA, ggml solves each group's weighted fit
exhaustively: sort the weights, try every pair of cut points splitting them into the three levels
(and, for IQ1_M, every choice of shift per half group), keep the best, then snap each 8-vector to the
2048-entry grid. We compute every candidate's sums for all groups at once, in ggml's float32 order,
and replay its sequential "keep if strictly better" scan over the candidates.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import GGMLType
from ._scale_search import F32, nearest_int, seq_sum
from .iq_grid_quant import nearest_neighbours, require_imatrix
from .iq_math import fp16_bits
from .iq_tables import GridSearch, cached, codebooks, grid_search


@cached
def _shifted_levels() -> np.ndarray:
    """(2, 3) float32: the values of levels 0, 1, 2 with shift +delta (row 0) and -delta (row 1)."""
    delta = codebooks()["IQ1S_DELTA"]
    lv = np.array([-1, 0, 1], dtype=F32)
    return np.stack([lv + delta, lv - delta])


@cached
def _cut_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """All (i1, i2) with 0 <= i1 <= i2 <= n, in ggml's loop order."""
    i1, i2 = np.triu_indices(n + 1)
    return i1, i2


def _replay(sumqx: np.ndarray, sumq2: np.ndarray) -> np.ndarray:
    """ggml's scan `if (sumq2 > 0 && sumqx*sumqx > best*sumq2) best = (sumqx/sumq2)*sumqx` over
    candidates (rows, in order) for every group (columns): the index of the last kept candidate, -1 if none."""
    square = sumqx * sumqx
    valid = sumq2 > 0
    score = sumqx / sumq2 * sumqx
    best = np.full(sumqx.shape[1], -np.finfo(F32).max, dtype=F32)
    chosen = np.full(sumqx.shape[1], -1, dtype=np.int64)
    bound = np.empty_like(best)
    better = np.empty(best.shape, dtype=bool)
    for c in range(len(sumqx)):
        np.multiply(best, sumq2[c], out=bound)
        np.greater(square[c], bound, out=better)
        better &= valid[c]
        np.copyto(best, score[c], where=better)
        np.copyto(chosen, c, where=better)
    return chosen


def _sorted_order(xb: np.ndarray) -> np.ndarray:
    """ggml sorts with glibc's qsort, a stable merge sort for arrays this small."""
    return np.argsort(xb, axis=1, kind="stable")


def _levels_from_cuts(order: np.ndarray, i1: np.ndarray, i2: np.ndarray) -> np.ndarray:
    """Level 0 for the i1 smallest weights, 1 up to rank i2, 2 above (group-wise)."""
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(order.shape[1]), axis=1)
    return (rank >= i1[:, None]).astype(np.int8) + (rank >= i2[:, None])


def _snap(gs: GridSearch, lv: np.ndarray, xb: np.ndarray, w: np.ndarray, scale: np.ndarray, values: np.ndarray):
    """Grid entries for 8-vectors of levels `lv` (m, 8); off-grid ones take the neighbour that best
    fits `xb` with weights `w` at `scale` when levels map to `values` (m, 3). Also returns which were off."""
    entry = gs.kmap[gs.key(lv)]
    off = entry < 0
    if off.any():
        entry[off] = nearest_neighbours(gs, gs.key(lv[off]), xb[off], w[off], scale[off], values[off])
    return entry, off


def _refit(gs: GridSearch, entry: np.ndarray, xb: np.ndarray, w: np.ndarray, values: np.ndarray):
    """sum(w*q*x), sum(w*q*q) over groups with q = values[level] of the chosen entries (m, vectors)."""
    m = len(entry)
    q = np.take_along_axis(values, gs.levels[entry].reshape(m, -1), axis=1)
    return seq_sum(w * q * xb, axis=-1), seq_sum(w * q * q, axis=-1)


def _weights(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """(blocks, 256): imatrix * sqrt(sigma2 + x^2) with sigma2 = 2 * mean(x^2) over the block, or x^2."""
    xb = x.reshape(-1, 256)
    sq = xb * xb
    if imatrix is None:
        return sq
    sigma2 = F32(2) * seq_sum(sq, axis=-1) / F32(256)
    return imatrix.reshape(1, -1, 256) * np.sqrt(sigma2.reshape(len(x), -1, 1) + sq.reshape(len(x), -1, 256))


# -------------------------------------------------------------------------------------------- IQ1_S


def _search_iq1_s(xb: np.ndarray, w: np.ndarray):
    """Groups of 32 -> scale, shift (+1/-1), 4 grid entries; groups ggml skips get scale 0, shift +1
    and entries 0 (what it leaves in the block)."""
    m = len(xb)
    gs = grid_search("iq1s_grid")
    vals = _shifted_levels()
    scale = np.zeros(m, dtype=F32)
    shift = np.ones(m, dtype=np.int64)
    entries = np.zeros((m, 4), dtype=np.int64)
    written = ~(np.abs(xb).max(axis=1) < F32(1e-12))
    rows = np.flatnonzero(written)
    xa, wa = xb[rows], w[rows]
    order = _sorted_order(xa)
    ws = np.take_along_axis(wa, order, axis=1)
    # prefix sums position-major (33, groups), so every candidate below is a contiguous row over the groups
    zero = np.zeros((1, len(rows)), dtype=F32)  # ggml's prefix sums start at 0
    sumx = np.add.accumulate(np.concatenate([zero, (ws * np.take_along_axis(xa, order, axis=1)).T]), axis=0)
    sumw = np.add.accumulate(np.concatenate([zero, ws.T]), axis=0)
    i1, i2 = _cut_pairs(32)
    parts_x = [sumx[i1] - sumx[:1], sumx[i2] - sumx[i1], sumx[32:] - sumx[i2]]
    parts_w = [sumw[i1] - sumw[:1], sumw[i2] - sumw[i1], sumw[32:] - sumw[i2]]
    sumqx = np.empty((len(i1), 2, len(rows)), dtype=F32)
    sumq2 = np.empty_like(sumqx)
    for k, v in enumerate(vals):  # candidates interleave: (pair 0, +delta), (pair 0, -delta), (pair 1, +delta), ...
        sumqx[:, k] = parts_x[0] * v[0] + parts_x[1] * v[1] + parts_x[2] * v[2]
        sumq2[:, k] = parts_w[0] * v[0] * v[0] + parts_w[1] * v[1] * v[1] + parts_w[2] * v[2] * v[2]
    sumqx, sumq2 = sumqx.reshape(2 * len(i1), -1), sumq2.reshape(2 * len(i1), -1)
    chosen = _replay(sumqx, sumq2)
    ok = chosen >= 0
    rows, order, xa, wa, chosen = rows[ok], order[ok], xa[ok], wa[ok], chosen[ok]
    cols = np.flatnonzero(ok)
    sc = sumqx[chosen, cols] / sumq2[chosen, cols]
    sh = np.where(chosen % 2 == 0, 1, -1)
    lv = _levels_from_cuts(order, i1[chosen // 2], i2[chosen // 2])
    flip = sc < 0
    lv[flip] = 2 - lv[flip]
    sc = np.abs(sc)
    sh[flip] = -sh[flip]
    values = vals[(sh < 0).astype(np.int64)]  # (m, 3)
    rep = np.repeat(np.arange(len(rows)), 4)
    entry, off = _snap(gs, lv.reshape(-1, 8), xa.reshape(-1, 8), wa.reshape(-1, 8), sc[rep], values[rep])
    entry = entry.reshape(-1, 4)
    refit = off.reshape(-1, 4).any(axis=1)
    if refit.any():
        sqx, sq2 = _refit(gs, entry[refit], xa[refit], wa[refit], values[refit])
        sc[refit] = np.where((sqx > 0) & (sq2 > 0), sqx / sq2, sc[refit])
    scale[rows], shift[rows], entries[rows] = sc, sh, entry
    return scale, shift, entries


def quantize_iq1_s(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """50-byte blocks: f16 d, 32 low grid-entry bytes, 8 uint16 (4x3 entry high bits, 3-bit scale, shift sign)."""
    require_imatrix("IQ1_S", imatrix)
    n = x.size // 256
    with np.errstate(all="ignore"):
        w = _weights(x, imatrix)
        scale, shift, entries = _search_iq1_s(x.reshape(-1, 32), w.reshape(-1, 32))
        scales = scale.reshape(n, 8)
        max_scale = scales.max(axis=1)
        d = max_scale / F32(15)
        ls = np.clip(nearest_int(F32(0.5) * ((F32(1) / d)[:, None] * scales - F32(1))), 0, 7)
    ls |= np.where(shift.reshape(n, 8) < 0, 8, 0)
    qh = ((entries >> 8) << np.arange(0, 12, 3)).sum(axis=1).reshape(n, 8)
    qh |= np.where((max_scale > 0)[:, None], ls << 12, 0)  # ggml sets no scales in an all-zero block
    dh = np.where(max_scale > 0, fp16_bits(d * F32(1.125)), 0).astype("<u2")
    qs = (entries & 255).astype(np.uint8).reshape(n, 32)
    return np.concatenate(
        [dh.view(np.uint8).reshape(n, 2), qs, qh.astype("<u2").view(np.uint8).reshape(n, 16)], axis=1
    ).reshape(len(x), -1)


# -------------------------------------------------------------------------------------------- IQ1_M

# shift choice k of ggml's IQ1_M search -> value row (0: +delta, 1: -delta) for the first/second 8 weights
_HALF_SHIFTS = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
_SHIFT_MASKS = np.array([0x00, 0x80, 0x08, 0x88])


def _iq1_m_candidates(xa: np.ndarray, wa: np.ndarray, order: np.ndarray):
    """sum(w*q*x), sum(w*q*q) of every (cut pair, shift choice) candidate, (candidates, groups).

    As the ggml that llama.cpp ships (newer than the ggml repository's copy) does: prefix sums of
    w*x and w in sorted order kept per half group, each cut pair's sums collapsed to a few products.
    Everything is laid out position-major (..., groups), so each candidate is a contiguous row."""
    m = len(xa)
    vals = _shifted_levels()
    xs = np.take_along_axis(xa, order, axis=1).T  # (16, m)
    ws = np.take_along_axis(wa, order, axis=1).T
    zero = np.zeros((1, 2, m), dtype=F32)
    half = (order.T >= 8)[:, None, :] == np.array([False, True])[:, None]  # (16, 2, m)
    px = np.add.accumulate(np.concatenate([zero, np.where(half, (ws * xs)[:, None], F32(0))]), axis=0)
    pw = np.add.accumulate(np.concatenate([zero, np.where(half, ws[:, None], F32(0))]), axis=0)
    i1, i2 = _cut_pairs(16)
    sx = px[i1] + px[i2]  # (pairs, 2, m)
    qx, q2 = [], []
    for v in vals:  # +delta, then -delta
        c1 = v[0] * v[0] - v[1] * v[1]
        c2 = v[1] * v[1] - v[2] * v[2]
        qx.append(px[16] * v[2] - sx)
        q2.append(pw[16] * v[2] * v[2] + pw[i1] * c1 + pw[i2] * c2)
    # ggml's order: pair-major, shift choice minor
    sumqx = np.empty((len(i1), len(_HALF_SHIFTS), m), dtype=F32)
    sumq2 = np.empty_like(sumqx)
    for k, (a, b) in enumerate(_HALF_SHIFTS):
        np.add(qx[a][:, 0], qx[b][:, 1], out=sumqx[:, k])
        np.add(q2[a][:, 0], q2[b][:, 1], out=sumq2[:, k])
    n_cand = len(i1) * len(_HALF_SHIFTS)
    return sumqx.reshape(n_cand, m), sumq2.reshape(n_cand, m)


def _search_iq1_m(xb: np.ndarray, w: np.ndarray):
    """Groups of 16 -> scale, shift choice k (0..3), 2 grid entries; groups ggml skips get zeros."""
    m = len(xb)
    gs = grid_search("iq1s_grid")
    vals = _shifted_levels()
    scale = np.zeros(m, dtype=F32)
    shift = np.zeros(m, dtype=np.int64)
    entries = np.zeros((m, 2), dtype=np.int64)
    written = ~(np.abs(xb).max(axis=1) < F32(1e-7))
    rows = np.flatnonzero(written)
    xa, wa = xb[rows], w[rows]
    order = _sorted_order(xa)
    sumqx, sumq2 = _iq1_m_candidates(xa, wa, order)
    chosen = _replay(sumqx, sumq2)
    ok = chosen >= 0
    rows, order, xa, wa, chosen = rows[ok], order[ok], xa[ok], wa[ok], chosen[ok]
    cols = np.flatnonzero(ok)
    sc = sumqx[chosen, cols] / sumq2[chosen, cols]
    k = chosen % 4
    i1, i2 = _cut_pairs(16)
    lv = _levels_from_cuts(order, i1[chosen // 4], i2[chosen // 4])
    flip = sc < 0
    lv[flip] = 2 - lv[flip]
    sc = np.abs(sc)
    k[flip] = 3 - k[flip]
    values = vals[_HALF_SHIFTS[k]]  # (m, 2 halves, 3)
    rep = np.repeat(np.arange(len(rows)), 2)
    entry, off = _snap(gs, lv.reshape(-1, 8), xa.reshape(-1, 8), wa.reshape(-1, 8), sc[rep], values.reshape(-1, 3))
    entry = entry.reshape(-1, 2)
    refit = off.reshape(-1, 2).any(axis=1)
    if refit.any():
        per_weight = np.repeat(values[refit], 8, axis=1)  # (r, 16, 3)
        q = np.take_along_axis(per_weight, gs.levels[entry[refit]].reshape(-1, 16, 1).astype(np.int64), axis=2)[..., 0]
        sqx = seq_sum(wa[refit] * q * xa[refit], axis=-1)
        sq2 = seq_sum(wa[refit] * q * q, axis=-1)
        sc[refit] = np.where((sqx > 0) & (sq2 > 0), sqx / sq2, sc[refit])
    scale[rows], shift[rows], entries[rows] = sc, k, entry
    return scale, shift, entries


def quantize_iq1_m(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """56-byte blocks: 32 low grid-entry bytes, 16 bytes of (3 entry high bits + shift bit) nibbles,
    4 uint16 of 3-bit group scales whose top nibbles hold the f16 super-scale."""
    n = x.size // 256
    gs = grid_search("iq1s_grid")
    vals = _shifted_levels()
    with np.errstate(all="ignore"):
        w = _weights(x, imatrix)
        scale, shift, entries = _search_iq1_m(x.reshape(-1, 16), w.reshape(-1, 16))
        scales = scale.reshape(n, 16)
        max_scale = scales.max(axis=1)
        d = max_scale / F32(15)
        ls = np.clip(nearest_int(F32(0.5) * ((F32(1) / d)[:, None] * scales - F32(1))), 0, 7)
        # ggml refits the super-scale over the whole block with the final group scales and entries
        values = vals[_HALF_SHIFTS[shift.reshape(n, 16)]]  # (n, 16, 2, 3)
        lv = gs.levels[entries.reshape(n, 16, 2)].astype(np.int64)  # (n, 16, 2, 8)
        q = np.take_along_axis(values, lv, axis=3) * (2 * ls[:, :, None, None] + 1).astype(F32)
        wb, xb = w.reshape(n, 256), x.reshape(n, 256)
        q = q.reshape(n, 256)
        sumqx = seq_sum(wb * q * xb, axis=-1)
        sumq2 = seq_sum(wb * q * q, axis=-1)
        d = np.where(sumq2 > 0, sumqx / sumq2, d)
        dh = fp16_bits(d * F32(1.1125)).astype(np.int64)
    live = max_scale > 0
    sc = (ls.reshape(n, 4, 4) << np.arange(0, 12, 3)).sum(axis=2)
    sc |= ((dh[:, None] >> np.arange(0, 16, 4)) & 15) << 12
    sc[~live] = 0
    qh = (entries >> 8) << np.array([0, 4])
    qh = qh.sum(axis=1).reshape(n, 16) | np.where(live[:, None], _SHIFT_MASKS[shift.reshape(n, 16)], 0)
    qs = (entries & 255).astype(np.uint8).reshape(n, 32)
    return np.concatenate([qs, qh.astype(np.uint8), sc.astype("<u2").view(np.uint8).reshape(n, 8)], axis=1).reshape(
        len(x), -1
    )


QUANTIZERS = {GGMLType.IQ1_S: quantize_iq1_s, GGMLType.IQ1_M: quantize_iq1_m}
