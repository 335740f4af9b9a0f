"""What llama-server's `--fit` (on by default) chooses for a model on these devices: `common_params_fit_impl` in
`common/fit.cpp`, step for step.

1. Measure the memory each device would hold with the settings as given (model, context and compute: what a
   context made without allocating plans; the output buffer is not counted). With the context left to the
   model, it is the trained length for each stream. If every device keeps its margin (1 GiB by default)
   free, nothing changes.
2. If the devices together lack memory and the context was left to the model: measure again at the smallest
   context (4096 per stream) and interpolate between the two, rounded down to 256 per stream. On one device
   that is all.
3. Unless layers, tensor split or tensor overrides were given: fill the devices from the last to the first,
   each with as many layers as keep its margin, found by false position (the output layer always full). A
   model with experts is filled with "dense-only" layers, their expert tensors on the CPU.
4. For experts, when the dense parts leave room: turn dense-only layers into full ones from the first device
   on, and try to fit part of one more layer (attention, then the up or gate projections) that overflows to
   the next device or the CPU.

Every measurement is `estimate(..., planned=True)`: the engine's own numbers, so the fit follows llama.cpp's
wherever the estimate does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ...errors import ArgumentError
from ...model import ModelFile
from ..devices import GPU
from .engine import LlamaCppEstimate, device_names, estimate
from .projector import ProjectorEstimate, fit_margins
from .settings import LlamaCppSettings

GIB = 1 << 30
MARGIN = GIB  # fit_params_target
MIN_CONTEXT = 4096  # fit_params_min_ctx
CPU = "CPU"

#: what of a layer a partially offloaded layer keeps off its device (`common_layer_fraction_t`)
ATTN, UP, GATE, MOE = "attn", "up", "gate", "moe"
_OVERFLOW = {
    ATTN: r"blk\.{}\.ffn_(gate|up|gate_up|down).*",
    UP: r"blk\.{}\.ffn_(gate|gate_up|down).*",
    GATE: r"blk\.{}\.ffn_down.*",
    MOE: r"blk\.{}\.ffn_(up|down|gate_up|gate)_(ch|)exps",
}
_ALL_EXPERTS = r"blk\.\d+\.ffn_(up|down|gate_up|gate)_(ch|)exps"


@dataclass(frozen=True)
class _Layers:
    """A device's share (`ngl_t`): its layers, how many of them are partial (some tensors elsewhere), and what
    the first partial one keeps elsewhere."""

    n_layer: int = 0
    n_part: int = 0
    overflow: str = MOE

    @property
    def n_full(self) -> int:
        return self.n_layer - self.n_part


class _Fit:
    def __init__(self, model: ModelFile, settings: LlamaCppSettings, gpus: Sequence[GPU], n_layer: int,
                 n_expert: int) -> None:  # fmt: skip
        self.model, self.settings, self.gpus = model, settings, list(gpus)
        self.names = device_names(gpus)
        self.n_layer, self.n_expert = n_layer, n_expert

    def used(self, settings: LlamaCppSettings) -> list[int]:
        """What fit counts on each device: model, context and planned compute (the GPUs', then the host's)."""
        est = estimate(self.model, settings, self.gpus, planned=True)
        return [d.weights + d.kv + d.compute for d in est.devices]

    def layout(self, shares: Sequence[_Layers], overflow: Sequence[str]) -> LlamaCppSettings:
        """`set_ngl_tensor_split_tbo`: the settings for these shares, partial layers' tensors overridden."""
        n_gpu_layers = sum(s.n_layer for s in shares)
        split = tuple(float(s.n_layer) for s in shares) if len(shares) > 1 else self.settings.tensor_split
        overrides = []
        il0 = self.n_layer + 1 - n_gpu_layers
        for share, buffer in zip(shares, overflow, strict=True):
            il0 += share.n_full
            for il in range(il0, il0 + share.n_part):
                first = il == il0
                overrides.append((_OVERFLOW[share.overflow if first else MOE].format(il), buffer if first else CPU))
            il0 += share.n_part
        return replace(self.settings, n_gpu_layers=n_gpu_layers, tensor_split=split, override_tensor=tuple(overrides))

    def memory(self, shares: Sequence[_Layers], overflow: Sequence[str]) -> list[int]:
        return self.used(self.layout(shares, overflow))[: len(self.gpus)]


def fit(
    model: ModelFile,
    settings: LlamaCppSettings,
    gpus: Sequence[GPU],
    *,
    host_memory: int | None = None,
    margins: int | Sequence[int] = MARGIN,
    min_context: int = MIN_CONTEXT,
    projector: ProjectorEstimate | None = None,
    adapters: Sequence[ModelFile] = (),
    adapter_scales: Sequence[float] = (),
) -> LlamaCppEstimate:
    """The estimate for the settings llama-server's fit would start with; its notes say what fit changed.
    Without GPUs, `host_memory` (total system memory) is what the model must fit in. A `projector` (`--mmproj`)
    is kept free on its device as llama-server keeps it: added to that device's margin. LoRA `adapters` are
    loaded after fit has chosen (common_init_from_params), so fit leaves no room for them: only the estimate
    it ends with counts them (at `adapter_scales`, as `estimate` takes them)."""
    if projector is not None:
        margins = fit_margins(margins, projector, len(gpus))
    fitted, notes = fit_settings(model, settings, gpus, host_memory=host_memory, margins=margins,
                                 min_context=min_context)  # fmt: skip
    est = estimate(model, fitted, gpus, projector=projector, adapters=adapters, adapter_scales=adapter_scales)
    return replace(est, notes=(*notes, *est.notes))


def fit_settings(
    model: ModelFile,
    settings: LlamaCppSettings,
    gpus: Sequence[GPU],
    *,
    host_memory: int | None = None,
    margins: int | Sequence[int] = MARGIN,
    min_context: int = MIN_CONTEXT,
) -> tuple[LlamaCppSettings, list[str]]:
    """The settings fit chooses, and what it did in words."""
    first = estimate(model, settings, gpus, planned=True)
    hp, ctx = first.hparams, first.context
    nd = len(gpus)
    margin_list = [margins] * max(nd, 1) if isinstance(margins, int) else list(margins)
    if len(margin_list) < max(nd, 1) or any(m < 0 for m in margin_list):
        raise ArgumentError(f"--fit-target: one margin of at least 0 per device, got {list(margin_list)}")
    if nd == 0 and host_memory is None:
        return settings, ["--fit needs --gpu sizes (or --ram for the CPU alone): nothing to fit to"]
    job = _Fit(model, settings, gpus, hp.n_layer, hp.n_expert)
    streams = 1 if ctx.kv_unified else max(1, ctx.n_seq_max)
    auto_context = settings.ctx_size == 0
    n_ctx_max, n_ctx_min = hp.n_ctx_train * streams, min_context * streams
    notes: list[str] = []
    if auto_context:
        settings = replace(settings, ctx_size=n_ctx_max)
    used = job.used(settings) if auto_context and streams > 1 else [d.weights + d.kv + d.compute for d in first.devices]
    if nd == 0:
        sum_free, sum_used = host_memory, used[-1]
        if sum_free - sum_used >= margin_list[0]:
            return settings, ["--fit: it fits as it is; nothing changed"]
    else:
        free = [g.free for g in gpus]
        sum_free, sum_used = sum(free), sum(used[:nd])
        if all(f - u >= m for f, u, m in zip(free, used, margin_list, strict=False)):
            return settings, ["--fit: it fits as it is; nothing changed"]
    # step 2: a smaller context
    margin_sum = margin_list[0] if nd == 0 else sum(margin_list[:nd])
    if sum_free - sum_used - margin_sum < 0 and auto_context and n_ctx_max > n_ctx_min:
        target = sum_free - margin_sum
        if nd > 1:  # only whole layers (or expert tensors) go to a device: allow for half a layer's waste
            layers = hp.n_layer if settings.n_gpu_layers < 0 else min(settings.n_gpu_layers, hp.n_layer)
            per_layer = sum(d.weights for d in first.devices[:nd]) // max(layers, 1)
            target -= (nd + 1) * per_layer // (2 if hp.n_expert == 0 else 6)
        settings = replace(settings, ctx_size=n_ctx_min)
        at_min = job.used(settings)
        used_min = at_min[-1] if nd == 0 else sum(at_min[:nd])
        if target > used_min:
            n_ctx = n_ctx_min + (n_ctx_max - n_ctx_min) * (target - used_min) // (sum_used - used_min)
            n_ctx = max(n_ctx - n_ctx % (256 * streams), n_ctx_min)
            settings = replace(settings, ctx_size=n_ctx)
            notes.append(f"--fit: context lowered from {n_ctx_max} to {n_ctx}")
            if nd <= 1:
                return settings, notes
        else:
            notes.append(f"--fit: context lowered from {n_ctx_max} to the least, {n_ctx_min}")
    if nd == 0:
        return settings, [*notes, "--fit: unable to fit the model into system memory by reducing the context"]
    refusal = _refusal(settings, nd)
    if refusal:
        return settings, [*notes, f"--fit: {refusal}, so layers are not moved"]
    shares = _fill(job, settings, margin_list, free)
    fitted = job.layout(*shares)
    counts = ", ".join(str(s.n_layer) for s in shares[0])
    notes.append(f"--fit: {fitted.n_gpu_layers} of {hp.n_layer + 1} layers on the GPUs ({counts})")
    if fitted.override_tensor:
        notes.append(f"--fit: {len(fitted.override_tensor)} layers partly kept off their GPU (-ot)")
    return fitted, notes


def _refusal(settings: LlamaCppSettings, nd: int) -> str | None:
    if settings.n_gpu_layers != -1:
        return f"-ngl {settings.n_gpu_layers} was given"
    if nd > 1 and any(settings.tensor_split):
        return "--tensor-split was given"
    if nd > 1 and settings.split_mode == "row":
        return "--split-mode row does not let it move weights"
    if settings.override_tensor or settings.cpu_moe or settings.n_cpu_moe:
        return "tensor overrides were given"
    return None


def _fill(job: _Fit, settings: LlamaCppSettings, margins: Sequence[int],
          free: Sequence[int]) -> tuple[list[_Layers], list[str]]:  # fmt: skip
    """Steps 3 and 4: the layers of each device and where the first partial layer of each overflows to."""
    job.settings = settings
    nd, n_layer, experts = len(free), job.n_layer, job.n_expert > 0
    surplus_moe = 0
    if experts:
        dense = job.used(replace(settings, override_tensor=((_ALL_EXPERTS, CPU),)))
        surplus_moe = sum(f - u - m for f, u, m in zip(free, dense, margins, strict=False))
    targets = [f - m for f, m in zip(free, margins, strict=False)]
    overflow = [CPU] * nd
    shares = [_Layers() for _ in range(nd)]
    mem = job.memory(shares, overflow)
    for id in reversed(range(nd)):  # step 3: back to front
        unassigned = n_layer + 1 - sum(s.n_layer for s in shares[id + 1 :])
        high = list(shares)
        part = (unassigned if id < nd - 1 else unassigned - 1) if experts else 0
        high[id] = replace(high[id], n_layer=unassigned, n_part=part)
        if unassigned == 0:
            continue
        mem_high = job.memory(high, overflow)
        if mem_high[id] <= targets[id]:
            shares, mem = high, mem_high
            continue
        delta = high[id].n_layer - shares[id].n_layer
        while delta > 1:
            step = _step(delta, targets[id] - mem[id], mem_high[id] - mem[id])
            test = list(shares)
            part = shares[id].n_part
            if experts:  # the first layer is the output layer, which is always full
                part += step - 1 if id == nd - 1 and part == 0 else step
            test[id] = replace(shares[id], n_layer=shares[id].n_layer + step, n_part=part)
            mem_test = job.memory(test, overflow)
            if mem_test[id] <= targets[id]:
                shares, mem = test, mem_test
            else:
                high, mem_high = test, mem_test
            delta = high[id].n_layer - shares[id].n_layer
    if not experts or surplus_moe <= 0:
        return shares, overflow
    return _fill_experts(job, shares, overflow, mem, targets)


def _fill_experts(job: _Fit, shares: list[_Layers], overflow: list[str], mem: list[int],
                  targets: list[int]) -> tuple[list[_Layers], list[str]]:  # fmt: skip
    """Step 4: dense-only layers at the back become full layers at the front, device by device."""
    nd = len(shares)
    dense_start = nd
    for id in reversed(range(nd)):
        if shares[id].n_layer == 0:
            break
        dense_start = id
    id = 0
    while id <= dense_start and dense_start < nd:
        high = list(shares)
        for jd in range(dense_start, nd):
            move = high[jd].n_layer if jd < nd - 1 else high[jd].n_layer - 1
            high[id] = replace(high[id], n_layer=high[id].n_layer + move)
            high[jd] = replace(high[jd], n_layer=high[jd].n_layer - move, n_part=0)
        dense_start_high = nd - 1
        mem_high = job.memory(high, overflow)
        if mem_high[id] > targets[id]:
            delta = high[id].n_full - shares[id].n_full
            while delta > 1:
                step = _step(delta, targets[id] - mem[id], mem_high[id] - mem[id])
                test, start, converted = list(shares), dense_start, 0
                while start < nd:
                    n = min(step - converted, test[start].n_part)
                    test[start] = replace(test[start], n_layer=test[start].n_layer - n, n_part=test[start].n_part - n)
                    test[id] = replace(test[id], n_layer=test[id].n_layer + n)
                    converted += n
                    if test[start].n_part > 0:
                        break
                    start += 1
                mem_test = job.memory(test, overflow)
                if mem_test[id] <= targets[id]:
                    shares, mem, dense_start = test, mem_test, start
                else:
                    high, mem_high, dense_start_high = test, mem_test, start
                delta = high[id].n_full - shares[id].n_full
        else:
            shares, mem, dense_start = high, mem_high, dense_start_high
        if dense_start < nd and shares[dense_start].n_layer > (0 if id < nd - 1 else 1):  # part of one more layer
            up, start = list(shares), dense_start
            up[start] = replace(up[start], n_layer=up[start].n_layer - 1, n_part=up[start].n_part - 1)
            up[id] = replace(up[id], n_layer=up[id].n_layer + 1, n_part=up[id].n_part + 1, overflow=UP)
            if up[start].n_part == 0:
                start += 1
            overflow_test = list(overflow)
            if id < nd - 1:
                overflow_test[id] = job.names[id + 1]

            def fits(m: list[int], i: int = id) -> bool:
                return m[i] < targets[i] and (i + 1 == nd or m[i + 1] < targets[i + 1])

            if fits(mem_up := job.memory(up, overflow_test)):
                shares, overflow, mem, dense_start = up, overflow_test, mem_up, start
                gate = list(up)
                gate[id] = replace(gate[id], overflow=GATE)
                if fits(mem_gate := job.memory(gate, overflow_test)):
                    shares, mem = gate, mem_gate
            else:
                attn = list(up)
                attn[id] = replace(attn[id], overflow=ATTN)
                if fits(mem_attn := job.memory(attn, overflow_test)):
                    shares, overflow, mem, dense_start = attn, overflow_test, mem_attn, start
        id += 1
    return shares, overflow


def _step(delta: int, want: int, span: int) -> int:
    """`uint32_t step_size = int64_t(delta) * want / span`, clamped to [1, delta - 1]: C's truncating division,
    and a negative quotient wrapped to a huge unsigned one (which the clamp then takes to delta - 1)."""
    q = abs(delta * want) // abs(span)
    if (delta * want < 0) != (span < 0):
        q = -q
    step = q % (1 << 32)
    return min(max(step, 1), delta - 1)
