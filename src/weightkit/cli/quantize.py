"""`weightkit quantize`: re-quantize a GGUF model, with a progress bar and a before/after summary."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..convert import quantize_gguf
from ..dtypes import ggml_type
from ..errors import WeightkitError
from .render import byte_progress, human_bytes, print_json


def run_quantize(
    src: Path,
    dst: Path,
    target: str,
    *,
    output_type: str | None,
    token_embedding_type: str | None,
    imatrix: Path | None,
    as_json: bool,
    console: Console,
) -> None:
    for name in (target, output_type, token_embedding_type):
        if name is not None:
            _check_type(name)
    with byte_progress("quantizing", console, as_json) as update:
        report = quantize_gguf(
            src,
            dst,
            target,
            output_type=output_type,
            token_embedding_type=token_embedding_type,
            imatrix=imatrix,
            progress=lambda name, done, total: update(done, total, name),
        )
    if as_json:
        summary = {
            "source": str(src),
            "output": str(dst),
            "type": ggml_type(target).name,
            "bytes_before": report.bytes_before,
            "bytes_after": report.bytes_after,
            "changed": {name: {"from": old, "to": new} for name, (old, new) in report.changes.items()},
        }
        print_json(summary)
        return
    table = Table(title=f"{src.name} -> {dst.name}", title_justify="left")
    table.add_column("tensors", justify="right")
    table.add_column("from")
    table.add_column("to")
    for (old, new), n in sorted(Counter(report.changes.values()).items()):
        table.add_row(str(n), old, new)
    console.print(table)
    ratio = report.bytes_after / report.bytes_before if report.bytes_before else 1.0
    console.print(
        f"tensor data {human_bytes(report.bytes_before)} -> {human_bytes(report.bytes_after)} "
        f"({ratio:.1%}); {len(report.changes)} tensors changed type; written to {dst}"
    )


def _check_type(name: str) -> None:
    try:
        ggml_type(name)
    except ValueError as e:
        raise WeightkitError(f"{e}; types are named as in ggml, e.g. Q4_K, Q8_0, IQ4_XS") from None
