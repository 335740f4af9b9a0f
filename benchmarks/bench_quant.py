"""Benchmark weightkit's GGML kernels against gguf-py's numpy code and ggml's own C code.

This is a script, not a test. Two modes:

    python benchmarks/bench_quant.py [--types Q4_K,Q8_0] [--size 4096] [--repeat 3]
        For every GGML type: dequantize a size x size tensor with weightkit (all cores), gguf-py's
        `gguf.quants.dequantize` and ggml's `to_float` (single-threaded C, through tools/ggml_oracle.py
        when `llama_cpp` is installed); then quantize a size x size tensor to Q8_0, Q4_0, Q4_K and Q6_K
        (or to --types) with weightkit, gguf-py's `gguf.quants.quantize` and ggml's `ggml_quantize_chunk`.
    python benchmarks/bench_quant.py --gguf model.gguf [--repeat 3]
        Dequantize every tensor of a GGUF file with each of the three and compare the totals.

Speeds are in millions of elements per second, best of --repeat runs; every side writes a fresh float32
array (or fresh bytes). Ratios are weightkit's speed over the other side's (> 1: weightkit is faster).
The `=ggml` column says whether weightkit's output was bit-identical to ggml's in that run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

import weightkit
from weightkit import quant
from weightkit.dtypes import GGML_TYPES, GGMLType, ggml_type
from weightkit.quant._parallel import map_chunks, workers

try:
    import gguf
    import gguf.quants
except ImportError:  # gguf-py is optional: its columns then read "n/a"
    gguf = None

sys.path.insert(0, str(Path(__file__).parent))
from _common import best_of, release_freed_memory

REPO = Path(__file__).resolve().parents[1]
ORACLE_DIR = REPO / "tools"
DEFAULT_QUANTIZE_TYPES = ("Q8_0", "Q4_0", "Q4_K", "Q6_K")
# Rows of real quantized data per type; the benchmark tensor repeats them, so the slow IQ quantizers in
# ggml take seconds rather than minutes to make the inputs.
SAMPLE_ROWS = 16
# ggml_quantize_chunk aborts the whole process for these.
GGML_CANNOT_QUANTIZE = {GGMLType.Q8_K}

Array = np.ndarray


def load_ggml():
    """ggml's C reference (tools/ggml_oracle.py), or None when llama-cpp-python is not installed."""
    try:
        import llama_cpp  # noqa: F401  (the oracle loads the ggml library shipped inside it)
    except ImportError:
        return None
    sys.path.insert(0, str(ORACLE_DIR))
    import ggml_oracle

    return ggml_oracle


def gguf_type(t: GGMLType):
    """gguf-py's enum member for `t`, or None when gguf-py is absent or predates the type."""
    if gguf is None:
        return None
    try:
        return gguf.GGMLQuantizationType(int(t))
    except ValueError:
        return None


def gguf_dequantize_fn(t: GGMLType, raw: Array, shape: tuple[int, ...]) -> Callable[[], Array] | None:
    """A call of gguf-py's dequantizer on `raw`, or None when it has none for `t`."""
    gt = gguf_type(t)
    if gt is None:
        return None
    rows = raw.reshape(*shape[:-1], ggml_type(t).nbytes(shape[-1]))

    def run() -> Array:
        return fresh(gguf.quants.dequantize(rows, gt), rows)

    return run if supported(lambda: gguf.quants.dequantize(rows.reshape(-1, rows.shape[-1])[:1], gt)) else None


def fresh(out: Array, source: Array) -> Array:
    """`out`, copied if it is a view of `source` (gguf-py passes F32 through), so every side writes."""
    return out.copy() if np.shares_memory(out, source) else out


def supported(probe: Callable[[], object]) -> bool:
    """Whether gguf-py implements a call (it raises NotImplementedError for types it lacks)."""
    try:
        probe()
    except NotImplementedError:
        return False
    return True


def ggml_dequantize_fn(ggml, t: GGMLType, raw: Array, n: int) -> Callable[[], Array] | None:
    """A call of ggml's `to_float` on `raw`; F32, which has none, is a plain copy as in ggml."""
    if ggml is None:
        return None
    if t == GGMLType.F32:
        return lambda: raw.view(np.float32).copy()
    if not ggml.traits(int(t)).to_float:
        return None
    return lambda: ggml.dequantize(int(t), raw, n)


def make_input(ggml, t: GGMLType, size: int, rng: np.random.Generator) -> tuple[Array | None, str]:
    """Bytes of a size x size tensor of type `t` made by quantizing gaussian rows (ggml's quantizer if
    available, else weightkit's), and who made them."""
    sample = rng.standard_normal((min(SAMPLE_ROWS, size), size)).astype(np.float32)
    if ggml is not None and t not in GGML_CANNOT_QUANTIZE:
        needs_imatrix = bool(ggml.lib.ggml_quantize_requires_imatrix(int(t)))
        imatrix = rng.uniform(0.1, 2.0, size).astype(np.float32) if needs_imatrix else None
        rows, maker = ggml.quantize(int(t), sample, imatrix), "ggml"
    elif quant.can_quantize(t):
        rows, maker = quant.quantize(sample, t), "weightkit"
    else:
        return None, "nobody can quantize it"
    rows = rows.reshape(sample.shape[0], -1)
    return np.ascontiguousarray(rows[np.arange(size) % sample.shape[0]]).reshape(-1), maker


def speed(n: int, seconds: float | None) -> float | None:
    return None if seconds is None else n / seconds / 1e6


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a / b


def cells(wk: float | None, gg: float | None, cc: float | None, digits: int, faster: str) -> list[str]:
    """Table cells for the three measurements and weightkit's speed ratios; `faster` says whether the
    numbers are speeds ("higher") or times ("lower")."""
    ratios = (ratio(wk, cc), ratio(wk, gg)) if faster == "higher" else (ratio(cc, wk), ratio(gg, wk))
    values = [("n/a" if v is None else f"{v:.{digits}f}") for v in (wk, gg, cc)]
    return values + [("n/a" if r is None else f"{r:.2f}x") for r in ratios]


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    for r in [header, ["-" * w for w in widths], *rows]:
        right = [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
        print("  ".join([r[0].ljust(widths[0]), *right]))


def same(a: Array | None, b: Array | None) -> str:
    if a is None or b is None:
        return "n/a"
    return "yes" if np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8)) else "NO"


def bench_dequantize(ggml, types: list[GGMLType], size: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    shape, n = (size, size), size * size
    header = ["type", "weightkit", "gguf-py", "ggml C", "wk/ggml", "wk/gguf-py", "=ggml", "input by"]
    rows = []
    for t in types:
        raw, maker = make_input(ggml, t, size, rng)
        if raw is None:
            rows.append([t.name, "no input", "", "", "", "", "", maker])
            continue
        results: dict[str, tuple[float | None, Array | None]] = {}
        sides = {
            "wk": (lambda t=t, raw=raw: quant.dequantize(raw, t, shape)) if quant.can_dequantize(t) else None,
            "gguf": gguf_dequantize_fn(t, raw, shape),
            "ggml": ggml_dequantize_fn(ggml, t, raw, n),
        }
        for side, fn in sides.items():
            results[side] = best_of(fn, repeat) if fn is not None else (None, None)
        wk, gg, cc = (speed(n, results[s][0]) for s in ("wk", "gguf", "ggml"))
        row = [t.name, *cells(wk, gg, cc, 0, "higher")]
        if not quant.can_dequantize(t):
            row[1] = "no kernel yet"
        ggml_out = results["ggml"][1]
        rows.append([*row, same(results["wk"][1], None if ggml_out is None else ggml_out.reshape(shape)), maker])
    print_table(f"Dequantize {size}x{size} (Melem/s, best of {repeat})", header, rows)


def bench_quantize(ggml, types: list[GGMLType], size: int, repeat: int) -> None:
    x = np.random.default_rng(1).standard_normal((size, size)).astype(np.float32)
    header = ["type", "weightkit", "gguf-py", "ggml C", "wk/ggml", "wk/gguf-py", "=ggml"]
    rows = []
    for t in types:
        needs_imatrix = ggml is not None and bool(ggml.lib.ggml_quantize_requires_imatrix(int(t)))
        imatrix = np.linspace(0.1, 2.0, size, dtype=np.float32) if needs_imatrix else None
        sides: dict[str, Callable[[], Array] | None] = {
            "wk": (lambda t=t, im=imatrix: quant.quantize(x, t, im)) if quant.can_quantize(t) else None,
            "gguf": None,
            "ggml": None,
        }
        gt = gguf_type(t)
        if gt is not None and imatrix is None and supported(lambda gt=gt: gguf.quants.quantize(x[:1], gt)):
            sides["gguf"] = lambda gt=gt: fresh(gguf.quants.quantize(x, gt), x)
        if ggml is not None and t not in GGML_CANNOT_QUANTIZE:
            sides["ggml"] = lambda t=t, im=imatrix: ggml.quantize(int(t), x, im)
        results = {s: best_of(fn, repeat) if fn is not None else (None, None) for s, fn in sides.items()}
        wk, gg, cc = (speed(x.size, results[s][0]) for s in ("wk", "gguf", "ggml"))
        row = [t.name, *cells(wk, gg, cc, 0, "higher")]
        if not quant.can_quantize(t):
            row[1] = "no kernel yet"
        rows.append([*row, same(results["wk"][1], results["ggml"][1])])
    print_table(f"Quantize {size}x{size} (Melem/s, best of {repeat})", header, rows)


# --- GGUF mode ---------------------------------------------------------------------------------------


def read_gguf_tensors(path: str) -> list[tuple[str, GGMLType, tuple[int, ...], Array]]:
    """(name, GGML type, numpy shape, raw bytes in memory) of every tensor in a GGUF file."""
    with weightkit.open(path) as model:
        return [(name, info.dtype, info.shape, np.array(model.raw(name))) for name, info in model.tensors.items()]


def touch_new_pages(n: int) -> Array:
    """What any decoder of `n` float32 values into new memory pays at least: the kernel mapping and zeroing
    the pages, here on every worker thread at once as weightkit's decoders do."""
    out = np.empty(n, np.float32)
    parts = np.array_split(np.arange(0, n, 1024), workers())  # one float32 in each 4 KiB page
    map_chunks(lambda part: out.__setitem__(part, 0), parts)
    return out


def bench_gguf(ggml, path: str, repeat: int) -> None:
    tensors = read_gguf_tensors(path)
    by_type: dict[GGMLType, list[tuple[GGMLType, tuple[int, ...], Array]]] = {}
    for _, t, shape, raw in tensors:
        by_type.setdefault(t, []).append((t, shape, raw))

    def side_fns(t: GGMLType, shape: tuple[int, ...], raw: Array) -> dict[str, Callable[[], Array] | None]:
        n = int(np.prod(shape))
        return {
            "wk": (lambda: quant.dequantize(raw, t, shape)) if quant.can_dequantize(t) else None,
            "gguf": gguf_dequantize_fn(t, raw, shape),
            "ggml": ggml_dequantize_fn(ggml, t, raw, n),
        }

    header = ["type", "tensors", "Melem", "weightkit s", "gguf-py s", "ggml C s", "wk/ggml", "wk/gguf-py", "=ggml"]
    rows, totals = [], {"wk": 0.0, "gguf": 0.0, "ggml": 0.0}
    complete = {"wk": True, "gguf": True, "ggml": True}
    n_total = 0
    ggml_outputs: dict[int, Array] = {}  # by id of the raw input, to check the all-at-once decode
    for t, items in sorted(by_type.items()):
        calls = [side_fns(*item) for item in items]
        seconds: dict[str, float | None] = {}
        outputs: dict[str, list[Array] | None] = {}
        for side in totals:
            fns = [c[side] for c in calls]
            if any(fn is None for fn in fns):
                seconds[side], outputs[side], complete[side] = None, None, False
                continue
            seconds[side], outputs[side] = best_of(lambda fns=fns: [fn() for fn in fns], repeat, release_freed_memory)
            totals[side] += seconds[side]
        n = sum(int(np.prod(shape)) for _, shape, _ in items)
        n_total += n
        if outputs["ggml"] is not None:
            ggml_outputs.update((id(raw), out) for (_, _, raw), out in zip(items, outputs["ggml"], strict=True))
        exact = "n/a"
        if outputs["wk"] is not None and outputs["ggml"] is not None:
            pairs = zip(outputs["wk"], outputs["ggml"], strict=True)
            exact = "yes" if all(same(a.reshape(-1), b.reshape(-1)) == "yes" for a, b in pairs) else "NO"
        row = cells(seconds["wk"], seconds["gguf"], seconds["ggml"], 3, "lower")
        rows.append([t.name, str(len(items)), f"{n / 1e6:.1f}", *row, exact])
    total = [totals[s] if complete[s] else None for s in ("wk", "gguf", "ggml")]
    rows.append(["total", str(len(tensors)), f"{n_total / 1e6:.1f}", *cells(*total, 3, "lower"), ""])
    if complete["wk"]:
        # weightkit's way to decode a whole model (what GGUFFile.load() does): every tensor in one call.
        everything = [(raw, t, shape) for _, t, shape, raw in tensors]
        seconds_all, outs = best_of(lambda: quant.dequantize_many(everything), repeat, release_freed_memory)
        exact = "n/a"
        if len(ggml_outputs) == len(tensors):
            pairs = ((out, ggml_outputs[id(raw)]) for out, (raw, _, _) in zip(outs, everything, strict=True))
            exact = "yes" if all(same(a.reshape(-1), b.reshape(-1)) == "yes" for a, b in pairs) else "NO"
        row = cells(seconds_all, total[1], total[2], 3, "lower")
        rows.append(["all at once", str(len(tensors)), f"{n_total / 1e6:.1f}", *row, exact])
    print_table(f"Dequantize every tensor of {path} (seconds, best of {repeat})", header, rows)
    print("(rows by type and 'total': one call per tensor on every side; 'all at once': weightkit's")
    print(" dequantize_many / GGUFFile.load() over the whole file, against the other sides' totals)")
    floor, _ = best_of(lambda: touch_new_pages(n_total), repeat, release_freed_memory)
    print(f"floor: new pages for the {n_total * 4 / 2**30:.2f} GiB of float32 output, one write per page on")
    print(f" {workers()} threads and no decoding: {floor:.3f} s")
    missing = [s for s, ok in complete.items() if not ok]
    if missing:
        print(f"(no total for {', '.join(missing)}: some tensor types are not supported there)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--types", help="comma-separated GGML type names (default: every quantized type)")
    parser.add_argument("--size", type=int, default=4096, help="rows and columns of the test tensor")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best counts")
    parser.add_argument("--gguf", metavar="PATH", help="dequantize every tensor of this GGUF file instead")
    args = parser.parse_args(argv)

    ggml = load_ggml()
    have_gguf = "yes" if gguf is not None else "not installed"
    have_ggml = "llama-cpp-python, 1 thread" if ggml is not None else "not installed (pip install llama-cpp-python)"
    print(f"numpy {np.__version__}; weightkit threads: {workers()}; gguf-py: {have_gguf}; ggml C: {have_ggml}")
    if args.gguf:
        bench_gguf(ggml, args.gguf, args.repeat)
        return
    if args.types:
        types = [ggml_type(name.strip()).type for name in args.types.split(",") if name.strip()]
        quantize_types = types
    else:
        types = [t for t, info in GGML_TYPES.items() if info.quantized or t in quant.DEQUANTIZERS]
        quantize_types = [ggml_type(name).type for name in DEFAULT_QUANTIZE_TYPES]
    removed = [t.name for t in types if GGML_TYPES[t].removed]
    if removed:
        sys.exit(f"{', '.join(removed)} no longer exist in ggml")
    bad = [t.name for t in types if args.size % GGML_TYPES[t].block_size]
    if bad:
        sys.exit(f"--size {args.size} is not a multiple of the block size of {', '.join(bad)}")
    bench_dequantize(ggml, types, args.size, args.repeat)
    bench_quantize(ggml, quantize_types, args.size, args.repeat)


if __name__ == "__main__":
    main()
