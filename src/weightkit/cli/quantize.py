"""`weightkit quantize`: re-quantize a GGUF model, with a progress bar and a before/after summary (or, with
`--dry-run`, the plan: each tensor's type change and the sizes, nothing written). llama-quantize's flags are
declared here once (`QUANTIZE_FLAGS`), for `quantize` and `convert --type` alike."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..dtypes import ggml_type
from ..errors import ArgumentError
from ..llama_quantize import QuantizeOptions, QuantizeReport, quantize_gguf
from ..llama_quantize.options import parse_kv_override, parse_prune_layers, parse_tensor_type, read_tensor_types
from .options import Flag, comma_list, command_app, takes_flags
from .render import byte_progress, console, human_bytes, print_json, printable

app = command_app()

#: llama-quantize's flags that `quantize` and `convert --type` share, each the `QuantizeOptions` field it fills
#: (`--tensor-type-file`'s entries follow `--tensor-type`'s in `tensor_type`).
QUANTIZE_FLAGS = (
    Flag("pure", bool, ("--pure",), "Give every matrix the file type's base type (as llama-quantize --pure)."),
    Flag("output_tensor_type", str, ("--output-tensor-type",), "Type for output.weight (as llama-quantize)."),
    Flag("token_embedding_type", str, ("--token-embedding-type",), "Type for token_embd.weight (as llama-quantize)."),
    Flag("tensor_type", list[str], ("--tensor-type",),
         "PATTERN=TYPE: matrices whose name the regular expression matches get TYPE (as llama-quantize; "
         "repeatable, the first match wins).", lambda texts: tuple(parse_tensor_type(t) for t in texts)),
    Flag("tensor_type_file", list[Path], ("--tensor-type-file",),
         "A file of PATTERN=TYPE entries (after the --tensor-type ones).",
         lambda paths: tuple(entry for path in paths for entry in read_tensor_types(path))),
    Flag("prune_layers", str, ("--prune-layers",), "L0,L1,...: leave these layers out, renumber the rest.",
         lambda text: tuple(parse_prune_layers(text))),
    Flag("leave_output_tensor", bool, ("--leave-output-tensor",), "Keep output.weight as it is (as llama-quantize)."),
    Flag("override_kv", list[str], ("--override-kv",), "KEY=TYPE:VALUE (int, float, bool, str): set a metadata key.",
         lambda texts: tuple(parse_kv_override(t) for t in texts)),
    Flag("imatrix", Path, ("--imatrix",), "llama.cpp's imatrix GGUF, or a legacy imatrix.dat."),
    Flag("include_weights", list[str], ("--include-weights",),
         "Use the imatrix only for tensors whose name contains this (repeatable, or a comma list).",
         lambda texts: tuple(comma_list(texts))),
    Flag("exclude_weights", list[str], ("--exclude-weights",),
         "Use the imatrix for all tensors but those whose name contains this (repeatable, or a comma list).",
         lambda texts: tuple(comma_list(texts))),
)  # fmt: skip
TYPE_HELP = (
    "A llama.cpp file type, as llama-quantize takes it: Q4_K_M, Q5_K_S, Q8_0, Q4_0, IQ4_XS, IQ2_M, ... "
    "(each matrix gets that mixture's type), a GGML type with no file type (MXFP4, NVFP4), or COPY (every "
    "tensor as it is, in llama-quantize's layout: what ollama create stores)."
)


def quantize_options(type: str, given: dict[str, Any], *, keep_split: bool = False) -> QuantizeOptions:
    """llama-quantize's options as given on the command line (`QUANTIZE_FLAGS` by name), as `QuantizeOptions`."""
    fields: dict[str, Any] = {}
    for flag in QUANTIZE_FLAGS:
        if flag.name not in given:
            continue
        value = flag.value(given[flag.name])
        if flag.name == "tensor_type_file":
            fields["tensor_type"] = fields.get("tensor_type", ()) + value
        else:
            fields[flag.name] = value
    return QuantizeOptions(type, keep_split=keep_split, **fields)


@app.command()
@takes_flags(QUANTIZE_FLAGS, into="flags")
def quantize(
    src: Annotated[Path, typer.Argument(help="The GGUF model to quantize (any shard of a split model).")],
    type: Annotated[str, typer.Option("--type", "-t", help=TYPE_HELP)],
    dst: Annotated[
        Path | None, typer.Argument(help="Where to write the quantized GGUF (atomically); not with --dry-run.")
    ] = None,
    flags: dict[str, Any] | None = None,
    keep_split: Annotated[
        bool, typer.Option("--keep-split", help="Write a shard per shard of a split source (as llama-quantize).")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show each tensor's planned type and the sizes; write nothing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON (the progress bar goes to stderr).")
    ] = False,
) -> None:
    """Re-quantize a GGUF as llama-quantize does: the same file, byte for byte, for the same options."""
    options = quantize_options(type, flags or {}, keep_split=keep_split)
    run_quantize(src, dst, options, dry_run=dry_run, as_json=as_json, console=console)


def run_quantize(
    src: Path, dst: Path | None, options: QuantizeOptions, *, dry_run: bool, as_json: bool, console: Console
) -> None:
    if dst is None and not dry_run:
        raise ArgumentError("give an output path, or --dry-run to see the plan only")
    if dry_run:
        report = quantize_gguf(src, None, options, dry_run=True)
    else:
        with byte_progress("quantizing", console, as_json) as update:
            report = quantize_gguf(src, dst, options, progress=lambda name, done, total: update(done, total, name))
    if as_json:
        summary = {
            "source": str(src),
            "output": None if dry_run else str(dst),
            "outputs": report.outputs,
            "type": report.target,
            "pure": options.pure,
            "dry_run": dry_run,
            "bytes_before": report.bytes_before,
            "bytes_after": report.bytes_after,
            "changed": {name: {"from": old, "to": new} for name, (old, new) in report.changes.items()},
            "requantized": _requantized(report),
        }
        print_json(summary)
        return
    if report.changes and dry_run:
        console.print(_changes_table(report))
    print_summary(report, options, dry_run, console)


def print_summary(report: QuantizeReport, options: QuantizeOptions, dry_run: bool, console: Console) -> None:
    """The type changes by count, the sizes before and after, and where it went."""
    if report.changes:
        table = Table(title="Type changes", title_justify="left")
        table.add_column("tensors", justify="right")
        table.add_column("from")
        table.add_column("to")
        for (old, new), n in sorted(Counter(report.changes.values()).items()):
            table.add_row(str(n), old, new)
        console.print(table)
    ratio = report.bytes_after / report.bytes_before if report.bytes_before else 1.0
    where = "nothing written (--dry-run)" if dry_run else f"written to {', '.join(report.outputs)}"
    console.print(
        f"{report.target}{' --pure' * options.pure}: tensor data "
        f"{human_bytes(report.bytes_before)} -> {human_bytes(report.bytes_after)} "
        f"({ratio:.1%}); {len(report.changes)} tensors changed type; {where}"
    )
    if requantized := _requantized(report):
        console.print(
            f"note: {requantized} of them were quantized already; quantizing again loses more than quantizing "
            "the F32/F16/BF16 original (llama-quantize asks for --allow-requantize)",
            style="yellow",
        )


def _requantized(report: QuantizeReport) -> int:
    """How many tensors change from one quantized type to another."""
    return sum(ggml_type(old).quantized for old, _ in report.changes.values())


def _changes_table(report: QuantizeReport) -> Table:
    """Every tensor whose type changes, in file order."""
    table = Table(title=f"Planned changes ({report.target})", title_justify="left")
    for column in ("tensor", "from", "to"):
        table.add_column(column)
    for name, (old, new) in report.changes.items():
        table.add_row(escape(printable(name)), old, new)
    return table
