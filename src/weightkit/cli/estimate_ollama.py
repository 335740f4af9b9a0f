"""`weightkit estimate --engine ollama`: Ollama's retired estimate and layout, per context, side by side."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from .. import open as open_model
from ..errors import FullFitRequired, SystemMemoryExceeded, WeightkitError
from ..memory import GPU, OllamaEstimate, OllamaSettings, SystemMemory, estimate
from .render import human_bytes, print_json, remote_json, remote_note


def _one(model, gpus, system, settings: OllamaSettings) -> tuple[OllamaEstimate | None, str | None]:
    try:
        return estimate(model, settings, gpus, system=system), None
    except (FullFitRequired, SystemMemoryExceeded) as e:  # this context does not fit; the others may
        return None, str(e)


def _as_json(ctx: int | None, est: OllamaEstimate | None, error: str | None) -> dict:
    if est is None:
        return {"context": ctx, "error": error}
    s, g, lay = est.load, est.graph, est.layout
    return {
        "context": s.context,
        "batch": s.batch,
        "parallel": s.parallel,
        "kv_cache_type": s.kv_cache_type,
        "flash_attention": s.flash_attention,
        "weights": est.weights,
        "kv_cache": g.kv_total,
        "graph_full_offload": g.full_offload,
        "graph_partial_offload": g.partial_offload,
        "gpus": [
            {
                "id": a.id,
                "library": a.library,
                "layers": list(a.layers),
                "weights": a.weights,
                "kv": a.kv,
                "graph": a.graph,
                "total": a.total,
            }
            for a in lay.gpus
        ],
        "cpu_layers": list(lay.cpu_layers),
        "layers_on_gpu": lay.gpu_layer_count,
        "layers_total": lay.total_layers,
        "vram": lay.vram,
        "ram": lay.ram,
        "gpu_share": round(est.gpu_share, 4),
        "notes": list(est.notes),
    }


def run_ollama(path: str, *, contexts: list[int | None], gpus: list[GPU], system: SystemMemory | None,
               console: Console, as_json: bool, remote: bool = False, insecure: bool = False,
               **options) -> None:  # fmt: skip
    """The Ollama engine: its estimate and layout per context, side by side."""
    requests = [OllamaSettings(context=ctx, **options) for ctx in contexts]
    with open_model(path, remote=remote, insecure=insecure) as model:
        if model.format != "gguf":
            raise WeightkitError(f"{path}: the estimate follows Ollama's llama engine, which loads GGUF models")
        results = [_one(model, gpus, system, settings) for settings in requests]
    if as_json:
        remote_doc = remote_json(model)
        extra = {"remote": remote_doc} if remote_doc else {}
        print_json([_as_json(c, e, err) | extra for c, (e, err) in zip(contexts, results, strict=True)])
        return
    table = Table(title=f"{Path(path).name}: memory as Ollama would load it", title_justify="left")
    table.add_column("", style="bold")
    for ctx, (est, _) in zip(contexts, results, strict=True):
        table.add_column(f"ctx {est.load.context if est else ctx}", justify="right")
    rows = _rows(results, gpus)
    for label, cells in rows:
        table.add_row(label, *cells)
    console.print(table)
    notes = sorted({n for est, _ in results if est for n in est.notes})
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    if note := remote_note(model):
        console.print(f"[dim]{note}[/dim]")
    fitting = [est.load.context for est, _ in results if est and est.layout.fully_offloaded and gpus]
    failing = [est.load.context for est, _ in results if est and not est.layout.fully_offloaded and gpus]
    if fitting and failing:
        console.print(
            f"fits entirely on the GPUs up to ctx {max(fitting)}; from ctx {min(failing)} layers spill to the CPU"
        )


def _rows(results, gpus) -> list[tuple[str, list[str]]]:
    def cell(fn) -> list[str]:
        return [fn(est) if est else (err or "") for est, err in results]

    rows = [
        ("parallel / batch", cell(lambda e: f"{e.load.parallel} / {e.load.batch}")),
        ("KV cache type", cell(lambda e: e.load.kv_cache_type + (" + flash attn" * e.load.flash_attention))),
        ("weights", cell(lambda e: human_bytes(e.weights))),
        ("KV cache", cell(lambda e: human_bytes(e.graph.kv_total))),
        ("graph (full offload)", cell(lambda e: human_bytes(e.graph.full_offload))),
        ("graph (partial offload)", cell(lambda e: human_bytes(e.graph.partial_offload))),
    ]  # fmt: skip
    for i, gpu in enumerate(gpus):
        label = f"GPU {gpu.id} {gpu.library} {human_bytes(gpu.free)}"
        rows.append(
            (
                label,
                cell(lambda e, i=i: f"{len(e.layout.gpus[i].layers)} layers, {human_bytes(e.layout.gpus[i].total)}"),
            )
        )
    rows += [
        ("CPU", cell(lambda e: f"{len(e.layout.cpu_layers)} layers, {human_bytes(e.layout.ram)}")),
        ("VRAM total", cell(lambda e: human_bytes(e.layout.vram))),
        ("RAM total", cell(lambda e: human_bytes(e.layout.ram))),
        ("on GPU", cell(lambda e: f"{e.gpu_share:.0%} ({e.layout.gpu_layer_count}/{e.layout.total_layers} layers)")),
    ]  # fmt: skip
    return rows
