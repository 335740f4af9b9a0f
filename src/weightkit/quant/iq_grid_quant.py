"""IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S quantizers, byte-exact with ggml's `quantize_iq*`.

These five share one algorithm (ggml's `quantize_row_iq2_*_impl` / `quantize_row_iq3_*_impl`): per
group of 16 or 32 weights, strip the signs, then for a range of trial scales round every weight to a
level, snap each 8- or 4-wide vector of levels to the grid (searching the precomputed neighbours of
off-grid points), and keep the trial with the best weighted least-squares fit; finally, re-snap with
the fitted scale and store the group scales as 4-bit multiples of one f16 per 256 weights. They differ
in grid, group size, trial scales, weighting and sign coding, which `_Variant` captures.

All groups of a chunk are processed at once; ggml's sequential choices (keep a trial only if strictly
better, first best neighbour, coordinate-wise float32 sums) are replayed with masks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dtypes import GGMLType
from ..errors import ArgumentError
from ._gather import gather
from ._parallel import Scratch, iota
from ._scale_search import F32, nearest_int, seq_sum
from .iq_math import fp16_bits
from .iq_tables import GridSearch, grid_search


@dataclass(frozen=True)
class _Variant:
    grid: str
    group: int  # weights per group scale
    kmaxq: int  # levels per coordinate (before snapping to the grid)
    trials: range  # the `is` of ggml's trial loop
    step: float  # trial inverse scales are (2*kmaxq - 1 + is*step) / max (or / (kmaxq * first scale))
    eps: float  # groups with max < eps are stored as zero (0: ggml tests `!max`)
    parity: bool  # signs stored as 7 bits of even parity (one weight's sign gets flipped)
    qp_start: bool  # first scale from make_qp_quants, trials around it (IQ2_XXS); else from the max
    repass: str  # which vectors ggml re-snaps with the fitted scale: "offgrid", "all" or "always"
    sigma: int  # sigma2 = sigma * sum(x^2) / 256
    weight_without_imatrix: str | None  # "x2", "x2+sigma/4", or None when ggml requires an imatrix
    on_grid_start: bool  # ggml's initial is_on_grid flags
    fudge: float  # ggml scales the f16 super-scale by this


_IQ2_XXS = _Variant("iq2xxs_grid", 32, 3, range(-6, 7), 0.1, 1e-15, True, True, "always", 1, None, True, 1.0)
_IQ2_XS = _Variant("iq2xs_grid", 16, 3, range(-9, 10), 0.1, 1e-15, True, False, "offgrid", 1, None, True, 1.0)
_IQ2_S = _Variant("iq2s_grid", 16, 3, range(-9, 10), 0.1, 1e-8, False, False, "offgrid", 2, "x2+sigma/4", True, 0.9875)
_IQ3_XXS = _Variant("iq3xxs_grid", 32, 8, range(-15, 16), 0.2, 1e-8, True, False, "offgrid", 2, "x2", True, 1.0125)
_IQ3_S = _Variant("iq3s_grid", 32, 8, range(-9, 10), 0.2, 0.0, False, False, "all", 2, "x2", False, 1.033)


# ------------------------------------------------------------------------------------ grid search


def nearest_neighbours(
    gs: GridSearch, keys: np.ndarray, xval: np.ndarray, weight: np.ndarray, scale: np.ndarray, values=None
) -> np.ndarray:
    """ggml's `iq*_find_best_neighbour`: for each off-grid point `keys[i]`, the neighbour entry
    minimizing sum(weight * (scale * value - xval)^2), the first one on ties.

    `values` (queries, 3) maps levels to the values compared (default: ggml's grid values
    2*level + 1). All (query, candidate) pairs are scored at once, one coordinate at a time, in
    arrays reused from call to call (`Scratch`): a search makes about ten pair-sized temporaries, and
    while glibc hands freed blocks back to the OS (as in a fresh process) new ones would page-fault on
    every call.
    """
    counts = gs.count[keys]
    first = np.cumsum(counts) - counts
    n_pairs = int(counts.sum())
    owner = np.repeat(np.arange(len(keys)), counts)
    long_lists = n_pairs > 40 * len(keys)

    def spread(a: np.ndarray, out: np.ndarray) -> np.ndarray:
        """A query's value for each of its candidates. For short candidate lists (IQ3 grids: 8-11 a
        query) a gather by `owner`, which is sorted so the reads run forward (np.repeat by counts costs
        more there, and holds the GIL); for long ones (IQ2_XS: ~60) a repeat."""
        return np.repeat(a, counts) if long_lists else gather(a, owner, out)

    with Scratch() as scratch:

        def pairs(dtype=F32) -> np.ndarray:
            return scratch.empty((n_pairs,), dtype)

        at = spread(gs.start[keys] - first, pairs(np.intp))
        at += iota(n_pairs)
        cand = gather(gs.flat, at, pairs(np.intp))
        xval_t, weight_t = xval.T.copy(), weight.T.copy()
        scale = spread(scale, pairs())
        if values is not None:
            flat_values = values.reshape(-1)
            owner_row = values.shape[1] * owner
        d2, diff, spread_x = pairs(), pairs(), pairs()
        d2[:] = 0
        for i in range(gs.width):
            if values is None:
                gather(gs.pos_t[i], cand, diff)
            else:
                gather(flat_values, np.add(owner_row, gather(gs.levels_t[i], cand, at), out=at), diff)
            diff *= scale
            diff -= spread(xval_t[i], spread_x)
            np.multiply(spread(weight_t[i], spread_x), diff, out=spread_x)
            spread_x *= diff
            d2 += spread_x
        d2[np.isnan(d2)] = np.inf
        hits = np.flatnonzero(d2 == spread(np.minimum.reduceat(d2, first), spread_x))
        return cand[hits[np.r_[True, owner[hits][1:] != owner[hits][:-1]]]]


def _snap(gs: GridSearch, inv: np.ndarray, xval: np.ndarray, waux: np.ndarray, scale: np.ndarray, kmaxq: int):
    """Round `xval` (m, vectors, width) at inverse scale `inv` (m,) to levels, snap each vector to
    the grid; returns the grid levels (m, vectors, width) and which vectors were on the grid."""
    lv = np.clip(nearest_int(F32(0.5) * (inv[:, None, None] * xval - F32(1))), 0, kmaxq - 1)
    keys = gs.key(lv)
    entry = gs.kmap[keys]
    off = entry < 0
    at = np.flatnonzero(off)  # the off-grid vectors, as flat indices: one selection serves every array
    if at.size:
        rows = (-1, gs.width)
        vec_scale = gather(scale, at // off.shape[1])  # each off-grid vector's row scale
        found = nearest_neighbours(gs, keys.reshape(-1)[at], xval.reshape(rows)[at], waux.reshape(rows)[at], vec_scale)
        np.put(entry, at, found)
    return gs.levels[entry], ~off


def _fit(levels: np.ndarray, xval: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sum(w * x * q) and sum(w * q * q) over groups `xval`, `w` (m, n), q = 2*level + 1, in ggml's order."""
    q = (2 * levels.reshape(w.shape) + 1).astype(F32)
    return seq_sum(w * xval * q, axis=-1), seq_sum(w * q * q, axis=-1)


# ---------------------------------------------------------------------------------- group search


def _make_qp_quants(x: np.ndarray, w: np.ndarray, nmax: int) -> np.ndarray:
    """ggml's `make_qp_quants` (which IQ2_XXS uses for its first scale), for groups (m, n); returns the scale.

    ggml stores the levels in a uint8 array, so a negative level reads back as 256 + level."""
    mx = np.maximum(x.max(axis=1), F32(0))[:, None]
    inv = F32(nmax) / mx
    lv = nearest_int(inv * x) & 255
    scale = F32(1) / inv
    diff = x - scale * lv.astype(F32)
    best_mse = seq_sum(w * diff * diff, axis=-1)
    for trial in (-4, -3, -2, -1, 1, 2, 3, 4):
        inv_t = (F32(0.1) * F32(trial) + F32(nmax)) / mx
        diff = x - (F32(1) / inv_t) * np.minimum(nmax, nearest_int(inv_t * x)).astype(F32)
        mse = seq_sum(w * diff * diff, axis=-1)
        better = mse < best_mse
        best_mse = np.where(better, mse, best_mse)
        inv = np.where(better[:, None], inv_t, inv)
    lv = np.minimum(nmax, nearest_int(inv * x))
    lf = lv.astype(F32)
    sumlx = seq_sum(w * x * lf, axis=-1)
    suml2 = seq_sum(w * lf * lf, axis=-1)
    lv &= 255
    wx = w * x
    for _ in range(5):  # a pass that changes nothing would change nothing again: no early exit needed
        for i in range(x.shape[1]):
            li = lv[:, i].astype(F32)
            slx = sumlx - wx[:, i] * li
            sl2 = suml2 - w[:, i] * li * li
            new = np.minimum(nmax, nearest_int(x[:, i] * sl2 / slx))
            nf = new.astype(F32)
            take = (slx > 0) & (sl2 > 0) & (new != lv[:, i])
            slx = slx + wx[:, i] * nf
            sl2 = sl2 + w[:, i] * nf * nf
            take &= slx * slx * suml2 > sumlx * sumlx * sl2
            lv[:, i] = np.where(take, new & 255, lv[:, i])
            sumlx = np.where(take, slx, sumlx)
            suml2 = np.where(take, sl2, suml2)
    return np.where(suml2 > 0, sumlx / suml2, F32(0))


def _strip_signs(v: _Variant, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|x| and the sign bits per 8 weights (uint8). With `v.parity`, ggml stores only 7 sign bits
    per 8 weights: if an odd number are negative, it flips the sign of the least important one
    (smallest w*x*x) instead, which then enters the fit as a negative magnitude."""
    m = len(x)
    neg = ~(x >= 0)
    xval = np.where(neg, -x, x)
    bits = neg.reshape(m, -1, 8)
    if v.parity:
        odd = bits.sum(axis=2) % 2 == 1
        least = np.argmin((w * x * x).reshape(m, -1, 8), axis=2)
        flip = odd[:, :, None] & (np.arange(8) == least[:, :, None])
        bits = bits ^ flip
        xval = np.where(flip.reshape(m, -1), -xval, xval)
    return xval, (bits << np.arange(8)).sum(axis=2).astype(np.uint8)


def _search(v: _Variant, gs: GridSearch, x: np.ndarray, w: np.ndarray):
    """ggml's per-group search for groups `x`, `w` (m, v.group). Returns the group scales (m,), grid
    entries (m, vectors), sign bytes (m, v.group // 8) and which groups were quantized at all."""
    m = len(x)
    n_vec = v.group // gs.width
    xval, signs = _strip_signs(v, x, w)
    mx = xval.max(axis=1)
    active = mx != 0 if v.eps == 0 else ~(mx < F32(v.eps))
    rows = np.flatnonzero(active)
    xa, wa, mx = xval[rows], w[rows], mx[rows]
    if v.qp_start:
        scale = _make_qp_quants(xa, wa, v.kmaxq + 1)
        base = scale * F32(v.kmaxq)
        keep = ~(base <= 0)
        rows, xa, wa, scale, base = rows[keep], xa[keep], wa[keep], scale[keep], base[keep]
    else:
        base = mx
        scale = mx / F32(2 * v.kmaxq - 1)
    xv = xa.reshape(len(rows), n_vec, gs.width)
    waux = np.sqrt(wa).reshape(xv.shape)
    best = np.zeros(len(rows), dtype=F32)
    lv = np.zeros(xv.shape, dtype=np.int8)
    on_grid = np.full((len(rows), n_vec), v.on_grid_start)
    for trial in v.trials:
        inv = (F32(2 * v.kmaxq - 1) + F32(trial) * F32(v.step)) / base
        lv_t, on_t = _snap(gs, inv, xv, waux, F32(1) / inv, v.kmaxq)
        sumqx, sumq2 = _fit(lv_t, xa, wa)
        better = (sumq2 > 0) & (sumqx * sumqx > best * sumq2)
        scale = np.where(better, sumqx / sumq2, scale)
        best = np.where(better, scale * sumqx, best)
        lv[better] = lv_t[better]
        on_grid[better] = on_t[better]
    redo = scale > 0
    if v.repass != "always":
        redo &= ~on_grid.all(axis=1)
    if redo.any():
        lv_r, _ = _snap(gs, F32(1) / scale[redo], xv[redo], waux[redo], scale[redo], v.kmaxq)
        if v.repass == "offgrid":
            lv_r = np.where(on_grid[redo][:, :, None], lv[redo], lv_r)
        lv[redo] = lv_r
        sumqx, sumq2 = _fit(lv_r, xa[redo], wa[redo])
        scale[redo] = np.where(sumq2 > 0, sumqx / sumq2, scale[redo])
    negative = scale < 0  # "should never happen" in ggml: flip the scale and every sign
    scale = np.abs(scale)
    signs[rows[negative]] = ~signs[rows[negative]]
    entry = gs.kmap[gs.key(lv)]
    if (entry < 0).any():
        raise ValueError("quantization produced a point off the grid (ggml aborts here too)")
    scales = np.zeros(m, dtype=F32)
    entries = np.zeros((m, n_vec), dtype=np.int64)
    scales[rows] = scale
    entries[rows] = entry
    done = np.zeros(m, dtype=bool)
    done[rows] = True
    signs[~done] = 0
    return scales, entries, signs, done


def require_imatrix(type_name: str, imatrix: np.ndarray | None) -> None:
    """ggml refuses to quantize the lowest-bit IQ types without an importance matrix; so do we."""
    if imatrix is None:
        raise ArgumentError(f"imatrix: ggml quantizes {type_name} only with an importance matrix")


def _weights(v: _Variant, x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """Per-weight importance, (blocks, 256): imatrix * sqrt(sigma2 + x^2), or ggml's fallback."""
    if v.weight_without_imatrix is None:
        name = v.grid.removesuffix("_grid").upper()  # "IQ2XS": the type is IQ2_XS
        require_imatrix(f"{name[:3]}_{name[3:]}", imatrix)
    xb = x.reshape(-1, 256)
    sq = xb * xb
    sigma2 = F32(v.sigma) * seq_sum(sq, axis=-1) / F32(256)
    if imatrix is not None:
        return imatrix.reshape(1, -1, 256) * np.sqrt(sigma2.reshape(len(x), -1, 1) + sq.reshape(len(x), -1, 256))
    if v.weight_without_imatrix == "x2":
        return sq
    return F32(0.25) * sigma2[:, None] + sq


def _block_scales(v: _Variant, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group scales (blocks, groups) -> f16 super-scale bits, 4-bit group scales, and which blocks
    are all zero (ggml leaves their scales, and for some types everything, at zero)."""
    max_scale = scales.max(axis=1)
    d = max_scale / F32(31)
    dh = fp16_bits(d * F32(v.fudge))
    ls = np.clip(nearest_int(F32(0.5) * ((F32(1) / d)[:, None] * scales - F32(1))), 0, 15).astype(np.uint8)
    zero = max_scale == 0
    dh[zero] = 0
    ls[zero] = 0
    return dh, ls, zero


def _run(v: _Variant, x: np.ndarray, imatrix: np.ndarray | None):
    gs = grid_search(v.grid)
    with np.errstate(all="ignore"):
        w = _weights(v, x, imatrix)
        scales, entries, signs, done = _search(v, gs, x.reshape(-1, v.group), w.reshape(-1, v.group))
        n_blocks = x.size // 256
        dh, ls, zero = _block_scales(v, scales.reshape(n_blocks, -1))
    per_block = 256 // v.group
    return (
        dh,
        ls,
        zero,
        entries.reshape(n_blocks, per_block, -1),
        signs.reshape(n_blocks, per_block, -1),
        done.reshape(n_blocks, per_block),
    )


def _nibble_pairs(ls: np.ndarray) -> np.ndarray:
    """4-bit scales (blocks, 2k) -> k bytes, even-numbered scale in the low nibble."""
    return ls[:, 0::2] | ls[:, 1::2] << 4


def _u32_bytes(words: np.ndarray) -> np.ndarray:
    return words.astype("<u4").view(np.uint8).reshape(len(words), -1)


def quantize_iq2_xxs(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """66-byte blocks: f16 d; per 32 weights 4 grid-entry bytes, then a uint32 of 4x7 sign bits and a 4-bit scale."""
    dh, ls, zero, entries, signs, _ = _run(_IQ2_XXS, x, imatrix)
    n = len(dh)
    high = ((signs & 127).astype(np.uint32) << np.arange(0, 28, 7, dtype=np.uint32)).sum(axis=2, dtype=np.uint32)
    high |= ls.astype(np.uint32) << 28
    q = np.concatenate([entries.astype(np.uint8), _u32_bytes(high).reshape(n, 8, 4)], axis=2).reshape(n, 64)
    q[zero] = 0
    return np.concatenate([dh.view(np.uint8).reshape(n, 2), q], axis=1).reshape(len(x), -1)


def quantize_iq2_xs(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """74-byte blocks: f16 d, 32 uint16 codes (9-bit grid entry, 7 sign bits), 16 4-bit scales."""
    dh, ls, zero, entries, signs, _ = _run(_IQ2_XS, x, imatrix)
    n = len(dh)
    codes = (entries | (signs & 127).astype(np.int64) << 9).astype("<u2").reshape(n, 32)
    codes[zero] = 0
    return np.concatenate([dh.view(np.uint8).reshape(n, 2), codes.view(np.uint8), _nibble_pairs(ls)], axis=1).reshape(
        len(x), -1
    )


def quantize_iq2_s(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """82-byte blocks: f16 d, 32 low grid-entry bytes, 32 sign bytes, 8 bytes of entry bits 8-9, 16 4-bit scales."""
    dh, ls, _, entries, signs, _ = _run(_IQ2_S, x, imatrix)
    n = len(dh)
    entries = entries.reshape(n, 32)
    high = ((entries >> 8).reshape(n, 8, 4) << np.arange(0, 8, 2)).sum(axis=2)
    return np.concatenate(
        [
            dh.view(np.uint8).reshape(n, 2),
            (entries & 255).astype(np.uint8),
            signs.reshape(n, 32),
            high.astype(np.uint8),
            _nibble_pairs(ls),
        ],
        axis=1,
    ).reshape(len(x), -1)


def quantize_iq3_xxs(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """98-byte blocks: f16 d, 64 grid-entry bytes (4 weights each), 8 uint32 of 4x7 sign bits + 4-bit scale."""
    dh, ls, zero, entries, signs, _ = _run(_IQ3_XXS, x, imatrix)
    n = len(dh)
    high = ((signs & 127).astype(np.uint32) << np.arange(0, 28, 7, dtype=np.uint32)).sum(axis=2, dtype=np.uint32)
    high |= ls.astype(np.uint32) << 28
    q = np.concatenate([entries.astype(np.uint8).reshape(n, 64), _u32_bytes(high)], axis=1)
    q[zero] = 0
    return np.concatenate([dh.view(np.uint8).reshape(n, 2), q], axis=1).reshape(len(x), -1)


def quantize_iq3_s(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """110-byte blocks: f16 d, 64 low grid-entry bytes, 8 bytes of entry bit 8, 32 sign bytes, 8 4-bit scales.

    ggml skips all-zero groups without advancing its qs/signs write pointers, so the groups after
    one are stored a slot early (and the last slots stay zero); qh and the scales are not shifted."""
    dh, ls, _, entries, signs, done = _run(_IQ3_S, x, imatrix)
    n = len(dh)
    slot = np.cumsum(done, axis=1) - 1
    blk, grp = np.nonzero(done)
    qs = np.zeros((n, 8, 8), dtype=np.uint8)
    qs[blk, slot[blk, grp]] = entries[blk, grp] & 255
    sg = np.zeros((n, 8, 4), dtype=np.uint8)
    sg[blk, slot[blk, grp]] = signs[blk, grp]
    high = ((entries >> 8) << np.arange(8)).sum(axis=2).astype(np.uint8)
    return np.concatenate(
        [dh.view(np.uint8).reshape(n, 2), qs.reshape(n, 64), high, sg.reshape(n, 32), _nibble_pairs(ls)], axis=1
    ).reshape(len(x), -1)


QUANTIZERS = {
    GGMLType.IQ2_XXS: quantize_iq2_xxs,
    GGMLType.IQ2_XS: quantize_iq2_xs,
    GGMLType.IQ2_S: quantize_iq2_s,
    GGMLType.IQ3_XXS: quantize_iq3_xxs,
    GGMLType.IQ3_S: quantize_iq3_s,
}
