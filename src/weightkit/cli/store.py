"""`weightkit create / ls / show / rm / verify / prune`: Ollama's model store from the command line."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..errors import ArgumentError, WeightkitError
from ..llama_quantize import QuantizeOptions
from ..ollama import PruneReport, Store, create_from_checkpoint, create_from_gguf, create_from_hf_gguf, parse_name
from ..ollama.create import create_from_request, read_modelfile
from ..ollama.modelfile import stored_modelfile
from ..ollama.names import ModelName
from ..ollama.store import MEDIA, Manifest, parse_manifest
from ..ollama.template_library import library_name
from ..quant.mlx import is_mlx_mode
from ..safetensors import SafetensorsFile
from .options import StoreOption, command_app
from .render import byte_progress, console, human_bytes, print_json

app = command_app()

NameArgument = Annotated[str, typer.Argument(help="A model in the store.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
QUANTIZE_HELP = (
    "For checkpoints: int4, int8, nvfp4, mxfp4 or mxfp8 (MLX modes: tensor blobs, as Ollama's safetensors models), "
    "or a llama.cpp type such as Q4_K_M, Q8_0 or F16 (converted to a GGUF model layer, as llama.cpp's converter and "
    "llama-quantize would make it). With -f, a Modelfile's GGUF or stored model too, as ollama create -q: "
    "F32, F16, BF16, Q8_0, Q4_K_S or Q4_K_M, from an F16, BF16 or F32 model."
)


@app.command()
def create(
    name: Annotated[str, typer.Argument(help="The model's name, e.g. mymodel:latest.")],
    source: Annotated[
        Path | None, typer.Option("--from", help="A GGUF file, or a Hugging Face safetensors checkpoint folder.")
    ] = None,
    modelfile: Annotated[
        Path | None,
        typer.Option(
            "--file", "-f", help="An Ollama Modelfile (FROM, PARAMETER, TEMPLATE, SYSTEM, ...), as ollama create -f."
        ),
    ] = None,
    quantize: Annotated[str | None, typer.Option("--quantize", help=QUANTIZE_HELP)] = None,
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the new manifest's layers as JSON.")] = False,
) -> None:
    """Import a model into Ollama's store, from a file or folder (--from) or a Modelfile (-f)."""
    if (source is None) == (modelfile is None):
        raise ArgumentError("create takes one of --from SOURCE or -f Modelfile")
    if modelfile is not None:
        run_create_modelfile(Store(store), name, modelfile, quantize, as_json, console)
        return
    run_create(Store(store), name, source, quantize, as_json, console)


@app.command("ls")
def list_models(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """List the models in Ollama's store."""
    run_ls(Store(store), as_json, console)


@app.command()
def show(
    name: NameArgument,
    store: StoreOption = None,
    as_json: JsonOption = False,
    modelfile: Annotated[
        bool, typer.Option("--modelfile", help="Print the model as a Modelfile, as ollama show --modelfile.")
    ] = False,
) -> None:
    """Show a stored model's manifest: config, layers, sizes."""
    if modelfile:
        text = stored_modelfile(Store(store), name)
        if as_json:
            print_json({"modelfile": text})
        else:
            console.out(text, end="", highlight=False)
        return
    run_show(Store(store), name, as_json, console)


@app.command()
def rm(
    name: NameArgument,
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the removed blobs' digests as JSON.")] = False,
) -> None:
    """Remove a model, and the blobs no other model uses."""
    run_rm(Store(store), name, as_json, console)


@app.command()
def verify(
    name: NameArgument,
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (exit status 1 still marks damage).")] = False,
) -> None:
    """Re-hash every blob of a model and report any that do not match."""
    run_verify(Store(store), name, as_json, console)


@app.command()
def prune(
    store: StoreOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the files removed and the bytes freed as JSON.")
    ] = False,
) -> None:
    """Remove blobs no model uses and files left by interrupted imports (never a running import's).

    Run it while Ollama is not pulling or creating a model: Ollama takes no weightkit lock, and its new blobs
    are named by no manifest until it finishes.
    """
    run_prune(Store(store), dry_run, as_json, console)


def run_create(store: Store, name: str, source: Path, quantize: str | None, as_json: bool, console: Console) -> None:
    model_name = parse_name(name)
    if not source.exists():
        raise WeightkitError(f"{source}: no such file or folder")
    if quantize and not source.is_dir():
        raise ArgumentError("--quantize applies to safetensors checkpoints; quantize GGUFs with weightkit quantize")
    with byte_progress("importing", console, as_json) as update:
        if source.is_dir() and quantize and not is_mlx_mode(quantize):
            manifest = create_from_hf_gguf(store, model_name, source, _llama_type(quantize), progress=update)
        elif source.is_dir():
            manifest = create_from_checkpoint(store, model_name, source, quantize=quantize, progress=update)
        else:
            manifest = create_from_gguf(store, model_name, source, progress=update)
    _print_created(model_name, manifest, as_json, console)


def _print_created(model_name: ModelName, manifest: Manifest, as_json: bool, console: Console,
                   template_given: bool = False) -> None:  # fmt: skip
    """The new model's layers (--json), or one line, after Ollama's status for a library template it chose."""
    if as_json:
        layers = [layer.to_json() for layer in manifest.layers]
        print_json({"model": model_name.short, "size": manifest.size, "layers": layers})
        return
    template = next((layer for layer in manifest.layers if layer.media_type == MEDIA + "template"), None)
    detected = template is not None and not template_given and not template.from_
    if detected and (found := library_name(template.digest)) is not None:
        console.print(f"using autodetected template {found}", highlight=False)
    console.print(f"created {model_name.short} ({human_bytes(manifest.size)}, {len(manifest.layers)} layers)")


def run_create_modelfile(
    store: Store, name: str, modelfile: Path, quantize: str | None, as_json: bool, console: Console
) -> None:
    model_name = parse_name(name)
    request = read_modelfile(modelfile)
    for warning in request.warnings:  # Ollama prints them on stdout; with --json that holds the answer alone
        (Console(stderr=True) if as_json else console).print(warning, highlight=False)
    with byte_progress("importing", console, as_json) as update:
        manifest = create_from_request(store, model_name, request, progress=update, quantize=quantize)
    _print_created(model_name, manifest, as_json, console, bool(request.template))


def _llama_type(quantize: str) -> QuantizeOptions:
    """--quantize as a llama.cpp type, when it names no MLX mode."""
    try:
        return QuantizeOptions(quantize)
    except ArgumentError:
        raise ArgumentError(
            f"--quantize {quantize!r}: an MLX mode (int4, int8, nvfp4, mxfp4, mxfp8) or a llama.cpp type (Q4_K_M, "
            "Q8_0, F16, ...)"
        ) from None


def run_ls(store: Store, as_json: bool, console: Console) -> None:
    rows = []
    for name, path in store.models():
        try:
            manifest = parse_manifest(path, path.read_bytes())
            size = manifest.size
        except WeightkitError:
            size = None
        modified = datetime.fromtimestamp(path.stat().st_mtime)
        rows.append({"name": name.short, "size": size, "modified": modified.isoformat(timespec="seconds")})
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"models in {store.root}", title_justify="left")
    for col in ("name", "size", "modified"):
        table.add_column(col, justify="right" if col == "size" else "left")
    for r in rows:
        table.add_row(r["name"], "?" if r["size"] is None else human_bytes(r["size"]), r["modified"])
    console.print(table)


def _quant_types(store: Store, layer) -> list[str]:
    """The quant types a tensor blob declares in its metadata (none for unquantized blobs)."""
    if not layer.media_type.endswith(".tensor"):
        return []
    with SafetensorsFile(store.blob_path(layer.digest)) as blob:
        return sorted({v for k, v in blob.metadata.items() if k == "quant_type" or k.endswith(".quant_type")})


def run_show(store: Store, name: str, as_json: bool, console: Console) -> None:
    model_name = parse_name(name)
    manifest = store.manifest(model_name)
    config = json.loads(store.blob_path(manifest.config.digest).read_bytes() or b"{}")
    quants = [_quant_types(store, layer) for layer in manifest.layers]
    if as_json:
        doc = {
            "name": str(model_name),
            "size": manifest.size,
            "config": config,
            "layers": [{**layer.to_json(), "quant_types": q} for layer, q in zip(manifest.layers, quants, strict=True)],
        }
        print_json(doc)
        return
    table = Table(title=model_name.short, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for key in ("model_format", "model_family", "model_type", "file_type", "requires", "parser", "renderer"):
        if config.get(key):
            table.add_row(key.replace("_", " "), str(config[key]))
    table.add_row("size", human_bytes(manifest.size))
    console.print(table)
    layers = Table(title=f"layers ({len(manifest.layers)})", title_justify="left")
    for col in ("media type", "name", "quant", "size", "digest"):
        layers.add_column(col, justify="right" if col == "size" else "left")
    for layer, q in zip(manifest.layers, quants, strict=True):
        layers.add_row(
            layer.media_type.removeprefix(MEDIA),
            layer.name,
            ",".join(q),
            human_bytes(layer.size),
            layer.digest[:19] + "…",
        )
    console.print(layers)


def run_rm(store: Store, name: str, as_json: bool, console: Console) -> None:
    model_name = parse_name(name)
    removed = store.remove(model_name)
    if as_json:
        print_json({"model": model_name.short, "removed_blobs": removed})
        return
    console.print(f"deleted {model_name.short}; removed {len(removed)} blobs no other model uses")


def run_verify(store: Store, name: str, as_json: bool, console: Console) -> None:
    model_name = parse_name(name)
    problems = store.verify(model_name)
    if as_json:
        found = [{"digest": layer.digest, "layer": layer.name or layer.media_type, "problem": problem}
                 for layer, problem in problems]  # fmt: skip
        print_json({"model": model_name.short, "ok": not problems, "problems": found})
    else:
        for layer, problem in problems:
            console.print(f"[red]bad blob[/red] {layer.digest} ({layer.name or layer.media_type}): {problem}")
    if problems:
        raise WeightkitError(f"{model_name.short}: {len(problems)} blobs do not match the manifest")
    if not as_json:
        console.print(f"{model_name.short}: every blob matches its digest")


def run_prune(store: Store, dry_run: bool, as_json: bool, console: Console) -> None:
    report = store.prune(dry_run=dry_run)
    if as_json:
        print_json({
            "dry_run": dry_run,
            "removed": [{"path": str(r.path), "kind": r.kind, "bytes": r.size} for r in report.removed],
            "bytes_freed": report.bytes_freed,
            "in_use": [str(path) for path in report.in_use],
            "unreadable_manifests": [str(path) for path in report.unreadable],
        })  # fmt: skip
    else:
        _print_pruned(store, report, console)
    if report.unreadable:
        more = f" (and {len(report.unreadable) - 1} more)" if len(report.unreadable) > 1 else ""
        raise WeightkitError(
            f"kept every unused blob: cannot read manifest {report.unreadable[0]}{more}, which could name any of "
            "them; repair or delete it, then prune again"
        )


def _print_pruned(store: Store, report: PruneReport, console: Console) -> None:
    if report.removed:
        table = Table(
            title=f"{'would remove' if report.dry_run else 'removed'} from {store.root}", title_justify="left"
        )
        for col in ("kind", "size", "file"):
            table.add_column(col, justify="right" if col == "size" else "left")
        for r in report.removed:
            table.add_row(r.kind, human_bytes(r.size), str(r.path.relative_to(store.root)))
        console.print(table)
        verb = "would free" if report.dry_run else "freed"
        console.print(f"{_files(len(report.removed))}, {verb} {human_bytes(report.bytes_freed)}")
    else:
        console.print(f"nothing to prune in {store.root}")
    if report.in_use:
        console.print(f"kept {_files(len(report.in_use))} that a running import is writing")


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"
