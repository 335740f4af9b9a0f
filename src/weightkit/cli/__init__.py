"""The `weightkit` command: thin subcommands that call the library and render its answers."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from typer._click import exceptions as typer_errors

from ..errors import ArgumentError, WeightkitError

app = typer.Typer(
    name="weightkit",
    help="Inspect, convert, quantize and plan memory for GGUF, safetensors and Ollama models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
#: Output to a pipe or file is laid out this wide (rich's default is 80), so a table keeps one row a line; a
#: terminal's own width, or $COLUMNS, wins.
PIPE_WIDTH = 160
console = Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else PIPE_WIDTH)
_stderr = Console(stderr=True)


RemoteOption = Annotated[
    bool,
    typer.Option(
        "--remote",
        help="The model name is a registry's (registry.ollama.ai, or the host it names; http://host/... for plain "
        "HTTP): read its manifest and GGUF header from there, not from the local store.",
    ),
]


@app.command()
def inspect(
    path: Annotated[
        str,
        typer.Argument(
            help="A model file (GGUF, any shard of a split GGUF; safetensors; a checkpoint folder or its index), "
            "an http(s):// URL or hf://org/repo[@revision]/path of one (read by range requests, not downloaded), "
            "or a stored model's name."
        ),
    ],
    tensors: Annotated[bool, typer.Option("--tensors", help="List every tensor.")] = False,
    remote: RemoteOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print everything as JSON.")] = False,
) -> None:
    """Show a model's architecture, size, quantization mix and metadata."""
    from .inspect import run_inspect

    run_inspect(path, tensors=tensors, as_json=as_json, console=console, remote=remote)


# llama-quantize's options, shared by `quantize` and `convert --type` (one declaration, one parser).
PureOption = Annotated[
    bool, typer.Option("--pure", help="Give every matrix the file type's base type (as llama-quantize --pure).")
]
OutputTensorTypeOption = Annotated[
    str | None, typer.Option("--output-tensor-type", help="Type for output.weight (as llama-quantize).")
]
TokenEmbeddingTypeOption = Annotated[
    str | None, typer.Option("--token-embedding-type", help="Type for token_embd.weight (as llama-quantize).")
]
TensorTypeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tensor-type",
        help="PATTERN=TYPE: matrices whose name the regular expression matches get TYPE (as llama-quantize; "
        "repeatable, the first match wins).",
    ),
]
TensorTypeFileOption = Annotated[
    list[Path] | None,
    typer.Option("--tensor-type-file", help="A file of PATTERN=TYPE entries (after the --tensor-type ones)."),
]
PruneLayersOption = Annotated[
    str | None, typer.Option("--prune-layers", help="L0,L1,...: leave these layers out, renumber the rest.")
]
LeaveOutputTensorOption = Annotated[
    bool, typer.Option("--leave-output-tensor", help="Keep output.weight as it is (as llama-quantize).")
]
OverrideKvOption = Annotated[
    list[str] | None,
    typer.Option("--override-kv", help="KEY=TYPE:VALUE (int, float, bool, str): set a metadata key."),
]
ImatrixOption = Annotated[
    Path | None, typer.Option("--imatrix", help="llama.cpp's imatrix GGUF, or a legacy imatrix.dat.")
]
IncludeWeightsOption = Annotated[
    list[str] | None,
    typer.Option("--include-weights", help="Use the imatrix only for tensors whose name contains this."),
]
ExcludeWeightsOption = Annotated[
    list[str] | None,
    typer.Option("--exclude-weights", help="Use the imatrix for all tensors but those whose name contains this."),
]
_TYPE_HELP = (
    "A llama.cpp file type, as llama-quantize takes it: Q4_K_M, Q5_K_S, Q8_0, Q4_0, IQ4_XS, IQ2_M, ... "
    "(each matrix gets that mixture's type), or a GGML type with no file type (MXFP4, NVFP4)."
)


def quantize_options(
    type: str,
    *,
    pure: bool = False,
    output_tensor_type: str | None = None,
    token_embedding_type: str | None = None,
    tensor_type: list[str] | None = None,
    tensor_type_file: list[Path] | None = None,
    keep_split: bool = False,
    prune_layers: str | None = None,
    leave_output_tensor: bool = False,
    override_kv: list[str] | None = None,
    imatrix: Path | None = None,
    include_weights: list[str] | None = None,
    exclude_weights: list[str] | None = None,
):
    """llama-quantize's options as given on the command line, parsed into `QuantizeOptions`."""
    from ..llama_quantize import QuantizeOptions
    from ..llama_quantize.options import parse_kv_override, parse_prune_layers, parse_tensor_type, read_tensor_types

    return QuantizeOptions(
        type,
        pure=pure,
        output_tensor_type=output_tensor_type,
        token_embedding_type=token_embedding_type,
        tensor_type=tuple(parse_tensor_type(o) for o in tensor_type or [])
        + tuple(entry for path in tensor_type_file or [] for entry in read_tensor_types(path)),
        leave_output_tensor=leave_output_tensor,
        override_kv=tuple(parse_kv_override(o) for o in override_kv or []),
        keep_split=keep_split,
        prune_layers=tuple(parse_prune_layers(prune_layers)) if prune_layers else (),
        imatrix=imatrix,
        include_weights=tuple(include_weights or []),
        exclude_weights=tuple(exclude_weights or []),
    )


@app.command()
def quantize(
    src: Annotated[Path, typer.Argument(help="The GGUF model to quantize (any shard of a split model).")],
    type: Annotated[str, typer.Option("--type", "-t", help=_TYPE_HELP)],
    dst: Annotated[
        Path | None, typer.Argument(help="Where to write the quantized GGUF (atomically); not with --dry-run.")
    ] = None,
    pure: PureOption = False,
    output_tensor_type: OutputTensorTypeOption = None,
    token_embedding_type: TokenEmbeddingTypeOption = None,
    tensor_type: TensorTypeOption = None,
    tensor_type_file: TensorTypeFileOption = None,
    keep_split: Annotated[
        bool, typer.Option("--keep-split", help="Write a shard per shard of a split source (as llama-quantize).")
    ] = False,
    prune_layers: PruneLayersOption = None,
    leave_output_tensor: LeaveOutputTensorOption = False,
    override_kv: OverrideKvOption = None,
    imatrix: ImatrixOption = None,
    include_weights: IncludeWeightsOption = None,
    exclude_weights: ExcludeWeightsOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show each tensor's planned type and the sizes; write nothing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON (the progress bar goes to stderr).")
    ] = False,
) -> None:
    """Re-quantize a GGUF as llama-quantize does: the same file, byte for byte, for the same options."""
    from .quantize import run_quantize

    options = quantize_options(
        type, pure=pure, output_tensor_type=output_tensor_type, token_embedding_type=token_embedding_type,
        tensor_type=tensor_type, tensor_type_file=tensor_type_file, keep_split=keep_split, prune_layers=prune_layers,
        leave_output_tensor=leave_output_tensor, override_kv=override_kv, imatrix=imatrix,
        include_weights=include_weights, exclude_weights=exclude_weights,
    )  # fmt: skip
    run_quantize(src, dst, options, dry_run=dry_run, as_json=as_json, console=console)


@app.command()
def convert(
    src: Annotated[
        Path,
        typer.Argument(
            help="A Hugging Face checkpoint folder (config.json, safetensors, tokenizer); with --to hf, a GGUF."
        ),
    ],
    dst: Annotated[Path, typer.Argument(help="The GGUF file to write (atomically); with --to hf, the folder.")],
    outtype: Annotated[
        str | None,
        typer.Option(
            "--outtype",
            help="f32, f16, bf16, q8_0, tq1_0, tq2_0, or auto (bf16 or f16 as the checkpoint's first 16-bit matrix; "
            "else f16). With --type: the converter's type before quantizing, f32, f16 or bf16 (auto: the first "
            "matrix's own type, bf16, f16, else f32).",
        ),
    ] = None,
    type: Annotated[
        str | None,
        typer.Option(
            "--type",
            "-t",
            help="Quantize in the same pass, as llama-quantize would the converter's output. " + _TYPE_HELP,
        ),
    ] = None,
    pure: PureOption = False,
    output_tensor_type: OutputTensorTypeOption = None,
    token_embedding_type: TokenEmbeddingTypeOption = None,
    tensor_type: TensorTypeOption = None,
    tensor_type_file: TensorTypeFileOption = None,
    prune_layers: PruneLayersOption = None,
    leave_output_tensor: LeaveOutputTensorOption = False,
    override_kv: OverrideKvOption = None,
    imatrix: ImatrixOption = None,
    include_weights: IncludeWeightsOption = None,
    exclude_weights: ExcludeWeightsOption = None,
    to: Annotated[
        str, typer.Option("--to", help="gguf (from a Hugging Face folder), or hf (from a GGUF, to a folder).")
    ] = "gguf",
    dtype: Annotated[
        str | None,
        typer.Option(
            "--dtype", help="With --to hf: f32, f16, bf16, or auto (F16/BF16 if all the GGUF's matrices are; else f32)."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was written as JSON (the progress bar goes to stderr).")
    ] = False,
) -> None:
    """Convert a Hugging Face checkpoint to GGUF: the file llama.cpp's convert_hf_to_gguf.py writes, byte for byte
    (with --type, what llama-quantize makes of it, in one pass); or, with --to hf, a GGUF to a Hugging Face folder
    that transformers loads."""
    from .convert import run_convert, run_export

    chosen = {"pure": pure, "output_tensor_type": output_tensor_type, "token_embedding_type": token_embedding_type,
              "tensor_type": tensor_type, "tensor_type_file": tensor_type_file, "prune_layers": prune_layers,
              "leave_output_tensor": leave_output_tensor, "override_kv": override_kv, "imatrix": imatrix,
              "include_weights": include_weights, "exclude_weights": exclude_weights}  # fmt: skip
    if to not in ("gguf", "hf"):
        raise ArgumentError(f"--to {to!r}: gguf or hf")
    if to == "hf":
        if outtype is not None or type is not None:
            flag = "--outtype" if outtype is not None else "--type"
            raise ArgumentError(f"{flag} applies to --to gguf; give --dtype with --to hf")
        if given := [name for name, value in chosen.items() if value]:
            raise ArgumentError(f"--{given[0].replace('_', '-')} applies to --to gguf with --type")
        run_export(src, dst, dtype or "auto", as_json=as_json, console=console)
        return
    if dtype is not None:
        raise ArgumentError("--dtype applies to --to hf; give --outtype with --to gguf")
    if type is None and (given := [name for name, value in chosen.items() if value]):
        flag = "--" + given[0].replace("_", "-")
        raise ArgumentError(f"{flag} is an option of the quantization: give --type too (e.g. --type Q4_K_M)")
    options = None if type is None else quantize_options(type, **chosen)
    run_convert(src, dst, outtype or "auto", options, as_json=as_json, console=console)


@app.command()
def estimate(
    model: Annotated[
        str,
        typer.Argument(
            help="A GGUF file (any shard of a split model), its http(s):// URL or hf://org/repo[@revision]/path "
            "(only the header is fetched), or a stored model's name."
        ),
    ],
    engine: Annotated[
        str, typer.Option("--engine", help="llama.cpp (what llama-server allocates) or ollama (Ollama's old estimate).")
    ] = "llama.cpp",
    ctx: Annotated[
        str | None,
        typer.Option("--ctx-size", "-c", "--ctx", help="Context, or several: 2048,8192,32768 (0: the trained length)."),
    ] = None,
    batch: Annotated[int | None, typer.Option("--batch-size", "-b", "--batch", help="Logical batch size.")] = None,
    ubatch: Annotated[int | None, typer.Option("--ubatch-size", "-ub", help="Physical batch size (llama.cpp).")] = None,
    parallel: Annotated[
        int | None, typer.Option("--parallel", "-np", help="Parallel sequences (llama.cpp: -1 is auto, 4 slots).")
    ] = None,
    flash_attn: Annotated[str | None, typer.Option("--flash-attn", "-fa", help="on, off or auto.")] = None,
    cache_type_k: Annotated[
        str | None, typer.Option("--cache-type-k", "-ctk", "--kv-cache-type", help="K cache type: f16, q8_0, q4_0, ...")
    ] = None,
    cache_type_v: Annotated[
        str | None, typer.Option("--cache-type-v", "-ctv", help="V cache type (llama.cpp).")
    ] = None,
    swa_full: Annotated[bool, typer.Option("--swa-full", help="Full-size cache for sliding-window layers.")] = False,
    kv_unified: Annotated[bool, typer.Option("--kv-unified", "-kvu", help="One KV cache for all sequences.")] = False,
    embeddings: Annotated[
        bool, typer.Option("--embeddings", "--embedding", help="An embedding server (llama-server --embedding).")
    ] = False,
    n_gpu_layers: Annotated[
        int | None,
        typer.Option("--n-gpu-layers", "-ngl", "--num-gpu", help="Layers on the GPUs (-1: all; Ollama: auto)."),
    ] = None,
    tensor_split: Annotated[
        str | None, typer.Option("--tensor-split", "-ts", help="Each GPU's share of the layers, e.g. 3,1.")
    ] = None,
    split_mode: Annotated[str | None, typer.Option("--split-mode", "-sm", help="none, layer or row.")] = None,
    main_gpu: Annotated[int | None, typer.Option("--main-gpu", "-mg", help="The GPU for --split-mode none.")] = None,
    no_kv_offload: Annotated[
        bool, typer.Option("--no-kv-offload", "-nkvo", help="Keep the KV cache in system memory.")
    ] = False,
    override_tensor: Annotated[
        list[str] | None,
        typer.Option("--override-tensor", "-ot", help="PATTERN=BUFFER[,...]: weights matching go there (CPU, CUDA0)."),
    ] = None,
    cpu_moe: Annotated[bool, typer.Option("--cpu-moe", "-cmoe", help="Keep every expert tensor on the CPU.")] = False,
    n_cpu_moe: Annotated[
        int | None, typer.Option("--n-cpu-moe", "-ncmoe", help="Keep the first N layers' experts on the CPU.")
    ] = None,
    gpu: Annotated[
        list[str] | None, typer.Option("--gpu", help="A GPU's free memory: 24GiB, CUDA:24GiB, Metal:64GiB. Repeat.")
    ] = None,
    ram: Annotated[str | None, typer.Option("--ram", help="Free system memory, e.g. 64GiB (checked if given).")] = None,
    fit: Annotated[
        bool, typer.Option("--fit", help="Choose context and layers as llama-server's --fit does (llama.cpp).")
    ] = False,
    fit_target: Annotated[
        str | None,
        typer.Option("--fit-target", "-fitt", help="MiB --fit leaves free per device (1024), or MiB,MiB,..."),
    ] = None,
    fit_ctx: Annotated[
        int | None, typer.Option("--fit-ctx", "-fitc", help="The least context --fit may choose (4096).")
    ] = None,
    remote: RemoteOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """How much memory a model takes on each device, as llama.cpp (or Ollama) would load it, and whether it fits."""
    from .estimate import parse_contexts, parse_fit_options, parse_overrides, parse_tensor_split, run_estimate

    given = {"--ubatch-size": ubatch, "--cache-type-v": cache_type_v, "--swa-full": swa_full or None,
             "--kv-unified": kv_unified or None, "--embeddings": embeddings or None, "--tensor-split": tensor_split,
             "--split-mode": split_mode, "--main-gpu": main_gpu, "--no-kv-offload": no_kv_offload or None,
             "--override-tensor": override_tensor, "--cpu-moe": cpu_moe or None, "--n-cpu-moe": n_cpu_moe,
             "--fit": fit or None, "--fit-target": fit_target, "--fit-ctx": fit_ctx}  # fmt: skip
    if engine not in ("llama.cpp", "ollama"):
        raise ArgumentError(f"--engine {engine!r}: llama.cpp or ollama")
    if engine == "ollama" and (extra := [flag for flag, value in given.items() if value is not None]):
        raise ArgumentError(f"{extra[0]} applies to --engine llama.cpp, not ollama")
    llama = {
        key: value
        for key, value in (
            ("batch_size", batch), ("ubatch_size", ubatch), ("parallel", parallel), ("flash_attn", flash_attn),
            ("cache_type_k", cache_type_k), ("cache_type_v", cache_type_v), ("n_gpu_layers", n_gpu_layers),
            ("split_mode", split_mode), ("main_gpu", main_gpu), ("n_cpu_moe", n_cpu_moe),
        )
        if value is not None
    }  # fmt: skip
    llama |= {"swa_full": swa_full, "kv_unified": kv_unified, "embeddings": embeddings,
              "no_kv_offload": no_kv_offload, "tensor_split": parse_tensor_split(tensor_split), "cpu_moe": cpu_moe,
              "override_tensor": parse_overrides(override_tensor or [])}  # fmt: skip
    if flash_attn not in (None, "on", "off", "auto"):
        raise ArgumentError(f"--flash-attn {flash_attn!r}: on, off or auto")
    ollama = {"batch": 512 if batch is None else batch, "parallel": parallel, "kv_cache_type": cache_type_k,
              "flash_attention": None if flash_attn in (None, "auto") else flash_attn == "on",
              "num_gpu": -1 if n_gpu_layers is None else n_gpu_layers}  # fmt: skip
    run_estimate(model, engine=engine, contexts=parse_contexts(ctx), gpus_text=gpu or [], ram=ram, console=console,
                 as_json=as_json, fit_devices=fit, llama=llama, ollama=ollama,
                 fit_options=parse_fit_options(fit_target, fit_ctx), remote=remote)  # fmt: skip


StoreOption = Annotated[
    Path | None, typer.Option("--store", help="The model store (default: $OLLAMA_MODELS, else ~/.ollama/models).")
]


def _store(path: Path | None):
    from ..ollama import Store

    return Store(path)


@app.command()
def create(
    name: Annotated[str, typer.Argument(help="The model's name, e.g. mymodel:latest.")],
    source: Annotated[
        Path, typer.Option("--from", help="A GGUF file, or a Hugging Face safetensors checkpoint folder.")
    ],
    quantize: Annotated[
        str | None,
        typer.Option(
            "--quantize",
            help="For checkpoints: int4, int8, nvfp4, mxfp4 or mxfp8 (MLX modes: tensor blobs, as Ollama's safetensors "
            "models), or a llama.cpp type such as Q4_K_M, Q8_0 or F16 (converted to a GGUF model layer, as "
            "llama.cpp's converter and llama-quantize would make it).",
        ),
    ] = None,
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the new manifest's layers as JSON.")] = False,
) -> None:
    """Import a model into Ollama's store."""
    from .store import run_create

    run_create(_store(store), name, source, quantize, as_json, console)


@app.command("ls")
def list_models(
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the models in Ollama's store."""
    from .store import run_ls

    run_ls(_store(store), as_json, console)


@app.command()
def show(
    name: Annotated[str, typer.Argument(help="A model in the store.")],
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show a stored model's manifest: config, layers, sizes."""
    from .store import run_show

    run_show(_store(store), name, as_json, console)


@app.command()
def rm(
    name: Annotated[str, typer.Argument(help="A model in the store.")],
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the removed blobs' digests as JSON.")] = False,
) -> None:
    """Remove a model, and the blobs no other model uses."""
    from .store import run_rm

    run_rm(_store(store), name, as_json, console)


@app.command()
def verify(
    name: Annotated[str, typer.Argument(help="A model in the store.")],
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (exit status 1 still marks damage).")] = False,
) -> None:
    """Re-hash every blob of a model and report any that do not match."""
    from .store import run_verify

    run_verify(_store(store), name, as_json, console)


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
    from .store import run_prune

    run_prune(_store(store), dry_run, as_json, console)


InsecureOption = Annotated[
    bool, typer.Option("--insecure", help="Speak plain HTTP to the registry (a local one without TLS).")
]


@app.command()
def pull(
    name: Annotated[str, typer.Argument(help="host[:port]/namespace/model:tag (default registry.ollama.ai/library).")],
    insecure: InsecureOption = False,
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the blobs and what became of them as JSON.")] = False,
) -> None:
    """Download a model from a registry into the store (as ollama pull); an interrupted pull resumes."""
    from .registry import run_pull

    run_pull(_store(store), name, insecure, as_json, console)


@app.command()
def push(
    name: Annotated[
        str, typer.Argument(help="A model in the store, named for its registry: host[:port]/ns/model:tag.")
    ],
    insecure: InsecureOption = False,
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the blobs and what became of them as JSON.")] = False,
) -> None:
    """Upload a model from the store to its registry (as ollama push)."""
    from .registry import run_push

    run_push(_store(store), name, insecure, as_json, console)


@app.command("cp")
def copy(
    source: Annotated[str, typer.Argument(help="A model in the store.")],
    destination: Annotated[str, typer.Argument(help="Its new name (e.g. for a registry: host/ns/model:tag).")],
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Give a stored model another name (as ollama cp); pushing it then mounts its blobs on the registry."""
    from .registry import run_cp

    run_cp(_store(store), source, destination, as_json, console)


@app.command()
def demo() -> None:
    """The main jobs on a real model, Gemma 3 270M (Q4_K_M GGUF, from the `examples` extra): inspect it, estimate
    its memory at a few contexts, and plan a re-quantization."""
    from .demo import run_demo

    run_demo(console)


def main(argv: list[str] | None = None) -> None:
    """Entry point. Errors a user can cause become one line on stderr, never a traceback: status 2 for a
    usage error (an unknown option, a bad value), 1 for a bad file or a failed job, 130 when interrupted."""
    try:
        status = app(args=argv, prog_name="weightkit", standalone_mode=False)
    except typer_errors.NoArgsIsHelpError:  # the help has been printed
        status = 2
    except typer.TyperException as e:  # click's usage errors: unknown option, missing argument, bad value
        where = f" (see '{e.ctx.command_path} --help')" if getattr(e, "ctx", None) else ""
        status = _fail(e.format_message() + where, getattr(e, "exit_code", 2))
    except ArgumentError as e:
        status = _fail(str(e), 2)
    except MemoryError:
        status = _fail("out of memory", 1)
    except WeightkitError as e:
        status = _fail(str(e), 1)
    except OSError as e:
        status = _fail(f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e), 1)
    except (KeyboardInterrupt, typer.Abort):
        status = 130
    sys.exit(status if isinstance(status, int) else 0)


def _fail(message: str, status: int) -> int:
    """Print `message` as the one line of an error and return the exit status."""
    line = " ".join(message.split())
    _stderr.print(f"[red]error:[/red] {escape(line)}", markup=True, highlight=False, soft_wrap=True)
    return status
