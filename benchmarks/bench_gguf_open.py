"""Open a real GGUF and read all of its metadata and tensor infos: weightkit against gguf-py's GGUFReader.

    python benchmarks/bench_gguf_open.py [--repeat N] [PATH]

Both sides end with every metadata value and every tensor info in hand; gguf-py is timed for its
constructor alone (which parses everything), the cheapest way it offers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import best_of, gemma_path


def weightkit_read(path: Path) -> None:
    import weightkit

    with weightkit.open(path) as m:
        values = [m.metadata[key] for key in m.metadata]
        infos = [(t.shape, t.offset, t.nbytes) for t in m.tensors.values()]
    assert values and infos


def gguf_py_read(path: Path) -> None:
    import gguf

    gguf.GGUFReader(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", type=Path, help="a GGUF file (default: the Gemma 3 270M demo model)")
    ap.add_argument("--repeat", type=int, default=5, help="best of N runs for weightkit (gguf-py: 2)")
    args = ap.parse_args()
    path = args.path or gemma_path()
    ours, _ = best_of(lambda: weightkit_read(path), args.repeat)
    theirs, _ = best_of(lambda: gguf_py_read(path), 2)
    print(f"file: {path}")
    print(f"weightkit.open + all metadata and tensor infos: {ours * 1000:8.1f} ms")
    print(f"gguf-py GGUFReader(path):                       {theirs * 1000:8.1f} ms")
    print(f"ratio (gguf-py / weightkit): {theirs / ours:.1f}x faster")


if __name__ == "__main__":
    main()
