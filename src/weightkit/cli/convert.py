"""`weightkit convert`: a Hugging Face checkpoint folder to GGUF, or a GGUF to a Hugging Face folder (`--to hf`),
with a progress bar and a summary."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..convert.hf import convert_hf
from ..convert.tohf import convert_gguf_to_hf
from ..llama_quantize import QuantizeOptions
from .render import byte_progress, human_bytes, human_count, print_json


def run_convert(
    src: Path, dst: Path, outtype: str, options: QuantizeOptions | None, *, as_json: bool, console: Console
) -> None:
    with byte_progress("converting", console, as_json) as update:
        report = convert_hf(
            src, dst, outtype, progress=lambda name, done, total: update(done, total, name), quantize=options
        )
    types = Counter(kind for kind, _ in report.tensors.values())
    if as_json:
        print_json(
            {
                "source": report.source,
                "output": report.output,
                "hf_architecture": report.hf_architecture,
                "architecture": report.architecture,
                "outtype": report.outtype,
                "type": report.quantized,
                "file_type": report.file_type,
                "parameters": report.parameters,
                "size_label": report.size_label,
                "metadata_keys": report.metadata_keys,
                "bytes": report.bytes_written,
                "tensor_types": dict(sorted(types.items())),
                "tensors": {
                    name: {"type": kind, "shape": list(shape)} for name, (kind, shape) in report.tensors.items()
                },
            }
        )
        return
    mix = ", ".join(f"{n} {kind}" for kind, n in sorted(types.items()))
    console.print(
        f"{escape(report.hf_architecture)} -> {report.architecture}, --outtype {report.outtype}"
        f"{f' then {report.quantized}' if report.quantized else ''}: "
        f"{len(report.tensors)} tensors ({mix}), {human_count(report.parameters)} parameters "
        f"({escape(str(report.size_label))}), {report.metadata_keys} metadata keys; "
        f"{human_bytes(report.bytes_written)} written to {escape(report.output)}"
    )


def run_export(src: Path, dst: Path, dtype: str, *, as_json: bool, console: Console) -> None:
    with byte_progress("converting", console, as_json) as update:
        report = convert_gguf_to_hf(src, dst, dtype, progress=lambda name, done, total: update(done, total, name))
    if as_json:
        print_json(
            {
                "source": report.source,
                "output": report.output,
                "architecture": report.architecture,
                "hf_architecture": report.hf_architecture,
                "dtype": report.dtype,
                "files": report.files,
                "bytes": report.bytes_written,
                "tensors": {
                    name: {"dtype": kind, "shape": list(shape)} for name, (kind, shape) in report.tensors.items()
                },
            }
        )
        return
    console.print(
        f"{report.architecture} -> {escape(report.hf_architecture)}, --dtype {report.dtype}: "
        f"{len(report.tensors)} tensors, {len(report.files)} files; "
        f"{human_bytes(report.bytes_written)} written to {escape(report.output)}"
    )
