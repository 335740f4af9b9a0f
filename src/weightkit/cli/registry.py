"""`weightkit pull / push / cp`: models between the store and a registry, and new names in the store."""

from __future__ import annotations

from collections import Counter
from typing import Annotated

import typer
from rich.console import Console

from ..ollama import Store, parse_name
from ..registry import TransferResult, pull, push
from .options import InsecureOption, StoreOption, command_app
from .render import byte_progress, console, human_bytes, print_json

app = command_app()

TransferJsonOption = Annotated[bool, typer.Option("--json", help="Print the blobs and what became of them as JSON.")]


@app.command("pull")
def pull_command(
    name: Annotated[str, typer.Argument(help="host[:port]/namespace/model:tag (default registry.ollama.ai/library).")],
    insecure: InsecureOption = False,
    store: StoreOption = None,
    as_json: TransferJsonOption = False,
) -> None:
    """Download a model from a registry into the store (as ollama pull); an interrupted pull resumes."""
    run_pull(Store(store), name, insecure, as_json, console)


@app.command("push")
def push_command(
    name: Annotated[
        str, typer.Argument(help="A model in the store, named for its registry: host[:port]/ns/model:tag.")
    ],
    insecure: InsecureOption = False,
    store: StoreOption = None,
    as_json: TransferJsonOption = False,
) -> None:
    """Upload a model from the store to its registry (as ollama push)."""
    run_push(Store(store), name, insecure, as_json, console)


@app.command("cp")
def copy(
    source: Annotated[str, typer.Argument(help="A model in the store.")],
    destination: Annotated[str, typer.Argument(help="Its new name (e.g. for a registry: host/ns/model:tag).")],
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Give a stored model another name (as ollama cp); pushing it then mounts its blobs on the registry."""
    run_cp(Store(store), source, destination, as_json, console)


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
