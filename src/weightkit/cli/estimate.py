"""`weightkit estimate`: does a model fit on these GPUs at this context, and how does it split?"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from .. import open as open_model
from ..errors import ArgumentError, WeightkitError
from ..memory import GPU, LlamaCppEstimate, LlamaCppSettings, SystemMemory
from ..memory.llamacpp import ProjectorEstimate, estimate, estimate_projector, fit
from ..memory.llamacpp.architectures.generic import COMPUTE, KV_CACHE, STATE
from .options import Flag, InsecureOption, RemoteOption, check_insecure, comma_list, command_app, takes_flags
from .render import console, human_bytes, print_json, remote_json, remote_note

app = command_app()


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6, "mib": 2**20,
          "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12, "tib": 2**40}  # fmt: skip
_LIBRARIES = {"cuda": "CUDA", "rocm": "ROCm", "metal": "Metal", "vulkan": "Vulkan", "rpc": "RPC", "cpu": "CPU"}


def parse_size(text: str, flag: str = "size") -> int:
    """ "24GiB", "24GB", "512MiB", "1.5TiB", or plain bytes."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m[2].lower() not in _UNITS:
        raise ArgumentError(f"{flag} {text!r}: cannot read the size (write e.g. 24GiB, 16GB, 512MiB)")
    return int(float(m[1]) * _UNITS[m[2].lower()])


def parse_contexts(text: str | None) -> list[int | None]:
    """`--ctx-size 2048,8192,32768`: one or more context lengths, 0 the model's trained length (None: the
    engine's default). The bounds are the settings' to check (llama-server's 32-bit -c)."""
    if text is None:
        return [None]
    try:
        contexts = [int(part) for part in comma_list([text])]
    except ValueError:
        contexts = []
    if not contexts or min(contexts) < 0:
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
            raise ArgumentError(
                f"--gpu {text!r}: unknown GPU library {parts[0]!r}: one of CUDA, ROCm, Metal, Vulkan, RPC"
            )
    elif len(parts) != 1:
        raise ArgumentError(f"--gpu {text!r}: cannot read the GPU (write e.g. 24GiB or CUDA:24GiB)")
    size = parse_size(parts[-1], "--gpu")
    return GPU(str(index), library, size, integrated=integrated, total=size)


def parse_tensor_split(text: str | None) -> tuple[float, ...]:
    """`--tensor-split 3,1`: each GPU's share of the layers."""
    if not text:
        return ()
    try:
        return tuple(float(part) for part in text.replace("/", ",").split(","))
    except ValueError:
        raise ArgumentError(f"--tensor-split {text!r}: expected shares like 3,1") from None


def parse_overrides(texts: list[str]) -> tuple[tuple[str, str], ...]:
    """`-ot PATTERN=BUFFER[,PATTERN=BUFFER...]`, repeatable, in order."""
    pairs = []
    for part in comma_list(texts):
        pattern, sep, buffer = part.partition("=")
        if not sep or not pattern or not buffer:
            raise ArgumentError(f"--override-tensor {part!r}: expected PATTERN=BUFFER, e.g. exps=CPU")
        pairs.append((pattern, buffer))
    return tuple(pairs)


def parse_fit_options(target: str | None, min_context: int | None) -> dict:
    """`--fit-target 1024` or `--fit-target 2048,512` (MiB per device) and `--fit-ctx N`, as fit's keywords."""
    options: dict = {}
    if target is not None:
        try:
            margins = [int(part) << 20 for part in target.split(",")]
        except ValueError:
            margins = [-1]
        if min(margins) < 0:
            raise ArgumentError(f"--fit-target {target!r}: MiB to leave free, e.g. 1024 or 2048,512")
        options["margins"] = margins[0] if len(margins) == 1 else margins
    if min_context is not None:
        if min_context < 1:
            raise ArgumentError(f"--fit-ctx {min_context}: a context of at least 1")
        options["min_context"] = min_context
    return options


#: llama-server's flags that only the llama.cpp engine reads, each the `LlamaCppSettings` field it fills (the
#: --fit ones: `fit`'s).
LLAMA_FLAGS = (
    Flag("ubatch_size", int, ("--ubatch-size", "-ub"), "Physical batch size (llama.cpp)."),
    Flag("cache_type_v", str, ("--cache-type-v", "-ctv"), "V cache type (llama.cpp)."),
    Flag("swa_full", bool, ("--swa-full",), "Full-size cache for sliding-window layers."),
    Flag("kv_unified", bool, ("--kv-unified", "-kvu"), "One KV cache for all sequences."),
    Flag("embeddings", bool, ("--embeddings", "--embedding"), "An embedding server (llama-server --embedding)."),
    Flag("tensor_split", str, ("--tensor-split", "-ts"), "Each GPU's share of the layers, e.g. 3,1.",
         parse_tensor_split),
    Flag("split_mode", str, ("--split-mode", "-sm"), "none, layer or row."),
    Flag("main_gpu", int, ("--main-gpu", "-mg"), "The GPU for --split-mode none."),
    Flag("no_kv_offload", bool, ("--no-kv-offload", "-nkvo"), "Keep the KV cache in system memory."),
    Flag("override_tensor", list[str], ("--override-tensor", "-ot"),
         "PATTERN=BUFFER[,...]: weights matching go there (CPU, CUDA0).", parse_overrides),
    Flag("cpu_moe", bool, ("--cpu-moe", "-cmoe"), "Keep every expert tensor on the CPU."),
    Flag("n_cpu_moe", int, ("--n-cpu-moe", "-ncmoe"), "Keep the first N layers' experts on the CPU."),
    Flag("lora_init_without_apply", bool, ("--lora-init-without-apply",), "Load the LoRA adapters, apply none."),
    Flag("fit", bool, ("--fit",), "Choose context and layers as llama-server's --fit does (llama.cpp)."),
    Flag("fit_target", str, ("--fit-target", "-fitt"), "MiB --fit leaves free per device (1024), or MiB,MiB,..."),
    Flag("fit_ctx", int, ("--fit-ctx", "-fitc"), "The least context --fit may choose (4096)."),
)  # fmt: skip
ENGINES = ("llama.cpp", "ollama")
APPROXIMATE = " ~"  # marks a figure the generic estimate derived rather than reproduced
FLASH_ATTN = ("on", "off", "auto")

ModelArgument = Annotated[
    str,
    typer.Argument(
        help="A GGUF file (any shard of a split model), its http(s):// URL or hf://org/repo[@revision]/path "
        "(only the header is fetched), or a stored model's name."
    ),
]
EngineOption = Annotated[
    str, typer.Option("--engine", help="llama.cpp (what llama-server allocates) or ollama (Ollama's old estimate).")
]
CtxOption = Annotated[
    str | None,
    typer.Option("--ctx-size", "-c", "--ctx", help="Context, or several: 2048,8192,32768 (0: the trained length)."),
]
BatchOption = Annotated[int | None, typer.Option("--batch-size", "-b", "--batch", help="Logical batch size.")]
ParallelOption = Annotated[
    int | None, typer.Option("--parallel", "-np", help="Parallel sequences (llama.cpp: -1 is auto, 4 slots).")
]
FlashAttnOption = Annotated[str | None, typer.Option("--flash-attn", "-fa", help="on, off or auto.")]
CacheTypeKOption = Annotated[
    str | None, typer.Option("--cache-type-k", "-ctk", "--kv-cache-type", help="K cache type: f16, q8_0, q4_0, ...")
]
GpuLayersOption = Annotated[
    int | None,
    typer.Option("--n-gpu-layers", "-ngl", "--num-gpu", help="Layers on the GPUs (-1: all; Ollama: auto)."),
]
GpuOption = Annotated[
    list[str] | None,
    typer.Option("--gpu", help="A GPU's free memory: 24GiB, CUDA:24GiB, Metal:64GiB. Repeat, or a comma list."),
]
RamOption = Annotated[str | None, typer.Option("--ram", help="Free system memory, e.g. 64GiB (checked if given).")]
MmprojOption = Annotated[
    str | None, typer.Option("--mmproj", "-mm", help="A vision or audio projector loaded beside the model (llama.cpp).")
]
LoraOption = Annotated[
    list[str] | None,
    typer.Option("--lora", help="A LoRA adapter GGUF loaded with the model (llama.cpp's --lora; repeat for more)."),
]
LoraScaledOption = Annotated[
    list[str] | None,
    typer.Option("--lora-scaled", help="FNAME:SCALE,...: adapters at a scale (llama.cpp's; 0: loaded, not applied)."),
]
MmprojOffloadOption = Annotated[
    bool, typer.Option("--no-mmproj-offload", help="Keep the projector in system memory (llama.cpp).")
]


@app.command("estimate")
@takes_flags(LLAMA_FLAGS, into="llama_flags")
def estimate_command(
    model: ModelArgument,
    engine: EngineOption = "llama.cpp",
    ctx: CtxOption = None,
    batch: BatchOption = None,
    parallel: ParallelOption = None,
    flash_attn: FlashAttnOption = None,
    cache_type_k: CacheTypeKOption = None,
    n_gpu_layers: GpuLayersOption = None,
    llama_flags: dict[str, Any] | None = None,
    gpu: GpuOption = None,
    ram: RamOption = None,
    mmproj: MmprojOption = None,
    no_mmproj_offload: MmprojOffloadOption = False,
    lora: LoraOption = None,
    lora_scaled: LoraScaledOption = None,
    remote: RemoteOption = False,
    insecure: InsecureOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """How much memory a model takes on each device, as llama.cpp (or Ollama) would load it, and whether it fits."""
    check_insecure(remote, insecure)
    llama = dict(llama_flags or {})
    if engine not in ENGINES:
        raise ArgumentError(f"--engine {engine!r}: llama.cpp or ollama")
    if engine == "ollama" and llama:
        spelling = next(flag.spelling for flag in LLAMA_FLAGS if flag.name in llama)
        raise ArgumentError(f"{spelling} applies to --engine llama.cpp, not ollama")
    if engine == "ollama" and (mmproj or no_mmproj_offload):
        raise ArgumentError("--mmproj applies to --engine llama.cpp, not ollama")
    adapters = [(name, 1.0) for name in comma_list(lora)] + parse_lora_scaled(lora_scaled)
    if engine == "ollama" and adapters:
        raise ArgumentError("--lora, --lora-scaled: for --engine llama.cpp; Ollama no longer loads LoRA adapters")
    if flash_attn not in (None, *FLASH_ATTN):
        raise ArgumentError(f"--flash-attn {flash_attn!r}: on, off or auto")
    fitting = parse_fit_options(llama.pop("fit_target", None), llama.pop("fit_ctx", None))
    fitting = fitting if llama.pop("fit", False) else None
    shared = {"batch_size": batch, "parallel": parallel, "flash_attn": flash_attn, "cache_type_k": cache_type_k,
              "n_gpu_layers": n_gpu_layers}  # fmt: skip
    settings = {flag.name: flag.value(llama[flag.name]) for flag in LLAMA_FLAGS if flag.name in llama}
    settings |= {name: value for name, value in shared.items() if value is not None}
    ollama = {"batch": 512 if batch is None else batch, "parallel": parallel, "kv_cache_type": cache_type_k,
              "flash_attention": None if flash_attn in (None, "auto") else flash_attn == "on",
              "num_gpu": -1 if n_gpu_layers is None else n_gpu_layers}  # fmt: skip
    gpus = [parse_gpu(i, text) for i, text in enumerate(comma_list(gpu))]
    free = None if ram is None else parse_size(ram, "--ram")
    run_estimate(model, engine=engine, contexts=parse_contexts(ctx), gpus=gpus, ram=free, llama=settings,
                 ollama=ollama, fit_options=fitting, remote=remote, insecure=insecure, as_json=as_json,
                 console=console, mmproj=mmproj, mmproj_offload=not no_mmproj_offload, lora=adapters)  # fmt: skip


def parse_lora_scaled(values: list[str] | None) -> list[tuple[str, float]]:
    """`--lora-scaled FNAME:SCALE,...` as llama.cpp's common/arg.cpp reads it: each item one colon, a float."""
    out = []
    for item in comma_list(values):
        parts = item.split(":")
        if len(parts) != 2:
            raise ArgumentError(f"--lora-scaled {item!r}: lora-scaled format: FNAME:SCALE")
        try:
            out.append((parts[0], float(parts[1])))
        except ValueError:
            raise ArgumentError(f"--lora-scaled {item!r}: the scale {parts[1]!r} is not a number") from None
    return out


def run_estimate(path: str, *, engine: str, contexts: list[int | None], gpus: list[GPU], ram: int | None,
                 llama: dict, ollama: dict, fit_options: dict | None = None, remote: bool = False,
                 insecure: bool = False, as_json: bool, console: Console, mmproj: str | None = None,
                 mmproj_offload: bool = True, lora: Sequence[tuple[str, float]] = ()) -> None:  # fmt: skip
    """The estimate per context; with `fit_options` (a dict, maybe empty), llama-server's --fit first; with
    `mmproj`, that projector loaded beside the model (on the first GPU unless not `mmproj_offload`); with `lora`,
    those adapter GGUFs loaded with it, each (path, scale)."""
    if engine == "ollama":
        from .estimate_ollama import run_ollama

        system = None if ram is None else SystemMemory(ram, ram, 0)
        run_ollama(path, contexts=contexts, gpus=gpus, system=system, console=console, as_json=as_json,
                   remote=remote, insecure=insecure, **ollama)  # fmt: skip
        return
    requests = [LlamaCppSettings(ctx_size=ctx or 0, **llama) for ctx in contexts]
    with ExitStack() as opened:
        model = opened.enter_context(open_model(path, remote=remote, insecure=insecure))
        if model.format != "gguf":
            raise WeightkitError(f"{path}: llama.cpp loads GGUF models; this is {model.format}")
        adapters = [opened.enter_context(open_model(a, remote=remote, insecure=insecure)) for a, _ in lora]
        scales = [scale for _, scale in lora]
        for (name, _), adapter in zip(lora, adapters, strict=True):
            if adapter.format != "gguf":
                raise WeightkitError(f"{name}: a LoRA adapter (--lora) is a GGUF file; this is {adapter.format}")
        projectors = [_projector(mmproj, settings, gpus, mmproj_offload, remote, insecure) for settings in requests]
        if fit_options is not None:
            results = [fit(model, settings, gpus, host_memory=ram, projector=projector, adapters=adapters,
                           adapter_scales=scales, **fit_options)
                       for settings, projector in zip(requests, projectors, strict=True)]  # fmt: skip
        else:
            results = [estimate(model, settings, gpus, projector=projector, adapters=adapters, adapter_scales=scales)
                       for settings, projector in zip(requests, projectors, strict=True)]  # fmt: skip
    if as_json:
        remote_doc = remote_json(model)
        docs = [_llamacpp_json(e, ram) | ({"remote": remote_doc} if remote_doc else {}) for e in results]
        print_json(docs[0] if len(docs) == 1 else docs)
        return
    for est in results:
        console.print(_llamacpp_table(Path(path).name, est, ram))
    for warning in dict.fromkeys(w for est in results for w in est.warnings):
        console.print(f"[yellow]warning:[/yellow] {warning}")
    for note in dict.fromkeys(n for est in results for n in est.notes):
        console.print(f"[yellow]note:[/yellow] {note}")
    _fit_summary(results, ram, console)
    if note := remote_note(model):
        console.print(f"[dim]{note}[/dim]")


def _projector(path: str | None, settings: LlamaCppSettings, gpus: list[GPU], offload: bool, remote: bool,
               insecure: bool) -> ProjectorEstimate | None:  # fmt: skip
    """The `--mmproj` file's estimate beside these settings (flash attention as the model's)."""
    if path is None:
        return None
    with open_model(path, remote=remote, insecure=insecure) as projector:
        if projector.format != "gguf":
            raise WeightkitError(f"{path}: a projector (--mmproj) is a GGUF file; this is {projector.format}")
        return estimate_projector(projector, gpus, offload=offload, flash_attn=settings.flash_attn)


def _projector_json(est: LlamaCppEstimate) -> dict | None:
    p = est.projector
    if p is None:
        return None
    return {"types": list(p.projector_types), "device": est.devices[p.device].name, "weights": p.weights,
            "compute": p.compute, "total": p.total, "compute_exact": p.compute_exact, "warmup": p.warmup,
            "flash_attn": p.flash_attn, "fit_bytes": p.fit_bytes}  # fmt: skip


def _llamacpp_json(est: LlamaCppEstimate, host_free: int | None) -> dict:
    s, c = est.settings, est.context
    settings = {
        "ctx_size": c.n_ctx, "n_ctx_seq": c.n_ctx_seq, "batch_size": c.n_batch, "ubatch_size": c.n_ubatch,
        "parallel": c.n_seq_max, "kv_unified": c.kv_unified, "flash_attn": "on" if c.flash_attn else "off",
        "cache_type_k": s.cache_type_k, "cache_type_v": s.cache_type_v, "swa_full": c.swa_full,
        "embeddings": c.embeddings, "n_gpu_layers": est.placement.offloaded, "split_mode": s.split_mode,
        "no_kv_offload": s.no_kv_offload,
    }  # fmt: skip
    devices = []
    for d in est.devices:
        doc = {"name": d.name, "weights": d.weights, "kv": d.kv, "recurrent": d.recurrent, "compute": d.compute,
               "output": d.output, "total": d.total, "compute_exact": d.exact}  # fmt: skip
        if est.projector is not None:
            doc["projector"] = d.projector
        if any(device.lora for device in est.devices):
            doc["lora"] = d.lora
        free = d.free if d.name != "CPU" else host_free
        if free is not None:
            doc |= {"free": free, "fits": d.total <= free}
        devices.append(doc)
    doc = {"engine": "llama.cpp", "architecture": est.hparams.arch, "settings": settings, "devices": devices,
           "fits": est.fits, "approximate": est.approximate, "guessed": dict(est.guessed),
           "warnings": list(est.warnings), "notes": list(est.notes)}  # fmt: skip
    if est.projector is not None:
        doc["projector"] = _projector_json(est)
    return doc


def _llamacpp_table(name: str, est: LlamaCppEstimate, host_free: int | None) -> Table:
    c = est.context
    if c.n_seq_max == 1:
        cells = "1 sequence"
    elif c.kv_unified:
        cells = f"{c.n_seq_max} sequences sharing the cache"
    else:
        cells = f"{c.n_seq_max} sequences of {c.n_ctx_seq}"
    layers = f"{est.placement.offloaded}/{est.hparams.n_layer_all + 1} layers on GPUs"
    title = (f"{name}: llama.cpp, ctx {c.n_ctx} ({cells}), ubatch {c.n_ubatch}, flash attention "
             f"{'on' if c.flash_attn else 'off'}, {layers}{', APPROXIMATE' if est.approximate else ''}")  # fmt: skip
    table = Table(title=title, title_justify="left", caption_justify="left")
    recurrent = any(d.recurrent for d in est.devices)
    columns = ["device", "model", "context" if recurrent else "KV cache", "compute", "output", "total"]
    if recurrent:
        columns.insert(3, "of which recurrent")
    has_free = any(d.free is not None for d in est.devices) or host_free is not None
    columns += ["free", "fits"] if has_free else []
    for column in columns:
        table.add_column(column, justify="left" if column == "device" else "right")
    guessed = est.guessed

    def mark(*figures: str) -> str:
        return APPROXIMATE if any(f in guessed for f in figures) else ""

    for d in est.devices:
        free = d.free if d.name != "CPU" else host_free
        row = [d.name, human_bytes(d.weights), human_bytes(d.kv) + mark(KV_CACHE, STATE)]
        if recurrent:
            row.append(human_bytes(d.recurrent) + mark(STATE))
        compute = mark(COMPUTE) or ("" if d.exact else " *")
        row += [human_bytes(d.compute) + compute, human_bytes(d.output), human_bytes(d.total) + mark(*guessed)]
        if has_free:
            fits = "" if free is None else "yes" if d.total <= free else "NO"
            row += ["" if free is None else human_bytes(free), fits]
        table.add_row(*row)
    captions = []
    if not all(d.exact for d in est.devices) and COMPUTE not in guessed:
        captions.append("* derived: llama.cpp's scheduler and allocator, without the GPU backend's graph optimization")
    if est.projector is not None:
        captions += _projector_row(table, est, recurrent, has_free)
    if any(d.lora for d in est.devices):
        where = ", ".join(f"{human_bytes(d.lora)} on {d.name}" for d in est.devices if d.lora)
        captions.append(f"LoRA adapters: {where}, counted in each device's total (beside the weights they adapt)")
    if captions:
        table.caption = "\n".join(captions)
    return table


def _projector_row(table: Table, est: LlamaCppEstimate, recurrent: bool, has_free: bool) -> list[str]:
    """The `--mmproj` projector's row under the devices; returns the captions it needs."""
    p = est.projector
    row = [f"+ mmproj on {est.devices[p.device].name}", human_bytes(p.weights), ""]
    if recurrent:
        row.append("")
    row += [human_bytes(p.compute) + ("" if p.compute_exact else " **"), "", human_bytes(p.total)]
    table.add_row(*row, *(["", ""] if has_free else []))
    captions = [f"the projector ({', '.join(p.projector_types)}, warmup {p.warmup}) is counted in its device's total"]
    if not p.compute_exact:
        captions.append("** derived: clip's standard ViT encoder over the warmup input, without this projector "
                        "type's own head (or on a GPU whose backend optimizes graphs itself)")  # fmt: skip
    return captions


def _fit_summary(results: list[LlamaCppEstimate], host_free: int | None, console: Console) -> None:
    """Where a list of contexts stops fitting the GPUs given."""
    if not any(e.fits is not None for e in results) or len(results) < 2:
        return
    fitting = [e.context.n_ctx for e in results if e.fits]
    failing = [e.context.n_ctx for e in results if e.fits is False]
    if fitting and failing:
        console.print(f"fits the GPUs up to ctx {max(fitting)}; from ctx {min(failing)} it does not")
    elif failing:
        console.print("does not fit the GPUs at any of these contexts (try --fit)")
