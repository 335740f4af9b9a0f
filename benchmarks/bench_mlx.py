"""MLX quantization modes: weightkit's numpy kernels against mlx[cpu], in one run, printed as ratios.

    python benchmarks/bench_mlx.py [--size 4096] [--repeat N]

Quantizes (and dequantizes) a size x size BF16 weight to int4, nvfp4 and mxfp8 (and the other modes), with
outputs checked equal to MLX's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import best_of
from weightkit.quant.mlx import MLX_MODES, mlx_dequantize, mlx_quantize


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    try:
        import mlx.core as mx
    except ImportError:
        sys.exit('needs MLX: pip install "mlx[cpu]"')
    w = np.random.default_rng(0).standard_normal((args.size, args.size)).astype(ml_dtypes.bfloat16)
    w_mx = mx.array(w.astype(np.float32)).astype(mx.bfloat16)
    melem = w.size / 1e6
    print(f"{args.size}x{args.size} bfloat16 weight, Melem/s (best of {args.repeat}); ratio = weightkit / mlx")
    print(
        f"{'type':6} {'quantize wk':>12} {'mlx':>8} {'ratio':>6}   {'dequantize wk':>13} {'mlx':>8} {'ratio':>6}  same"
    )
    for q, (mode, bits, group) in MLX_MODES.items():

        def theirs_q(mode=mode, bits=bits, group=group):
            out = mx.quantize(w_mx, group_size=group, bits=bits, mode=mode)
            mx.eval(*[o for o in out if o is not None])
            return out

        ours_s, ours = best_of(lambda q=q: mlx_quantize(w, q), args.repeat)
        theirs_s, theirs = best_of(theirs_q, args.repeat)
        same = np.array_equal(ours[0], np.array(theirs[0]))

        def theirs_d(theirs=theirs, mode=mode, bits=bits, group=group):
            biases_mx = theirs[2] if len(theirs) > 2 else None
            out = mx.dequantize(theirs[0], theirs[1], biases_mx, group_size=group, bits=bits, mode=mode)
            mx.eval(out)
            return out

        dq_ours, _ = best_of(lambda q=q, o=ours: mlx_dequantize(o[0], o[1], o[2], q), args.repeat)
        dq_theirs, _ = best_of(theirs_d, args.repeat)
        print(
            f"{q:6} {melem / ours_s:12.0f} {melem / theirs_s:8.0f} {theirs_s / ours_s:6.2f}   "
            f"{melem / dq_ours:13.0f} {melem / dq_theirs:8.0f} {dq_theirs / dq_ours:6.2f}  {'yes' if same else 'NO'}"
        )


if __name__ == "__main__":
    main()
