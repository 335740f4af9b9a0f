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
pull >= 0.8x (at most 1.25 times curl's time).
"""

from __future__ import annotations

import argparse
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


def row(label: str, seconds: float, base: float, size: int) -> str:
    return f"  {label:<40} {seconds:7.3f} s  {size / seconds / 1e6:8.1f} MB/s   {base / seconds:5.2f}x"


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

            print(f"pull {path.name} ({size / 1e6:.1f} MB, {len(blobs)} blobs) from docker-registry on 127.0.0.1")
            print("  (ratio: speed relative to curl; the goal for pull is >= 0.8x)")
            base, _ = best_of(curl_only, args.repeat, before=fresh)
            print(row("curl (same blobs, nothing checked)", base, base, size))
            print(
                row(
                    "curl + sync (the files on disk)",
                    best_of(curl_then("sync"), args.repeat, before=fresh)[0],
                    base,
                    size,
                )
            )
            print(row("curl + sha256sum", best_of(curl_then("sha256sum"), args.repeat, before=fresh)[0], base, size))
            dd = ["dd", "if=/dev/zero", f"of={files / 'dd'}", "bs=1M", f"count={-(-size >> 20)}", "conv=fdatasync"]
            disk, _ = best_of(
                lambda: subprocess.run(dd, check=True, stderr=subprocess.DEVNULL), args.repeat, before=fresh
            )
            print(row("dd + fdatasync (the disk's floor)", disk, base, size))

            def pulled() -> None:
                result = pull(name, Store(target), insecure=True)
                assert result.transferred == size and Store(target).manifest_bytes(name) == source.manifest_bytes(name)

            print(row("weightkit pull (verified, synced)", best_of(pulled, args.repeat, before=fresh)[0], base, size))
            for label, patch in (
                ("  diagnostic: fsync skipped", mock.patch("os.fsync")),
                ("  diagnostic: no early writeback", mock.patch.object(follow, "start_writeback")),
            ):
                with patch:
                    print(row(label, best_of(pulled, args.repeat, before=fresh)[0], base, size))
        finally:
            registry.stop()


if __name__ == "__main__":
    main()
