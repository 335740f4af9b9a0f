"""`weightkit convert`: a Hugging Face checkpoint folder to GGUF, or a GGUF to a Hugging Face folder (`--to hf`),
with a progress bar and a summary."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from ..convert.hf import LORA_OUTTYPES, convert_hf, convert_lora
from ..convert.tohf import convert_gguf_to_hf
from ..errors import ArgumentError
from ..gguf.split import ConverterSplit, parse_converter_split_size
from ..llama_quantize import QuantizeOptions
from .options import Flag, command_app, takes_flags
from .quantize import QUANTIZE_FLAGS, TYPE_HELP, quantize_options
from .render import byte_progress, console, human_bytes, human_count, print_json

app = command_app()

OUTTYPE_HELP = (
    "f32, f16, bf16, q8_0, tq1_0, tq2_0, or auto (bf16 or f16 as the checkpoint's first 16-bit matrix; else f16). "
    "With --type: the converter's type before quantizing, f32, f16 or bf16 (auto: the first matrix's own type, "
    "bf16, f16, else f32)."
)

#: convert_hf_to_gguf.py's split flags, each the `ConverterSplit` field it fills (gguf-py's rules, not gguf-split's).
SPLIT_FLAGS = (
    Flag("max_tensors", int, ("--split-max-tensors",), "Shards of at most this many tensors (as the converter)."),
    Flag("max_bytes", str, ("--split-max-size",),
         "Shards of at most this much tensor data: bytes, or N followed by K, M or G (decimal; as the converter).",
         parse_converter_split_size),
    Flag("no_tensor_first_split", bool, ("--no-tensor-first-split",),
         "Shards, the first with the metadata only (as the converter)."),
)  # fmt: skip


#: `convert`'s options for --to hf, --mmproj and --lora
DtypeOption = Annotated[
    str | None,
    typer.Option(
        "--dtype", help="With --to hf: f32, f16, bf16, or auto (F16/BF16 if all the GGUF's matrices are; else f32)."
    ),
]
MmprojOption = Annotated[
    bool,
    typer.Option(
        "--mmproj",
        help="Write the model's multimodal projector (its vision encoder and projection, for llama.cpp's "
        "--mmproj) instead of its language model: convert_hf_to_gguf.py --mmproj's file.",
    ),
]
MistralFormatOption = Annotated[
    bool,
    typer.Option(
        "--mistral-format",
        help="SRC is in Mistral's own format (params.json, consolidated.safetensors, tekken.json): "
        "convert_hf_to_gguf.py --mistral-format's file.",
    ),
]
LoraOption = Annotated[
    bool,
    typer.Option(
        "--lora",
        help="SRC is a PEFT LoRA adapter (adapter_config.json, adapter_model.safetensors): write "
        "convert_lora_to_gguf.py's adapter GGUF, for llama-server --lora (--outtype f32 unless given).",
    ),
]
BaseOption = Annotated[
    Path | None,
    typer.Option(
        "--base",
        help="With --lora: the base model's Hugging Face folder (only its config.json is read); default: the "
        "adapter config's base_model_name_or_path, when that is a local folder.",
    ),
]


@app.command()
@takes_flags(QUANTIZE_FLAGS, into="flags")
@takes_flags(SPLIT_FLAGS, into="split_flags")
def convert(
    src: Annotated[
        Path,
        typer.Argument(
            help="A Hugging Face checkpoint folder (config.json, safetensors, tokenizer); with --to hf, a GGUF."
        ),
    ],
    dst: Annotated[Path, typer.Argument(help="The GGUF file to write (atomically); with --to hf, the folder.")],
    outtype: Annotated[str | None, typer.Option("--outtype", help=OUTTYPE_HELP)] = None,
    type: Annotated[
        str | None,
        typer.Option(
            "--type",
            "-t",
            help="Quantize in the same pass, as llama-quantize would the converter's output. " + TYPE_HELP,
        ),
    ] = None,
    flags: dict[str, Any] | None = None,
    to: Annotated[
        str, typer.Option("--to", help="gguf (from a Hugging Face folder), or hf (from a GGUF, to a folder).")
    ] = "gguf",
    dtype: DtypeOption = None,
    mmproj: MmprojOption = False,
    mistral_format: MistralFormatOption = False,
    split_flags: dict[str, Any] | None = None,
    lora: LoraOption = False,
    base: BaseOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was written as JSON (the progress bar goes to stderr).")
    ] = False,
) -> None:
    """Convert a Hugging Face checkpoint to GGUF: the file llama.cpp's convert_hf_to_gguf.py writes, byte for byte
    (with --type, what llama-quantize makes of it, in one pass); or, with --to hf, a GGUF to a Hugging Face folder
    that transformers loads."""
    check_convert_flags(to, outtype=outtype, type=type, dtype=dtype, flags=flags, mmproj=mmproj, split=split_flags)
    check_lora_flags(lora, base=base, to=to, type=type, mmproj=mmproj, split=split_flags)
    if mistral_format and (lora or to == "hf"):
        raise ArgumentError("--mistral-format reads a Mistral-format folder into a GGUF; not with --lora or --to hf")
    if lora:
        run_convert_lora(src, dst, base, outtype or "f32", as_json=as_json, console=console)
    elif to == "hf":
        run_export(src, dst, dtype or "auto", as_json=as_json, console=console)
    else:
        options = None if type is None else quantize_options(type, flags or {})
        split = converter_split(split_flags)
        run_convert(src, dst, outtype or "auto", options, as_json=as_json, console=console, mmproj=mmproj, split=split,
                    mistral_format=mistral_format)  # fmt: skip


def converter_split(given: dict[str, Any] | None) -> ConverterSplit | None:
    """The converter's split flags (`SPLIT_FLAGS` by name) as a `ConverterSplit`, or None where none is given (one
    file, as the converter writes then)."""
    if not given:
        return None
    if given.get("max_tensors", 0) < 0:
        raise ArgumentError(f"--split-max-tensors must not be negative, not {given['max_tensors']}")
    return ConverterSplit(**{flag.name: flag.value(given[flag.name]) for flag in SPLIT_FLAGS if flag.name in given})


def check_convert_flags(to: str, *, outtype: str | None, type: str | None, dtype: str | None, flags: dict | None,
                        mmproj: bool = False, split: dict | None = None) -> None:  # fmt: skip
    """The flags `--to` takes: --dtype for hf; --outtype, --type and llama-quantize's flags (with --type) for gguf;
    --mmproj for gguf, without --type (a projector is not quantized in the same pass); the converter's split flags
    for gguf."""
    given = [flag.spelling for flag in QUANTIZE_FLAGS if flag.name in (flags or {})]
    if to == "hf" and split:
        raise ArgumentError("the split options apply to --to gguf")
    if to not in ("gguf", "hf"):
        raise ArgumentError(f"--to {to!r}: gguf or hf")
    if mmproj and (to == "hf" or type is not None):
        flag = "--to hf" if to == "hf" else "--type"
        raise ArgumentError(f"--mmproj writes a projector GGUF from a Hugging Face folder with --outtype; {flag} "
                            "does not apply to it")  # fmt: skip
    if to == "hf":
        if outtype is not None or type is not None:
            flag = "--outtype" if outtype is not None else "--type"
            raise ArgumentError(f"{flag} applies to --to gguf; give --dtype with --to hf")
        if given:
            raise ArgumentError(f"{given[0]} applies to --to gguf with --type")
    elif dtype is not None:
        raise ArgumentError("--dtype applies to --to hf; give --outtype with --to gguf")
    elif type is None and given:
        raise ArgumentError(f"{given[0]} is an option of the quantization: give --type too (e.g. --type Q4_K_M)")


def check_lora_flags(lora: bool, *, base: Path | None, to: str, type: str | None, mmproj: bool,
                     split: dict | None) -> None:  # fmt: skip
    """--lora takes --base and --outtype (f32, f16, bf16, q8_0: convert_lora_to_gguf.py's); --base needs --lora."""
    if not lora:
        if base is not None:
            raise ArgumentError("--base names a LoRA adapter's base model: give --lora too")
        return
    for given, flag in ((to == "hf", "--to hf"), (type is not None, "--type"), (mmproj, "--mmproj"), (split, "split")):
        if given:
            raise ArgumentError(f"--lora converts an adapter with --outtype ({', '.join(LORA_OUTTYPES)}); "
                                f"the {flag} options do not apply to it")  # fmt: skip


def run_convert_lora(src: Path, dst: Path, base: Path | None, outtype: str, *, as_json: bool,
                     console: Console) -> None:  # fmt: skip
    with byte_progress("converting", console, as_json) as update:
        report = convert_lora(src, dst, base, outtype, progress=lambda name, done, total: update(done, total, name))
    if as_json:
        print_json(
            {
                "source": report.source,
                "output": report.output,
                "hf_architecture": report.hf_architecture,
                "architecture": report.architecture,
                "outtype": report.outtype,
                "metadata_keys": report.metadata_keys,
                "bytes": report.bytes_written,
                "tensors": {
                    name: {"type": kind, "shape": list(shape)} for name, (kind, shape) in report.tensors.items()
                },
            }
        )
        return
    types = Counter(kind for kind, _ in report.tensors.values())
    mix = ", ".join(f"{n} {kind}" for kind, n in sorted(types.items()))
    console.print(
        f"LoRA adapter of {escape(report.hf_architecture)} -> {report.architecture}, --outtype {report.outtype}: "
        f"{len(report.tensors)} tensors ({mix}), {report.metadata_keys} metadata keys; "
        f"{human_bytes(report.bytes_written)} written to {escape(report.output)}"
    )


def run_convert(
    src: Path,
    dst: Path,
    outtype: str,
    options: QuantizeOptions | None,
    *,
    as_json: bool,
    console: Console,
    mmproj: bool = False,
    split: ConverterSplit | None = None,
    mistral_format: bool = False,
) -> None:
    with byte_progress("converting", console, as_json) as update:
        report = convert_hf(src, dst, outtype, progress=lambda name, done, total: update(done, total, name),
                            quantize=options, mmproj=mmproj, split=split, mistral_format=mistral_format)  # fmt: skip
    types = Counter(kind for kind, _ in report.tensors.values())
    if as_json:
        print_json(
            {
                "source": report.source,
                "output": report.output,
                "outputs": report.outputs,
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
        f"{human_bytes(report.bytes_written)} written to {escape(', '.join(report.outputs))}"
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
