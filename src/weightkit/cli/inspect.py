"""`weightkit inspect`: what a model file holds, for people (tables) and scripts (--json)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .. import open as open_model
from ..model import ModelFile
from ..summary import ModelSummary, summarize
from .options import InsecureOption, RemoteOption, check_insecure, command_app
from .render import (
    console,
    human_bytes,
    human_count,
    json_value,
    preview,
    print_json,
    printable,
    remote_json,
    remote_note,
    type_label,
)

app = command_app()


def inspect_json(model: ModelFile) -> dict:
    """Everything `inspect` knows, as plain JSON-ready data."""
    md = model.metadata
    typed = getattr(md, "typed", None)
    metadata = {}
    for key in md:
        entry = {"value": json_value(md[key])}
        if typed is not None:
            v = typed(key)
            entry["type"] = v.type.name
            if v.element is not None:
                entry["element_type"] = v.element.name
        metadata[key] = entry
    missing = getattr(model, "missing", {})
    tensors = [
        {
            "name": t.name,
            "type": t.dtype.name,
            "shape": list(t.shape),
            "offset": t.offset,
            "nbytes": t.nbytes,
            **({"shard": t.shard} if t.shard else {}),
            **({"missing_bytes": missing[t.name]} if t.name in missing else {}),
        }
        for t in model.tensors.values()
    ]
    doc = {
        "path": str(model.path),
        "format": model.format,
        "summary": summarize(model).to_dict(),
        "metadata": metadata,
        "tensors": tensors,
    }
    remote = remote_json(model)
    return doc if remote is None else doc | {"remote": remote}


def run_inspect(
    path: str, *, tensors: bool, as_json: bool, console: Console, remote: bool = False, insecure: bool = False
) -> None:
    # Header-only: a partial download or a header written without its data still shows what it holds.
    with open_model(path, remote=remote, insecure=insecure, header_only=True) as model:
        if as_json:
            print_json(inspect_json(model))
            return
        s = summarize(model)
        console.print(_overview(model, s))
        for line in _problems(s):
            console.print(f"[bold yellow]warning:[/bold yellow] {escape(printable(line))}")
        console.print(_types_table(s))
        console.print(_metadata_table(model))
        if tensors:
            console.print(_tensors_table(model))
        note = remote_note(model)
        if note:
            console.print(f"[dim]{note}[/dim]")


def _overview(model: ModelFile, s: ModelSummary) -> Table:
    version = getattr(model, "version", None)
    fmt = model.format.upper() + (f" v{version}" if version else "")
    shards = getattr(model, "shards", None)
    if shards and len(shards) > 1:
        fmt += f", {len(shards)} {'blobs' if model.format == 'ollama' else 'shards'}"
    title = model.display_name or model.path.name
    t = Table(title=f"{escape(printable(title))}  ({fmt})", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    rows = [
        ("Architecture", s.architecture),
        ("Name", s.name),
        ("Parameters", f"{human_count(s.parameters)} ({s.parameters:,})"),
        ("Tensor data", f"{human_bytes(s.tensor_bytes)} in {s.tensor_count} tensors"),
        ("Quantization", f"{s.file_type or '-'}, {s.bits_per_weight:.2f} bits per weight overall"),
        ("Context length", s.context_length),
        ("Layers", s.block_count),
        ("Embedding", s.embedding_length),
        ("Heads", _heads(s)),
        ("Vocabulary", s.vocab_size),
    ]
    for label, value in rows:
        if value is not None:
            t.add_row(label, escape(printable(str(value))))
    return t


def _problems(s: ModelSummary) -> list[str]:
    """What is wrong with the file, plainly: tensor data missing, and what keeps llama.cpp from loading it."""
    lines = list(s.warnings)
    if s.incomplete_tensors:
        names = ", ".join(s.incomplete_tensors[:5]) + (", ..." if len(s.incomplete_tensors) > 5 else "")
        lines.insert(
            0,
            f"the file is cut short: {human_bytes(s.missing_bytes)} ({s.missing_bytes:,} bytes) of tensor data "
            f"missing; {len(s.incomplete_tensors)} of {s.tensor_count} tensors incomplete ({names})",
        )
    return lines


def _heads(s: ModelSummary) -> str | None:
    if s.head_count is None:
        return None
    kv = "" if s.head_count_kv is None else f" (KV heads {s.head_count_kv})"
    return f"{s.head_count}{kv}"


def _types_table(s: ModelSummary) -> Table:
    t = Table(title="Tensor types", title_justify="left")
    for col in ("type", "tensors", "parameters", "share", "size", "bits/weight"):
        t.add_column(col, justify="left" if col == "type" else "right")
    for u in s.types:
        share = 100 * u.parameters / s.parameters if s.parameters else 0
        t.add_row(
            u.type,
            str(u.tensors),
            human_count(u.parameters),
            f"{share:.1f}%",
            human_bytes(u.nbytes),
            f"{u.bits_per_weight:.2f}",
        )
    return t


def _metadata_table(model: ModelFile) -> Table:
    md = model.metadata
    t = Table(title=f"Metadata ({len(md)} keys)", title_justify="left")
    t.add_column("key", style="cyan", no_wrap=True)
    t.add_column("type")
    t.add_column("value", overflow="fold")
    typed = getattr(md, "typed", None)
    for key in md:
        if typed is not None:
            v = typed(key)
            t.add_row(escape(printable(key)), type_label(v), escape(preview(v)))
        else:
            t.add_row(escape(printable(key)), type(md[key]).__name__, escape(printable(str(md[key]))))
    return t


def _tensors_table(model: ModelFile) -> Table:
    t = Table(title=f"Tensors ({len(model.tensors)})", title_justify="left")
    missing = getattr(model, "missing", {})
    for col in ("name", "type", "shape", "size", "offset"):
        t.add_column(col, justify="right" if col in ("size", "offset") else "left")
    if missing:
        t.add_column("missing", justify="right")
    for info in model.tensors.values():
        row = [escape(printable(info.name)), info.dtype.name, "×".join(map(str, info.shape))]
        row += [human_bytes(info.nbytes), str(info.offset)]
        if missing:
            row.append(human_bytes(missing[info.name]) if info.name in missing else "")
        t.add_row(*row)
    return t


@app.command()
def inspect(
    path: Annotated[
        str,
        typer.Argument(
            help="A model file (GGUF, any shard of a split GGUF; safetensors; a checkpoint folder or its index), "
            "an http(s):// URL or hf://org/repo[@revision]/path of one (read by range requests, not downloaded), "
            "or a stored model's name."
        ),
    ],
    tensors: Annotated[bool, typer.Option("--tensors", help="List every tensor.")] = False,
    remote: RemoteOption = False,
    insecure: InsecureOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print everything as JSON.")] = False,
) -> None:
    """Show a model's architecture, size, quantization mix and metadata."""
    check_insecure(remote, insecure)
    run_inspect(path, tensors=tensors, as_json=as_json, console=console, remote=remote, insecure=insecure)
