"""`weightkit pull / push / cp`: models between the store and a registry, and new names in the store."""

from __future__ import annotations

from collections import Counter

from rich.console import Console

from ..ollama import Store, parse_name
from ..registry import TransferResult, pull, push
from .render import byte_progress, human_bytes, print_json


def run_pull(store: Store, name: str, insecure: bool, as_json: bool, console: Console) -> None:
    with byte_progress("pulling", console, as_json) as update:
        result = pull(name, store, insecure=insecure, progress=update)
    _report("pulled", result, as_json, console)


def run_push(store: Store, name: str, insecure: bool, as_json: bool, console: Console) -> None:
    with byte_progress("pushing", console, as_json) as update:
        result = push(name, store, insecure=insecure, progress=update)
    _report("pushed", result, as_json, console)


def run_cp(store: Store, source: str, destination: str, as_json: bool, console: Console) -> None:
    src, dst = parse_name(source), parse_name(destination)
    store.copy(src, dst)
    if as_json:
        print_json({"source": str(src), "destination": str(dst)})
        return
    console.print(f"copied '{src.short}' to '{dst.short}'", markup=False, highlight=False)


def _report(verb: str, result: TransferResult, as_json: bool, console: Console) -> None:
    if as_json:
        blobs = [{"digest": b.digest, "size": b.size, "status": b.status} for b in result.blobs]
        print_json({"model": str(result.name), "digest": result.digest, "size": result.size,
                    "transferred": result.transferred, "blobs": blobs})  # fmt: skip
        return
    counts = Counter(b.status for b in result.blobs)
    statuses = ", ".join(f"{n} {status}" for status, n in counts.items())
    console.print(
        f"{verb} {result.name.short} ({human_bytes(result.size)}; {len(result.blobs)} blobs: {statuses}; "
        f"{human_bytes(result.transferred)} transferred), ID {result.digest[7:19]}",
        markup=False,
        highlight=False,
    )
