"""IQ4_NL and IQ4_XS quantizers, byte-exact with ggml's `quantize_iq4_nl` / `quantize_iq4_xs`.

Both run ggml's `quantize_row_iq4_nl_impl`: for every 32 weights, try 16 scales (the one mapping the
largest magnitude onto the -127 end of the non-linear table, then 15 mapping it onto -134 .. -120)
and keep the one with the best weighted least-squares fit; IQ4_XS then stores those scales as 6-bit
multiples of one f16 per 256 weights and re-picks the indices. We evaluate all tries of all groups
at once and then replay ggml's sequential "keep if better" comparisons, in float32.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import GGMLType
from ._scale_search import F32, GROUP_MAX_EPS, nearest_int, seq_sum
from .iq_math import best_index, fp16_bits
from .iq_tables import cached, codebooks

_NTRY = 7


@cached
def _values() -> np.ndarray:
    return codebooks()["kvalues_iq4nl"].astype(F32)


def _group_scales(xb: np.ndarray, w: np.ndarray) -> np.ndarray:
    """ggml's per-group scale search: `xb`, `w` (groups, 32) -> the chosen scale per group."""
    values = _values()
    amax_at = np.argmax(np.abs(xb), axis=1)
    gmax = np.take_along_axis(xb, amax_at[:, None], axis=1)[:, 0]  # the first largest-magnitude value
    # inverse scales: first -max/values[0] inverted, then (itry + values[0]) / max for each try
    tries = np.arange(-_NTRY, _NTRY + 1, dtype=F32) + values[0]
    inv = np.concatenate([(F32(1) / ((-gmax) / values[0]))[None], tries[:, None] / gmax[None]])
    q = values[best_index(values, inv[:, :, None] * xb)]  # (1 + 2*_NTRY, groups, 32)
    wq = w * q
    sumqx = seq_sum(wq * xb, axis=-1)
    sumq2 = seq_sum(wq * q, axis=-1)
    d = np.where(sumq2[0] > 0, sumqx[0] / sumq2[0], F32(0))
    best = d * sumqx[0]
    for t in range(1, len(inv)):
        better = (sumq2[t] > 0) & (sumqx[t] * sumqx[t] > best * sumq2[t])
        d = np.where(better, sumqx[t] / sumq2[t], d)
        best = np.where(better, d * sumqx[t], best)
    return np.where(np.abs(gmax) < GROUP_MAX_EPS, F32(0), d)


def _weights(xb: np.ndarray, imatrix: np.ndarray | None, super_block: int) -> np.ndarray:
    """Importance of each weight: imatrix * sqrt(sigma2 + x^2) with sigma2 = 2 * mean(x^2) over the
    super-block, or x^2 without an imatrix. `xb` is (rows, super-blocks, groups, 32)."""
    if imatrix is None:
        return xb * xb
    sq = xb * xb
    sigma2 = seq_sum(sq.reshape(*xb.shape[:2], -1), axis=-1) * F32(2 / super_block)
    return imatrix.reshape(xb.shape[1:]) * np.sqrt(sigma2[:, :, None, None] + sq)


def _pack_nibbles(idx: np.ndarray) -> np.ndarray:
    """(..., 32) indices -> (..., 16) bytes, index j in the low nibble of byte j, index 16+j in its high."""
    return idx[..., :16] | idx[..., 16:] << 4


def quantize_iq4_nl(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """18-byte blocks of 32: f16 scale, 32 4-bit indices into kvalues_iq4nl."""
    n_rows = len(x)
    xb = x.reshape(n_rows, -1, 1, 32)
    with np.errstate(all="ignore"):
        d = _group_scales(xb.reshape(-1, 32), _weights(xb, imatrix, 32).reshape(-1, 32))
        inv = np.where(d != 0, F32(1) / d, F32(0))
        idx = best_index(_values(), inv[:, None] * xb.reshape(-1, 32))
    out = np.empty((len(d), 18), dtype=np.uint8)
    out[:, 0:2] = fp16_bits(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = _pack_nibbles(idx)
    return out.reshape(n_rows, -1)


def quantize_iq4_xs(x: np.ndarray, imatrix: np.ndarray | None) -> np.ndarray:
    """136-byte blocks of 256: f16 super-scale, 8 6-bit group scales (2 high bits each in a uint16,
    low nibbles in 4 bytes), 256 4-bit indices."""
    n_rows = len(x)
    xb = x.reshape(n_rows, -1, 8, 32)
    with np.errstate(all="ignore"):
        scales = _group_scales(xb.reshape(-1, 32), _weights(xb, imatrix, 256).reshape(-1, 32)).reshape(-1, 8)
        at = np.argmax(np.abs(scales), axis=1)[:, None]
        max_scale = np.where(np.abs(np.take_along_axis(scales, at, axis=1)) > 0,
                             np.take_along_axis(scales, at, axis=1), F32(0))  # fmt: skip
        d = -max_scale / F32(32)  # (blocks, 1)
        inv = np.where(d != 0, F32(1) / d, F32(0))
        ls = np.clip(nearest_int(inv * scales), -32, 31)
        dl = d * ls.astype(F32)
        inv_dl = np.where(dl != 0, F32(1) / dl, F32(0))
        idx = best_index(_values(), inv_dl[:, :, None] * xb.reshape(-1, 8, 32))
    ls = (ls + 32).astype(np.uint16)
    out = np.empty((len(d), 136), dtype=np.uint8)
    out[:, 0:2] = fp16_bits(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = (
        ((ls >> 4) << np.arange(0, 16, 2, dtype=np.uint16)).sum(axis=1, dtype=np.uint16)[:, None].view(np.uint8)
    )
    low = (ls & 15).astype(np.uint8)
    out[:, 4:8] = low[:, 0::2] | low[:, 1::2] << 4
    out[:, 8:] = _pack_nibbles(idx).reshape(-1, 128)
    return out.reshape(n_rows, -1)


QUANTIZERS = {GGMLType.IQ4_NL: quantize_iq4_nl, GGMLType.IQ4_XS: quantize_iq4_xs}
