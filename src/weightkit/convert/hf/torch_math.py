"""torch's float32 functions as the converter's transforms and keys compute them, bit for bit where it can be:
`softplus` as torch's vectorized x86 CPU kernels (AVX2 / AVX-512) evaluate it, with Sleef's 1-ulp `expf_u10` and
`log1pf_u10` (which round differently from a correctly rounded result in a few values in a hundred), each step
Sleef's in float32 with its fused multiply-adds rounded once; and the standard normal's quantile function."""

from __future__ import annotations

import math

import numpy as np

_F = np.float32
_LN2_HI, _LN2_LO = _F(0.693145751953125), _F(1.428606765330187045e-06)  # ln 2, split for exact reduction
_EXP_POLY = (0.000198527617612853646278381, 0.00139304355252534151077271, 0.00833336077630519866943359,
             0.0416664853692054748535156, 0.166666671633720397949219, 0.5)  # fmt: skip
_LOG_POLY = (0.3027294874, 0.3996108174, 0.6666694880)
_LN2_DF = (_F(0.69314718246459960938), _F(-1.904654323148236017e-09))  # ln 2 as a float32 pair


def _fma(x: np.ndarray, y: np.ndarray | np.float32, z: np.ndarray | np.float32) -> np.ndarray:
    """x * y + z rounded once to float32 (the float32 product is exact in float64)."""
    return (np.asarray(x, np.float64) * np.asarray(y, np.float64) + np.asarray(z, np.float64)).astype(_F)


def _pow2(q: np.ndarray) -> np.ndarray:
    """2**q for integer q in float32's normal exponent range, from its bits."""
    return ((q + 0x7F).astype(np.int32) << 23).view(_F)


def _exp(d: np.ndarray) -> np.ndarray:
    """Sleef's `expf_u10`."""
    q = np.rint(d * _F(1.4426950408889634)).astype(np.int32)
    qf = q.astype(_F)
    s = _fma(qf, -_LN2_HI, d)
    s = _fma(qf, -_LN2_LO, s)
    u = _F(_EXP_POLY[0])
    for c in _EXP_POLY[1:]:
        u = _fma(u, s, _F(c))
    u = _F(1) + _fma(s * s, u, s)
    u = u * _pow2(q >> 1) * _pow2(q - (q >> 1))
    u = np.where(d < -104, _F(0), u)
    return np.where(d > 100, _F(np.inf), u).astype(_F)


def _log1p(d: np.ndarray) -> np.ndarray:
    """Sleef's `log1pf_u10` (its AVX2 form) for arguments up to 1e38, in double-float arithmetic."""
    dp1 = d + _F(1)
    tiny = dp1 < _F(np.finfo(_F).tiny)
    with np.errstate(over="ignore"):
        dp1 = np.where(tiny, dp1 * _F(2.0**64), dp1)
    e = (((dp1 * _F(1.0 / 0.75)).view(np.int32) >> 23) & 0xFF) - 0x7F
    t = (np.ones_like(d, _F).view(np.int32) - (e << 23)).view(_F)
    m = _fma(d, t, t - _F(1))
    ef = np.where(tiny, e - 64, e).astype(_F)
    sx = _LN2_DF[0] * ef  # ln 2 * e, as a pair
    sy = _fma(_LN2_DF[1], ef, _fma(_LN2_DF[0], ef, -sx))
    dx = _F(2) + m  # x = m / (2 + m), as a pair
    dy = (_F(2) - dx) + m
    r = _F(1) / dx
    xs = m * r
    xy = _fma(xs, _fma(-dy, r, _fma(-dx, r, _F(1))), _fma(r, m, -xs))
    x2 = xs * xs
    p = _F(_LOG_POLY[0])
    for c in _LOG_POLY[1:]:
        p = _fma(p, x2, _F(c))
    cx, cy = xs * _F(2), xy * _F(2)
    nx = sx + cx
    ny = (((sx - nx) + cx) + sy) + cy
    y = (x2 * xs) * p
    mx = nx + y
    r = mx + (((nx - mx) + y) + ny)
    r = np.where(d < -1, _F(np.nan), r)
    return np.where(d == -1, _F(-np.inf), r).astype(_F)


def softplus(x: np.ndarray) -> np.ndarray:
    """`torch.nn.functional.softplus(x)` (beta 1, threshold 20) in float32: `log1p(exp(x))`, or x above 20."""
    x = np.asarray(x, _F)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(x > 20, x, _log1p(_exp(x)))


def normal_icdf(p: float) -> float:
    """`torch.distributions.Normal(0, 1).icdf(torch.tensor(p))` in float32: erfinv(2p - 1) * sqrt(2), each step
    in float32, erfinv rounded correctly from float64 (torch's own float32 erfinv, a rational approximation with
    two Newton steps, rounds the other way in about one value in a few thousand)."""
    y = float(_F(_F(2) * _F(p) - _F(1)))
    if abs(y) >= 1 or y != y:
        return math.copysign(math.inf, y) if abs(y) == 1 else math.nan
    lo, hi = -6.0, 6.0  # erf(x) < y <= erf(hi): bisected to float64's resolution
    for _ in range(128):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if math.erf(mid) < y else (lo, mid)
    return float(_F(hi) * _F(math.sqrt(2)))
