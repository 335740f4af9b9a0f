"""The whole llama.cpp estimate for one model: each device's weights, KV cache, recurrent state, compute buffer
and output buffer, as llama-server started with `LlamaCppSettings` would allocate them on these GPUs. For an
architecture without an exact entry it is the generic estimate, and says which figures it guessed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ...errors import ArgumentError
from ...model import ModelFile, TensorInfo
from ..devices import GPU
from .architectures import ARCHITECTURES, read_hparams
from .architectures.generic import COMPUTE, KV_CACHE, STATE, guesses
from .cache import Memory, make_memory, output_bytes
from .compute import compute_buffer, compute_buffers, resolve_flash_attn
from .context import Context, make_context
from .hparams import LlamaCppHParams
from .placement import Placement, buffer_of, lora_weights_per_device, place_layers, weights_per_device
from .projector import ProjectorEstimate
from .settings import LlamaCppSettings


@dataclass(frozen=True)
class DeviceMemory:
    """What one device holds, in bytes. `kv` is the whole context memory (attention KV cache and recurrent
    state); `recurrent` is the recurrent state alone. `exact` tells whether the compute buffer is llama.cpp's
    allocation reproduced (the CPU alone, or GPUs whose backend neither reorders the graph nor takes over ops:
    checked against llama.cpp) or derived: through a backend whose own graph optimization is not modelled, or
    by the generic estimate's nearest graph family. `projector`: the `--mmproj` projector's weights and compute
    buffer where they live (in `total`); `lora`: the `--lora` adapters' weights on this device (in `total`)."""

    name: str
    weights: int
    kv: int
    recurrent: int
    compute: int
    output: int
    free: int | None = None
    exact: bool = True
    projector: int = 0
    lora: int = 0

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.compute + self.output + self.projector + self.lora

    @property
    def fits(self) -> bool | None:
        """Whether it fits the free memory given (None: none given)."""
        return None if self.free is None else self.total <= self.free


@dataclass(frozen=True)
class LlamaCppEstimate:
    settings: LlamaCppSettings
    hparams: LlamaCppHParams
    context: Context
    placement: Placement
    memory: Memory
    devices: tuple[DeviceMemory, ...]
    notes: tuple[str, ...] = field(default=())
    projector: ProjectorEstimate | None = None
    guessed: Mapping[str, str] = field(default_factory=dict)  # figure ("compute", "kv", "recurrent") -> why

    @property
    def approximate(self) -> bool:
        """Whether this is the generic estimate (an architecture without an exact entry): the weights and their
        placement are exact, the figures in `guessed` derived rather than llama.cpp's own."""
        return bool(self.guessed)

    @property
    def fits(self) -> bool | None:
        """Whether every GPU given has room for what it holds (None without GPUs)."""
        gpu = [d.fits for d in self.devices if d.free is not None]
        return all(gpu) if gpu else None

    @property
    def warnings(self) -> tuple[str, ...]:
        """What llama.cpp warns of when it makes this context (llama_context's constructor): a sequence longer
        than the model was trained for."""
        n_ctx_seq, n_ctx_train = self.context.n_ctx_seq, self.hparams.n_ctx_train
        if n_ctx_seq > n_ctx_train:
            return (f"n_ctx_seq ({n_ctx_seq}) > n_ctx_train ({n_ctx_train}) -- possible training context overflow",)
        return ()


def device_names(gpus: Sequence[GPU]) -> list[str]:
    """llama.cpp's names for the devices: CUDA0, CUDA1, ROCm0, Metal, Vulkan0, ..."""
    seen: dict[str, int] = {}
    names = []
    for gpu in gpus:
        n = seen.get(gpu.library, 0)
        seen[gpu.library] = n + 1
        names.append(gpu.library if gpu.library == "Metal" else f"{gpu.library}{n}")
    return names


def applied_adapters(settings: LlamaCppSettings, adapters: Sequence[ModelFile],
                     scales: Sequence[float]) -> tuple[Mapping[str, TensorInfo], ...]:  # fmt: skip
    """The tensors of the adapters whose products the graph has (`llama_context::loras`): none with
    `--lora-init-without-apply` (`common_set_adapter_lora` not called), else those at a nonzero scale
    (`llama_context::set_adapters_lora` skips a 0), the last given first: the graph goes through them in their
    `std::unordered_map`'s order, and libstdc++'s (as libc++'s) puts each new key at the front of its bucket or,
    in a new bucket, of the whole list, so two come out reversed (more in an order of their addresses; the
    compute buffer was found the same in either order)."""
    if len(scales) > len(adapters):
        raise ArgumentError(f"adapter_scales: {len(scales)} scales for {len(adapters)} adapters")
    if settings.lora_init_without_apply:
        return ()
    scales = [*scales, *[1.0] * (len(adapters) - len(scales))]
    return tuple(adapter.tensors for adapter, scale in zip(adapters, scales, strict=True) if scale != 0)[::-1]


def estimate(model: ModelFile, settings: LlamaCppSettings | None = None, gpus: Sequence[GPU] = (), *,
             planned: bool = False, projector: ProjectorEstimate | None = None,
             adapters: Sequence[ModelFile] = (), adapter_scales: Sequence[float] = ()) -> LlamaCppEstimate:  # fmt: skip
    """Memory per device as llama.cpp allocates it for `model` with `settings` on `gpus` (the CPU alone if
    none), from metadata and tensor infos only. `planned`: the compute buffers a context made without
    allocating plans (what llama.cpp's fit measures) instead of those a real context allocates. `projector`
    (`projector.estimate_projector`): a `--mmproj` file loaded beside it, added to its device. `adapters`: LoRA
    adapter GGUFs loaded with it (llama-server's `--lora`), their weights beside their base weights, applied (the
    compute graph with their products) at `adapter_scales` (`--lora-scaled`; 1 where not given): one at 0, or
    all with `settings.lora_init_without_apply`, loaded but left out of the graph, as llama.cpp leaves it."""
    settings = settings or LlamaCppSettings()
    hp = read_hparams(model)
    guessed = {} if hp.arch in ARCHITECTURES else guesses(hp, model)
    requested = settings.context_params()
    ctx = make_context(hp, requested)
    overrides = settings.overrides(device_names(gpus))
    placement = place_layers(hp, gpus, n_gpu_layers=settings.n_gpu_layers, split_mode=settings.split_mode,
                             main_gpu=settings.main_gpu, tensor_split=settings.tensor_split,
                             overrides=overrides)  # fmt: skip
    memory = make_memory(hp, ctx)
    n_devices = len(gpus) + 1
    weights = weights_per_device(hp, model.tensors, placement)
    lora: dict[int, int] = {}
    for adapter in adapters:
        for device, nbytes in lora_weights_per_device(hp.arch, model.tensors, adapter, placement).items():
            lora[device] = lora.get(device, 0) + nbytes
    ctx = replace(ctx, loras=applied_adapters(settings, adapters, adapter_scales))
    kv, recurrent = [0] * n_devices, [0] * n_devices
    for cache in memory.caches:
        for i, il in enumerate(cache.layers):
            device = _kv_device(settings, placement, il)
            buffer = buffer_of(gpus[device] if device >= 0 else None)
            kv[device] += buffer.alloc_size(cache.type_k, cache.k_rows[i], cache.k_bytes(i))
            if cache.v_rows[i]:
                kv[device] += buffer.alloc_size(cache.type_v, cache.v_rows[i], cache.v_bytes(i))
    if memory.recurrent is not None:
        for il in memory.recurrent.layers:
            recurrent[_kv_device(settings, placement, il)] += memory.recurrent.layer_bytes(il)
    used = {d for d in placement.layers if d >= 0} | ({placement.output} - {-1})
    if used:
        # llama_context: the model's devices (every GPU, or the main one alone with --split-mode none), all
        # layers offloaded, layer split, the KV cache offloaded, no tensor overrides
        pipeline = (len(gpus) > 1 and settings.split_mode == "layer" and placement.offloaded == hp.n_layer_all + 1
                    and not settings.no_kv_offload and not overrides)  # fmt: skip
        ctx = resolve_flash_attn(hp, ctx, memory, model.tensors, placement)
        compute = compute_buffers(hp, ctx, memory, model.tensors, placement, pipeline, planned=planned)
    else:
        reserved = compute_buffer(hp, ctx, memory, model.tensors)
        compute = [0] * (n_devices - 1) + [reserved.prompt if planned else reserved.bytes]
    notes = _notes(hp, settings, ctx, placement, guessed)
    names = device_names(gpus)
    exact = COMPUTE not in guessed and all(buffer_of(gpus[d]).exact for d in used)
    devices = [
        DeviceMemory(
            names[i],
            weights.get(i, 0),
            kv[i] + recurrent[i],
            recurrent[i],
            compute[i],
            0,
            gpu.free,
            exact,
            lora=lora.get(i, 0),
        )
        for i, gpu in enumerate(gpus)
    ]
    output = output_bytes(hp, ctx, requested.n_seq_max)
    devices.append(DeviceMemory("CPU", weights.get(-1, 0), kv[-1] + recurrent[-1], recurrent[-1], compute[-1],
                                output, exact=exact, lora=lora.get(-1, 0)))  # fmt: skip
    if projector is not None:
        at = projector.device if projector.device >= 0 else len(devices) - 1
        devices[at] = replace(devices[at], projector=projector.total)
    return LlamaCppEstimate(settings, hp, ctx, placement, memory, tuple(devices), tuple(notes), projector, guessed)


def _kv_device(settings: LlamaCppSettings, placement: Placement, il: int) -> int:
    return -1 if settings.no_kv_offload else placement.device_of(il)


def _notes(hp: LlamaCppHParams, settings: LlamaCppSettings, ctx: Context, placement: Placement,
           guessed: Mapping[str, str]) -> list[str]:  # fmt: skip
    notes = []
    if guessed:
        figures = {COMPUTE: "compute buffer", KV_CACHE: "KV cache", STATE: "recurrent state"}
        derived = ", ".join(name for figure, name in figures.items() if figure in guessed)
        notes.append(f"approximate (~): no exact llama.cpp memory model of {hp.arch}; the weights and their placement "
                     f"are exact, the {derived} derived (the generic estimate)")  # fmt: skip
    if settings.ctx_size == 0:
        notes.append(
            f"context {ctx.n_ctx}: the model's trained length, llama-server's default (its --fit, on by default, "
            "lowers it to fit the devices; see --fit)"
        )
    elif ctx.n_ctx != settings.ctx_size:
        notes.append(f"context {settings.ctx_size} padded to {ctx.n_ctx} (whole 256-cell blocks per sequence)")
    if settings.parallel < 0:
        notes.append(f"--parallel auto: {ctx.n_seq_max} slots sharing one unified KV cache")
    if settings.flash_attn == "auto" and ctx.flash_attn:
        notes.append("--flash-attn auto resolves to on (every device here runs flash attention for these layers)")
    elif settings.flash_attn == "auto" and ctx.auto_fa:
        notes.append("--flash-attn auto resolves to off: a layer's flash attention would run on another device than "
                     "the layer (its KV cache or a neighbouring layer's device draws it there)")  # fmt: skip
    if settings.split_mode == "row" and placement.gpus:
        notes.append("--split-mode row: weights are counted on their layer's GPU, not spread row by row")
    if placement.gpus and not all(buffer_of(g).exact for g in placement.gpus) and COMPUTE not in guessed:
        notes.append(
            "compute buffers with these GPUs: llama.cpp's graph, scheduler and allocator reproduced, "
            "but not the GPU backend's own graph optimization (derived, marked *)"
        )
    return notes
