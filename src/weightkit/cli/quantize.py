"""`weightkit quantize`: re-quantize a GGUF model, with a progress bar and a before/after summary (or, with
`--dry-run`, the plan: each tensor's type change and the sizes, nothing written)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..dtypes import ggml_type
from ..errors import ArgumentError
from ..llama_quantize import QuantizeOptions, QuantizeReport, quantize_gguf
from .render import byte_progress, human_bytes, print_json, printable


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
