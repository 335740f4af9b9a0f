"""`weightkit quantize`: re-quantize a GGUF model, with a progress bar and a before/after summary (or, with
`--dry-run`, the plan: each tensor's type change and the sizes, nothing written)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..convert import QuantizeReport, quantize_gguf
from ..convert.options import parse_kv_override, parse_prune_layers, parse_tensor_type, read_tensor_types
from ..convert.quantize import resolve_target
from ..dtypes import ggml_type
from ..errors import WeightkitError
from .render import byte_progress, human_bytes, print_json, printable


def run_quantize(
    src: Path,
    dst: Path | None,
    target: str,
    *,
    mix: bool = False,
    output_type: str | None,
    token_embedding_type: str | None,
    tensor_types: Sequence[str] = (),
    tensor_type_files: Sequence[Path] = (),
    keep_output: bool = False,
    kv_overrides: Sequence[str] = (),
    keep_split: bool = False,
    prune_layers: str | None = None,
    imatrix: Path | None,
    include_weights: Sequence[str] = (),
    exclude_weights: Sequence[str] = (),
    dry_run: bool = False,
    as_json: bool,
    console: Console,
) -> None:
    resolve_target(target, mix)  # an unknown name fails before any work
    for name in (output_type, token_embedding_type):
        if name is not None:
            _check_type(name)
    if dst is None and not dry_run:
        raise WeightkitError("give an output path, or --dry-run to see the plan only")
    options = dict(
        output_type=output_type,
        token_embedding_type=token_embedding_type,
        tensor_types=[parse_tensor_type(option) for option in tensor_types]
        + [entry for path in tensor_type_files for entry in read_tensor_types(path)],
        keep_output=keep_output,
        kv_overrides=[parse_kv_override(option) for option in kv_overrides],
        keep_split=keep_split,
        prune_layers=parse_prune_layers(prune_layers) if prune_layers else [],
        imatrix=imatrix,
        include_weights=include_weights,
        exclude_weights=exclude_weights,
        mix=mix,
    )
    if dry_run:
        report = quantize_gguf(src, None, target, dry_run=True, **options)
    else:
        with byte_progress("quantizing", console, as_json) as update:
            report = quantize_gguf(
                src, dst, target, progress=lambda name, done, total: update(done, total, name), **options
            )
    if as_json:
        summary = {
            "source": str(src),
            "output": None if dry_run else str(dst),
            "outputs": report.outputs,
            "type": report.target,
            "dry_run": dry_run,
            "bytes_before": report.bytes_before,
            "bytes_after": report.bytes_after,
            "changed": {name: {"from": old, "to": new} for name, (old, new) in report.changes.items()},
            "requantized": _requantized(report),
        }
        print_json(summary)
        return
    if report.changes:
        if dry_run:
            console.print(_changes_table(report))
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
        f"{report.target}: tensor data {human_bytes(report.bytes_before)} -> {human_bytes(report.bytes_after)} "
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


def _check_type(name: str) -> None:
    try:
        ggml_type(name)
    except ValueError as e:
        raise WeightkitError(f"{e}; types are named as in ggml, e.g. Q4_K, Q8_0, IQ4_XS") from None
