"""`weightkit estimate`: does a model fit on these GPUs at this context, and how does it split?"""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .. import open as open_model
from ..errors import ArgumentError, FullFitRequired, SystemMemoryExceeded, WeightkitError
from ..memory import GPU, OllamaEstimate, OllamaSettings, SystemMemory, estimate
from .render import human_bytes, print_json

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6, "mib": 2**20,
          "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12, "tib": 2**40}  # fmt: skip
_LIBRARIES = {"cuda": "CUDA", "rocm": "ROCm", "metal": "Metal", "vulkan": "Vulkan", "cpu": "CPU"}


def parse_size(text: str, flag: str = "size") -> int:
    """ "24GiB", "24GB", "512MiB", "1.5TiB", or plain bytes."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m[2].lower() not in _UNITS:
        raise ArgumentError(f"{flag} {text!r}: cannot read the size (write e.g. 24GiB, 16GB, 512MiB)")
    return int(float(m[1]) * _UNITS[m[2].lower()])


def parse_contexts(text: str | None) -> list[int | None]:
    """`--ctx 2048,8192,32768`: one or more context lengths (None: the engine's default)."""
    if text is None:
        return [None]
    try:
        contexts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        contexts = []
    if not contexts or min(contexts) < 1:
        raise ArgumentError(f"--ctx {text!r}: expected context lengths like 4096 or 2048,8192,32768")
    return contexts


def parse_gpu(index: int, text: str) -> GPU:
    """[LIBRARY:]SIZE[:integrated], e.g. 24GiB, CUDA:24GiB, Metal:64GiB, Vulkan:8GiB:integrated."""
    parts = text.split(":")
    integrated = parts[-1].lower() == "integrated"
    if integrated:
        parts = parts[:-1]
    library = "CUDA"
    if len(parts) == 2:
        library = _LIBRARIES.get(parts[0].lower())
        if library is None:
            raise ArgumentError(f"--gpu {text!r}: unknown GPU library {parts[0]!r}: one of CUDA, ROCm, Metal, Vulkan")
    elif len(parts) != 1:
        raise ArgumentError(f"--gpu {text!r}: cannot read the GPU (write e.g. 24GiB or CUDA:24GiB)")
    size = parse_size(parts[-1], "--gpu")
    return GPU(str(index), library, size, integrated=integrated, total=size)


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


def run_estimate(path: str, *, contexts: list[int | None], gpus_text: list[str], ram: str | None,
                 console: Console, as_json: bool, **options) -> None:  # fmt: skip
    gpus = [parse_gpu(i, text) for i, text in enumerate(gpus_text)]
    free = None if ram is None else parse_size(ram, "--ram")
    system = None if free is None else SystemMemory(free, free, 0)
    requests = [OllamaSettings(context=ctx, **options) for ctx in contexts]
    with open_model(path) as model:
        if model.format != "gguf":
            raise WeightkitError(f"{path}: the estimate follows Ollama's llama engine, which loads GGUF models")
        results = [_one(model, gpus, system, settings) for settings in requests]
    if as_json:
        print_json([_as_json(c, e, err) for c, (e, err) in zip(contexts, results, strict=True)])
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
