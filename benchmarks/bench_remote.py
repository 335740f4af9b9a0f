"""Inspect a real GGUF over HTTP (nginx on 127.0.0.1, range requests) against inspecting the local file.

    python benchmarks/bench_remote.py [--repeat N] [PATH]

Both sides open the model and summarize it as `weightkit inspect` does (every metadata value, every tensor
info). The remote side also reports what it cost: the bytes fetched, as a share of the file, and the
requests made. nginx must be installed (apt-get install nginx); it is started on a free port and stopped at
the end. On 127.0.0.1 a request costs almost nothing: over a real network each adds a round trip.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for the tests' nginx runner
from tests.remote.servers import Nginx

from _common import best_of, gemma_path


def inspect(location: str | Path) -> tuple[int, int]:
    """Open and summarize; (bytes fetched, requests) for a remote model, (0, 0) for a local one."""
    import weightkit
    from weightkit.summary import summarize

    with weightkit.open(location) as m:
        summarize(m)
        values = [m.metadata[key] for key in m.metadata]
        assert values
        return (m.remote.bytes_fetched, m.remote.requests) if m.remote else (0, 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", type=Path, help="a GGUF file (default: the Gemma 3 270M demo model)")
    ap.add_argument("--repeat", type=int, default=5, help="best of N runs")
    args = ap.parse_args()
    path = (args.path or gemma_path()).resolve()
    with tempfile.TemporaryDirectory() as work:
        www = Path(work) / "www"
        www.mkdir()
        (www / path.name).symlink_to(path)
        server = Nginx([www], Path(work))
        server.start()
        try:
            url = server.url(path.name)
            local, _ = best_of(lambda: inspect(path), args.repeat)
            remote, (fetched, requests) = best_of(lambda: inspect(url), args.repeat)
        finally:
            server.stop()
    size = path.stat().st_size
    print(f"file: {path} ({size:,} bytes)")
    print(f"local inspect:                {local * 1000:8.1f} ms")
    print(f"remote inspect (nginx, HTTP): {remote * 1000:8.1f} ms, {fetched:,} bytes in {requests} requests")
    print(f"ratio (local / remote): {local / remote:.2f}x, for {100 * fetched / size:.2f}% of the file's bytes")


if __name__ == "__main__":
    main()
