"""ggml's scale searches for the legacy and K-quants, and the float32 arithmetic they are built from.

ggml searches a scale (and a min) for each small group of values with sequential float32 loops. To give
the same bytes, the searches here keep ggml's float32 operation order: products are formed left to right
as in the C expressions, and sums run in index order (`seq_sum`). They take position-major arrays, shape
`(n, m)`: `n` values per group along axis 0, `m` groups along axis 1, so a sum over a group is a reduction
over the outer axis, which numpy does in index order. They loop over candidate scales (or refinement
steps) in Python, each step handling every group of the chunk in one numpy call.

The building blocks follow the C code as exactly: `nearest_int`, `round_clip` and `roundf` round as
ggml's helpers do, and the group maxima (`abs_max_rows`, `signed_absmax`, `row_min_max`) pick the element
ggml's `if` chains pick, ties and signed zeros included.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import numpy as np

_Fn = TypeVar("_Fn", bound=Callable)

F32 = np.float32
GROUP_MAX_EPS = F32(1e-15)
_MAGIC = F32(12582912.0)  # 1.5 * 2**23


def quiet(kernel: _Fn) -> _Fn:
    """Run `kernel` with float warnings off: inf/NaN scales and 0/0 in searches are expected, as in C."""

    @functools.wraps(kernel)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return kernel(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def nearest_int(v: np.ndarray) -> np.ndarray:
    """ggml's `nearest_int`: add 1.5*2^23 and read the low mantissa bits (int32).

    Inside ±2^22 this is round-half-to-even; outside it wraps exactly as the C code does.
    """
    bits = (np.asarray(v, dtype=F32) + _MAGIC).view(np.int32)
    return (bits & 0x7FFFFF) - 0x400000


def clamped_codes(v: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """`MAX(lo, MIN(hi, nearest_int(v))) - lo` as int32, made in place in `v`'s memory (float32, used up):
    `nearest_int`'s low mantissa bits clamped and offset in two passes, not three."""
    bits = np.add(v, _MAGIC, out=v).view(np.int32)
    bits &= 0x7FFFFF
    np.clip(bits, 0x400000 + lo, 0x400000 + hi, out=bits)
    bits -= 0x400000 + lo
    return bits


def round_clip(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """`MAX(lo, MIN(hi, nearest_int(v)))` as float32, for arguments known to lie within ±2^22.

    There `nearest_int` is `rint`; the callers' arguments are bounded by construction (a scale times values
    it was derived from), so the cheaper form gives the same integers. Works in place on `v`.
    """
    np.rint(v, out=v)
    return np.clip(v, F32(lo), F32(hi), out=v)


_JUST_BELOW_HALF = F32(0.49999997)  # 0.5 - 2**-25


def roundf(v: np.ndarray, dtype: type | None = None) -> np.ndarray:
    """C `roundf` (half away from zero) of float32 values; as `dtype` integers if given (in range).

    trunc(v + copysign(0.5 - 2^-25, v)): adding exactly 0.5 would round 0.49999997 up to 1; with the
    constant just below a half, every float32 lands on the right side (checked exhaustively near halves).
    A cast to an integer type truncates toward zero, so it does the trunc.
    """
    half_away = v.view(np.uint32) & np.uint32(0x80000000)  # copysign, on the bits (np.copysign is slow)
    half_away |= _JUST_BELOW_HALF.view(np.uint32)
    v = v + half_away.view(F32)
    return np.trunc(v, out=v) if dtype is None else v.astype(dtype)


def cap(q: np.ndarray, hi: int) -> np.ndarray:
    """`np.minimum(q, hi, out=q)` for an integer array: numpy's minimum against a scalar runs a scalar loop
    here, a compare and a masked copy are faster."""
    np.copyto(q, q.dtype.type(hi), where=q > hi)
    return q


def seq_sum(a: np.ndarray, axis: int = 0) -> np.ndarray:
    """Sum over `axis` in index order in float32, as a C `float s = 0; for (...) s += a[i];` loop does
    (so an all-negative-zero sum is +0).

    numpy reduces over an axis that is not the innermost by adding whole slices in order, which is what we
    want (along the contiguous axis it sums pairwise and rounds differently). A sum along rows therefore
    first moves that axis to the front: the copy costs less than `cumsum` along short rows. When the
    innermost axis has a single element numpy would fold the two together, so that case goes through
    `cumsum`, which is sequential by definition.
    """
    a = np.ascontiguousarray(a, dtype=F32)
    axis %= a.ndim
    if axis == a.ndim - 1 and a.ndim > 1:
        a, axis = np.ascontiguousarray(np.moveaxis(a, axis, 0)), 0
    if a.shape[-1] > 1 and axis != a.ndim - 1:
        return np.add.reduce(a, axis=axis) + F32(0)
    return np.take(np.cumsum(a, axis=axis), -1, axis=axis) + F32(0)


def inverse(d: np.ndarray) -> np.ndarray:
    """`d ? 1.0f/d : 0.0f`, elementwise."""
    with np.errstate(divide="ignore"):
        inv = F32(1) / d
    inv[d == 0] = 0
    return inv


#: Groups at which `copy_lanes` turns bitwise: below, a masked copy costs less (numpy's cost per call dominates, a
#: small search's steps are many calls on a few hundred groups). Measured: docs/benchmarks.md.
BITWISE_LANES = 4096


def lane_mask(take: np.ndarray) -> np.ndarray:
    """The mask `copy_lanes` selects with from `take` (a bool array): `take` itself when small, else int32 -1
    where `take` is true and 0 elsewhere."""
    if take.size < BITWISE_LANES:
        return take
    return np.negative(take.view(np.int8), dtype=np.int32)


def copy_lanes(mask: np.ndarray, src: np.ndarray | np.generic, dst: np.ndarray) -> None:
    """`np.copyto(dst, src, where=mask)` for 4-byte arrays (`mask` from `lane_mask`, `src` of `dst`'s shape or
    a scalar), bit for bit. A large mask is applied as three bitwise passes: numpy's masked copy and `np.where`
    branch on every element and cost ten times more when the mask is unpredictable, as a search's "this step is
    better" is; a small one by `np.putmask`, one call."""
    if mask.dtype == np.bool_:
        np.putmask(dst, mask, src)
        return
    bits = dst.view(np.int32)
    flips = np.bitwise_xor(src.view(np.int32), bits)
    flips &= mask
    bits ^= flips


def half_round(v: np.ndarray) -> np.ndarray:
    """The float32 value a scale has after being stored as float16 and read back."""
    return np.asarray(v, dtype=F32).astype(np.float16).astype(F32)


def _pairwise(reduce: np.ufunc, a: np.ndarray, width: int) -> np.ndarray:
    """`reduce` (np.maximum or np.minimum) over each run of `width` (a power of two) consecutive elements
    of the flat integer array `a`.

    Adjacent pairs are merged over the whole array in each step, so every ufunc loop is long: numpy's
    reductions along short rows (such as 32-value blocks) pay a fixed cost per row, which dominates.
    """
    while width > 1:
        a = reduce(a[0::2], a[1::2])
        width //= 2
    return a


def _bitwise_rows(x: np.ndarray) -> bool:
    """Whether the row maxima can be taken on float32 bits: rows whose length is a power of two."""
    return x.dtype == F32 and x.ndim == 2 and x.shape[1] > 0 and x.shape[1] & (x.shape[1] - 1) == 0


def abs_max_rows(x: np.ndarray) -> np.ndarray:
    """max |x| of each row of a float32 2-D array (a NaN wins, as with numpy's max).

    The magnitudes are compared as their bit patterns: for non-negative floats the integer order of the
    bits is the numeric order, and integer pairwise maxima are quicker than float ones.
    """
    x = np.ascontiguousarray(x, dtype=F32)
    ax = np.abs(x)
    if not _bitwise_rows(x):
        return ax.max(axis=1)
    return _pairwise(np.maximum, ax.reshape(-1).view(np.uint32), x.shape[1]).view(F32)


def _signed_absmax_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`signed_absmax` along rows, from two pairwise maxima of the raw float bits (rows of a power of two).

    As int32 the largest bits are the largest positive value; as uint32 they are the negative value of
    largest magnitude (the sign bit sorts negatives above positives). The larger magnitude of the two is the
    answer; only rows where +a and -a tie need a search for the first.
    """
    if not _bitwise_rows(x):
        ax = np.abs(x)
        flat = np.argmax(ax, axis=1) + np.arange(0, x.size, x.shape[1])
        amax, signed = np.take(ax, flat), np.take(x, flat)
        signed[amax == 0] = 0
        return amax, signed
    bits = x.reshape(-1).view(np.int32)
    pos = _pairwise(np.maximum, bits, x.shape[1])
    neg = _pairwise(np.maximum, bits.view(np.uint32), x.shape[1]).view(np.int32)
    pos = np.where(pos >= 0, pos, -1)  # magnitude bits of the largest positive value; -1: none
    neg = np.where(neg < 0, neg & 0x7FFFFFFF, -1)  # of the most negative value
    mag = np.maximum(pos, neg)
    amax = mag.view(F32)
    signed = np.where(neg > pos, -amax, amax)
    tie = np.flatnonzero((pos == neg) & (mag > 0))
    if tie.size:
        rows, a = x[tie], amax[tie]
        neg_first = np.argmax(rows == -a[:, None], axis=1) < np.argmax(rows == a[:, None], axis=1)
        signed[tie] = np.where(neg_first, -a, a)
    signed[mag == 0] = 0
    return amax, signed


def signed_absmax(x: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per group of a 2-D array, (max |x|, the x that has it first), as ggml's
    `if (ax > amax) {amax = ax; max = x[i];}`; an all-zero group gives +0, as C's initial value.

    Along rows (axis 1) see `_signed_absmax_rows`; down columns (axis 0, position-major) max and min are
    quick, and only groups holding both +amax and -amax need the first-occurrence search.
    """
    x = np.ascontiguousarray(x)
    if axis == 1:
        return _signed_absmax_rows(x)
    hi, lo = x.max(axis=0), x.min(axis=0)
    amax = np.maximum(hi, -lo)
    signed = np.where(hi >= -lo, hi, lo)
    tie = np.flatnonzero((hi == -lo) & (hi > 0))
    if tie.size:
        sub = x[:, tie]
        neg_first = np.argmax(sub == lo[tie], axis=0) < np.argmax(sub == hi[tie], axis=0)
        signed[tie] = np.where(neg_first, lo[tie], hi[tie])
    return amax, np.where(amax > 0, signed, F32(0))


def _ordered_bits(b: np.ndarray) -> np.ndarray:
    """int32 keys in the numeric order of the float32 values whose bits are `b` (negatives' magnitude bits
    flipped): -0 sorts just below +0, NaNs at the ends. The map is its own inverse."""
    k = b >> 31
    k &= 0x7FFFFFFF
    k ^= b
    return k


def row_min_max(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """min and max of each row of a contiguous 2-D float32 array, as ggml's `if (v < min) min = v; if (v >
    max) max = v;`: of equal values the first counts, so a zero result takes the sign of the row's first
    zero. Pairwise integer maxima over order-preserving keys, rows whose result is a zero by argmin/argmax."""
    starts = np.arange(0, x.size, x.shape[1])
    if not _bitwise_rows(x):
        return np.take(x, np.argmin(x, axis=1) + starts), np.take(x, np.argmax(x, axis=1) + starts)
    keys = _ordered_bits(x.reshape(-1).view(np.int32))
    ends = [_ordered_bits(_pairwise(f, keys, x.shape[1])).view(F32) for f in (np.minimum, np.maximum)]
    for end, arg in zip(ends, (np.argmin, np.argmax), strict=True):
        zero = np.flatnonzero(end == 0)
        if zero.size:
            end[zero] = np.take(x, arg(x[zero], axis=1) + starts[zero])
    return ends[0], ends[1]


def position_major(x: np.ndarray, group: int) -> np.ndarray:
    """Rows of `x` cut into groups of `group` values, laid out (group, n_groups) for the searches."""
    return np.ascontiguousarray(x.reshape(-1, group).T)


# Elements per block of a scale search: its half-dozen float32 arrays of this size stay in a core's cache
# across the candidate steps (larger blocks stream every pass from memory, smaller ones pay numpy's cost
# per call more often). Measured: docs/benchmarks.md.
SEARCH_BLOCK_ELEMENTS = 1 << 17


def in_blocks(search: Callable[..., tuple[np.ndarray, ...]], x: np.ndarray, w: np.ndarray, *args) -> tuple:
    """`search(x, w, *args)` over cache-sized blocks of groups (columns), its results ((m,) or (n, m)
    arrays) joined: every group's search is independent, so this only changes the memory traffic."""
    step = max(1, SEARCH_BLOCK_ELEMENTS // x.shape[0])
    if x.shape[1] <= step:
        return search(x, w, *args)
    parts = [
        search(np.ascontiguousarray(x[:, i : i + step]), np.ascontiguousarray(w[:, i : i + step]), *args)
        for i in range(0, x.shape[1], step)
    ]
    return tuple(np.concatenate(results, axis=-1) for results in zip(*parts, strict=True))


def make_qx_quants(x: np.ndarray, nmax: int, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml `make_qx_quants(n, nmax, x, L, rmse_type=1, w)`: symmetric scale with a 19-step search.

    Returns (scale (m,), L uint8 (n, m) in [0, 2*nmax)); all-zero groups get scale 0 and L 0.
    """
    return in_blocks(_qx_block, x, w, nmax)


#: At most this many values in one numpy call of `_qx_sums`: a block of up to half as many takes several candidate
#: scales a call (faster below 16K values; above, one at a time is as fast). Measured: docs/benchmarks.md.
_QX_CALL_ELEMENTS = 1 << 15
#: `make_qx_quants`'s candidate steps, the first scale (step 0) first: each a scale of -(nmax + 0.1 * step) / max.
_QX_STEPS = np.array([0, *range(-9, 0), *range(1, 10)], dtype=F32)


def _qx_block(x: np.ndarray, w: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """`make_qx_quants` on one block of groups: every candidate's sums, scale and score first, then ggml's
    choice in its order, which only compares and keeps the winner's index."""
    amax, mx = signed_absmax(x)
    zero = amax < GROUP_MAX_EPS
    mx = np.where(zero, F32(1), mx)
    candidates = -(F32(nmax) + F32(0.1) * _QX_STEPS)[:, None] / mx
    sumlx, suml2 = _qx_sums(x, w, candidates, nmax)
    # each candidate's scale Σ w*x*l / Σ w*l*l (0 where the sum is 0: only the first can be kept then) and
    # score scale * Σ w*x*l, as C forms them; a candidate whose Σ w*l*l is not positive is never better
    scale = sumlx / np.where(suml2 != 0, suml2, F32(1))
    scale[suml2 == 0] = 0
    score = scale * sumlx
    square = sumlx * sumlx
    square[suml2 <= 0] = -np.inf
    best, winner = score[0].copy(), np.zeros(x.shape[1], np.int32)
    product = np.empty_like(best)
    for k in range(1, len(candidates)):
        better = np.greater(square[k], np.multiply(best, suml2[k], out=product))
        mask = lane_mask(better)
        copy_lanes(mask, score[k], best)
        copy_lanes(mask, np.int32(k), winner)
    groups = np.arange(x.shape[1])
    levels = round_clip(x * candidates[winner, groups], -nmax, nmax - 1)
    levels += F32(nmax)
    levels[:, zero] = 0
    return np.where(zero, F32(0), scale[winner, groups]), levels.astype(np.uint8)


def _qx_sums(x: np.ndarray, w: np.ndarray, candidates: np.ndarray, nmax: int) -> np.ndarray:
    """(Σ w*x*l, Σ w*l*l) per group for each row of `candidates` (inverse scales), the levels l being
    clamp(nearest_int(iscale * x)), summed from 0 in index order as C does. A small block (a small tensor, or a
    few rows of one) takes several candidates a numpy call, up to `_QX_CALL_ELEMENTS` values, where numpy's cost
    per call would otherwise dominate."""
    weights = np.stack((w * x, w))[:, None]  # the products' first factors: w*x, w
    per_call = min(len(candidates), max(1, _QX_CALL_ELEMENTS // x.size))
    lf = np.empty((per_call, *x.shape), F32)
    products = np.empty((2, *lf.shape), F32)
    sums = np.empty((2, *candidates.shape), F32)
    for first in range(0, len(candidates), per_call):
        k = min(per_call, len(candidates) - first)
        levels, made = lf[:k], products[:, :k]
        np.multiply(x, candidates[first : first + k, None, :], out=levels)
        # |x| <= |max|, so a step of -6 or less keeps |x * iscale| <= nmax - 0.6: its levels need no clamp
        if _QX_STEPS[first : first + k].max() <= -6:
            np.rint(levels, out=levels)
        else:
            round_clip(levels, -nmax, nmax - 1)
        np.multiply(weights, levels, out=made)
        made[1] *= levels
        np.add.reduce(made, axis=2, initial=F32(0), out=sums[:, first : first + k])
    return sums


def _refine_pass(
    x: np.ndarray, w: np.ndarray, L: np.ndarray, sumlx: np.ndarray, suml2: np.ndarray, lo: int, hi: int, qp: bool
) -> np.ndarray:
    """One pass of `_refine` over groups (columns), in place; returns which groups changed. Row i's levels
    are read before the pass: only rows before it have changed."""
    wx = w * x
    levels = L.astype(F32)
    lo, hi = np.int32(lo), np.int32(hi)  # numpy scalars: a Python int bound costs a range check a call
    changed = np.zeros(x.shape[1], dtype=bool)
    for i in range(x.shape[0]):
        li = levels[i]
        slx = sumlx - wx[i] * li
        sl2 = suml2 - w[i] * li * li
        ok = (slx > 0) & (sl2 > 0) if qp else slx > 0
        if not ok.any():
            continue
        new_l = np.clip(nearest_int(x[i] * sl2 / slx), lo, hi)
        ok &= new_l != L[i]
        nl = new_l.astype(F32)
        slx += wx[i] * nl
        sl2 += w[i] * nl * nl
        better = slx * slx * suml2 > sumlx * sumlx * sl2
        ok &= better if qp else (sl2 > 0) & better
        np.putmask(L[i], ok, new_l & 0xFF if qp else new_l)
        np.putmask(sumlx, ok, slx)
        np.putmask(suml2, ok, sl2)
        changed |= ok
    return changed


def _refine(
    x: np.ndarray,
    w: np.ndarray,
    L: np.ndarray,
    sumlx: np.ndarray,
    suml2: np.ndarray,
    lo: int,
    hi: int,
    qp: bool,
) -> None:
    """The coordinate-descent passes of make_q3_quants / make_qp_quants, in place on L, sumlx, suml2.

    Element by element (sequentially, as in C), try the level that is optimal for the scale the other
    elements give, and keep it if the weighted fit improves. Up to 5 passes; as in C a group stops after a
    pass that changed nothing, so later passes only run over the groups still changing.
    `qp` selects make_qp_quants' variant: it tests sl2 > 0 before the move rather than after, and keeps L in
    uint8 (levels wrap modulo 256, as in C).
    """
    with np.errstate(all="ignore"):
        changed = _refine_pass(x, w, L, sumlx, suml2, lo, hi, qp)
        active = np.flatnonzero(changed)
        for _ in range(4):
            if not active.size:
                return
            sub = [a[:, active] for a in (x, w, L)] + [sumlx[active], suml2[active]]
            changed = _refine_pass(*sub, lo, hi, qp)
            L[:, active], sumlx[active], suml2[active] = sub[2], sub[3], sub[4]
            active = active[changed]


def make_q3_quants(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """ggml `make_q3_quants(n, nmax, x, L, do_rmse=true)`: x²-weighted symmetric fit with refinement.

    Returns (scale (m,), L uint8 (n, m) in [0, 2*nmax)); all-zero groups get scale 0 and L 0.
    """
    amax, mx = signed_absmax(x)
    zero = amax < GROUP_MAX_EPS
    iscale = F32(-nmax) / np.where(zero, F32(1), mx)
    L = np.clip(nearest_int(iscale * x), -nmax, nmax - 1)
    w = x * x
    lf = L.astype(F32)
    sumlx = seq_sum(w * x * lf)
    suml2 = seq_sum(w * lf * lf)
    _refine(x, w, L, sumlx, suml2, -nmax, nmax - 1, qp=False)
    pos = suml2 > 0
    scale = np.where(pos & ~zero, sumlx / np.where(pos, suml2, F32(1)), F32(0))
    L += nmax
    L[:, zero] = 0
    return scale, L.astype(np.uint8)


def make_qp_quants(x: np.ndarray, nmax: int, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ggml `make_qp_quants(n, nmax, x, L, w)`: positive values (sub-block scales) on [0, nmax].

    Returns (scale (m,), L uint8 (n, m)); groups whose max is below 1e-15 get scale 0 and L 0.
    """
    mx = np.maximum(np.max(x, axis=0), F32(0))
    zero = mx < GROUP_MAX_EPS
    mx = np.where(zero, F32(1), mx)
    iscale = F32(nmax) / mx
    scale = F32(1) / iscale
    diff = x - scale * (nearest_int(iscale * x) & 0xFF).astype(F32)
    best = seq_sum(w * diff * diff)
    for step in range(-4, 5):
        if step == 0:
            continue
        cand = (F32(0.1) * F32(step) + F32(nmax)) / mx
        diff = x - (F32(1) / cand) * np.minimum(nmax, nearest_int(cand * x)).astype(F32)
        mse = seq_sum(w * diff * diff)
        better = mse < best
        best = np.where(better, mse, best)
        iscale = np.where(better, cand, iscale)
    lv = np.minimum(nmax, nearest_int(iscale * x))
    lf = lv.astype(F32)
    sumlx = seq_sum(w * x * lf)
    suml2 = seq_sum(w * lf * lf)
    L = lv & 0xFF
    _refine(x, w, L, sumlx, suml2, np.iinfo(np.int32).min, nmax, qp=True)
    pos = suml2 > 0
    scale = np.where(pos & ~zero, sumlx / np.where(pos, suml2, F32(1)), F32(0))
    L[:, zero] = 0
    return scale, (L & 0xFF).astype(np.uint8)


def _affine_fit(
    sum_w: np.ndarray, sum_x: np.ndarray, sum_l: np.ndarray, sum_l2: np.ndarray, sum_xl: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """make_qkx2_quants' weighted least-squares (D, scale, min) for given levels; a positive min is set to 0
    and the scale refit without it, as in C. Only groups with D > 0 have a fit."""
    D = sum_w * sum_l2 - sum_l * sum_l
    scale = (sum_w * sum_xl - sum_x * sum_l) / D
    the_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
    clamp = the_min > 0
    np.putmask(the_min, clamp, F32(0))
    np.putmask(scale, clamp, sum_xl / sum_l2)
    return D, scale, the_min


def make_qkx_quants(
    x: np.ndarray,
    w: np.ndarray,
    nmax: int,
    rmin: float,
    rdelta: float,
    nstep: int,
    use_mad: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ggml `make_qkx2_quants` / `make_qkx3_quants` (identical for non-null weights): affine fit x ≈ s*L - m.

    Tries scales (rmin + rdelta*is + nmax)/(max - min) for is = 0..nstep, each followed by a weighted
    least-squares (scale, min), keeping the one with the smallest weighted error (|diff| if `use_mad`, else
    diff²). As in C, a candidate is measured against the min of the best fit so far.
    Returns (scale (m,), the_min (m,) = -min >= 0, L uint8 (n, m) in [0, nmax]).
    """
    with np.errstate(all="ignore"):
        return in_blocks(_qkx_block, x, w, nmax, rmin, rdelta, nstep, use_mad)


def _qkx_block(
    x: np.ndarray, w: np.ndarray, nmax: int, rmin: float, rdelta: float, nstep: int, use_mad: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`make_qkx_quants` on one block of groups; one scratch array serves the products and the error."""
    mx = np.max(x, axis=0)
    mn = np.min(x, axis=0)
    mn[mn > 0] = 0
    flat = ~(mx > mn)
    sum_w = seq_sum(w)
    sum_x = seq_sum(w * x)
    lf = np.empty_like(x)  # the levels, as float
    prods = np.empty((3, *x.shape), F32)

    def levels(iscale: np.ndarray, base: np.ndarray) -> None:
        np.subtract(x, base, out=lf)
        round_clip(np.multiply(lf, iscale, out=lf), 0, nmax)

    def error(scale: np.ndarray, the_min: np.ndarray) -> np.ndarray:
        diff = np.multiply(lf, scale, out=prods[0])
        diff += the_min
        diff -= x
        if use_mad:
            np.abs(diff, out=diff)
        else:
            np.square(diff, out=diff)
        diff *= w
        return seq_sum(diff)

    iscale = F32(nmax) / (mx - mn)
    scale = F32(1) / iscale
    levels(iscale, mn)
    best = error(scale, mn)
    cur_min, best_iscale, best_base = mn.copy(), iscale, mn.copy()
    for step in range(nstep + 1):
        cand = (F32(rmin) + F32(rdelta) * F32(step) + F32(nmax)) / (mx - cur_min)
        levels(cand, cur_min)
        np.multiply(w, lf, out=prods[0])
        np.multiply(prods[0], lf, out=prods[1])
        np.multiply(prods[0], x, out=prods[2])
        D, this_scale, this_min = _affine_fit(sum_w, sum_x, *seq_sum(prods, axis=1))
        err = error(this_scale, this_min)
        better = lane_mask((D > 0) & (err < best))
        for src, dst in ((err, best), (this_scale, scale), (cand, best_iscale), (cur_min, best_base)):
            copy_lanes(better, src, dst)
        copy_lanes(better, this_min, cur_min)  # after best_base took the min it was measured against
    levels(best_iscale, best_base)
    lf[:, flat] = 0
    return np.where(flat, F32(0), scale), -cur_min, lf.astype(np.uint8)
