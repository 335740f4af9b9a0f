"""`weightkit pull` from a local registry against `curl` downloading the same blobs, in one run.

    python benchmarks/bench_pull.py [--repeat N] [PATH]

A docker-registry (Debian's; apt-get install docker-registry) is started on 127.0.0.1 with a throwaway
config, the model (default: the Gemma 3 270M demo GGUF, ~250 MB) pushed to it once, untimed. Then, best of N:
- `pull` into an empty store: manifest, blobs in parallel ranged parts, each sha256-verified and synced
  before the store takes it, the manifest written last;
- `curl` fetching the same blobs' URLs in one process (one kept-alive connection), to files, nothing checked;
- the same `curl`, then `sync` of the files (on disk, as the pull makes each blob before the store takes it);
- the same `curl`, then `sha256sum` of the files (what the pull checks, done after the download);
- `dd` writing as many bytes to a file and fdatasync-ing it: how fast this disk takes them, the floor for any
  download that is on disk when it ends.
Two diagnostics (not options: the script patches weightkit for them) show where the pull's time goes: the pull
with every fsync skipped, and with the early writeback (sync_file_range as parts arrive) turned off.
Ratios are speeds relative to the plain `curl`, as in the other scripts (above 1: faster than it); the goal is
pull >= 0.8x (at most 1.25 times curl's time). The CPU columns are the mean seconds of a run: this process and
the programs it ran, and docker-registry's.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for the tests' registry runner
from tests.registry.servers import Registry

from _common import best_of, gemma_path
from weightkit.ollama import Store, create_from_gguf
from weightkit.registry import follow, pull, push


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds so far of this process and its waited-for children, and of process `pid`."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    other = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, other


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", type=Path, help="a GGUF file (default: the Gemma 3 270M demo model)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs")
    args = ap.parse_args()
    for tool in ("docker-registry", "curl", "sync", "sha256sum", "dd"):
        if shutil.which(tool) is None:
            sys.exit(f"needs {tool} on PATH")
    path = args.path or gemma_path()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        registry = Registry(root / "registry")
        try:
            name = f"{registry.host}/library/bench:latest"
            source = Store(root / "source")
            create_from_gguf(source, name, path)
            push(name, source, insecure=True)
            manifest = source.manifest(name)
            blobs = [layer.digest for layer in (manifest.config, *manifest.layers)]
            size = sum(layer.size for layer in (manifest.config, *manifest.layers))
            urls = [f"http://{registry.host}/v2/library/bench/blobs/{digest}" for digest in blobs]
            target, files = root / "pulled", root / "curl"

            def fresh() -> None:
                shutil.rmtree(target, ignore_errors=True)
                shutil.rmtree(files, ignore_errors=True)
                files.mkdir()

            curl = ["curl", "-sSf"] + [a for i, url in enumerate(urls) for a in ("-o", str(files / f"b{i}"), url)]
            downloaded = [str(files / f"b{i}") for i in range(len(urls))]

            def curl_only() -> None:
                subprocess.run(curl, check=True)

            def curl_then(*command: str) -> Callable[[], None]:
                def run() -> None:
                    subprocess.run(curl, check=True)
                    subprocess.run([*command, *downloaded], check=True, stdout=subprocess.DEVNULL)

                return run

            times: list[float] = []  # the first is curl's, the base of the ratios

            def measure(label: str, fn: Callable[[], object]) -> None:
                """Best of N runs of `fn` (each after `fresh`), printed as a row with its mean CPU time."""
                start = cpu_seconds(registry.process.pid)
                seconds, _ = best_of(fn, args.repeat, before=fresh)
                end = cpu_seconds(registry.process.pid)
                ours, theirs = ((b - a) / args.repeat for a, b in zip(start, end, strict=True))
                times.append(seconds)
                speed = f"{size / seconds / 1e6:8.1f} MB/s   {times[0] / seconds:5.2f}x"
                print(f"  {label:<40} {seconds:7.3f} s  {speed}   cpu {ours:5.2f} s + registry {theirs:5.2f} s")

            def pulled() -> None:
                result = pull(name, Store(target), insecure=True)
                assert result.transferred == size and Store(target).manifest_bytes(name) == source.manifest_bytes(name)

            dd = ["dd", "if=/dev/zero", f"of={files / 'dd'}", "bs=1M", f"count={-(-size >> 20)}", "conv=fdatasync"]
            print(f"pull {path.name} ({size / 1e6:.1f} MB, {len(blobs)} blobs) from docker-registry on 127.0.0.1")
            print("  (ratio: speed relative to curl; the goal for pull is >= 0.8x)")
            measure("curl (same blobs, nothing checked)", curl_only)
            measure("curl + sync (the files on disk)", curl_then("sync"))
            measure("curl + sha256sum", curl_then("sha256sum"))
            measure(
                "dd + fdatasync (the disk's floor)", lambda: subprocess.run(dd, check=True, stderr=subprocess.DEVNULL)
            )
            measure("weightkit pull (verified, synced)", pulled)
            with mock.patch("os.fsync"):
                measure("  diagnostic: fsync skipped", pulled)
            with mock.patch.object(follow, "start_writeback"):
                measure("  diagnostic: no early writeback", pulled)
        finally:
            registry.stop()


if __name__ == "__main__":
    main()
