"""What llama-server's `--fit` (on by default; `common_params_fit_impl` in `common/fit.cpp`) chooses for a model
on these devices: first a smaller context, if the context was left to it, then fewer layers on the GPUs, filled
from the last GPU to the first, each leaving its margin (1 GiB by default) free.

Each candidate is measured the way fit measures it, by what the model, context and compute buffers take on
each device (the output buffer is not counted, as in fit). Models with experts are fitted as dense ones: fit's
moving of expert tensors to the CPU is not reproduced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ...errors import WeightkitError
from ...model import ModelFile
from ..devices import GPU
from .engine import LlamaCppEstimate, estimate
from .settings import LlamaCppSettings

GIB = 1 << 30
MARGIN = GIB  # fit_params_target
MIN_CONTEXT = 4096  # fit_params_min_ctx


def _used(est: LlamaCppEstimate) -> list[int]:
    """What fit counts on each device: model, context and compute (the GPUs', then the host's)."""
    return [d.weights + d.kv + d.compute for d in est.devices]


def _surplus(est: LlamaCppEstimate, free: Sequence[int], margin: int) -> int:
    return sum(f - u - margin for f, u in zip(free, _used(est), strict=False))


def fit(
    model: ModelFile,
    settings: LlamaCppSettings,
    gpus: Sequence[GPU],
    *,
    host_free: int | None = None,
    margin: int = MARGIN,
    min_context: int = MIN_CONTEXT,
) -> LlamaCppEstimate:
    """The estimate for the settings fit would choose; its notes say what it changed."""
    notes: list[str] = []
    first = estimate(model, settings, gpus)
    streams = 1 if first.context.kv_unified else first.context.n_seq_max
    free = [g.free for g in gpus] if gpus else ([] if host_free is None else [host_free])
    if not free:
        return _noted(first, ["--fit needs --gpu sizes (or --ram for the CPU alone): nothing to fit to"])
    current = first

    def fits(est: LlamaCppEstimate) -> bool:
        used = _used(est)[: len(gpus)] if gpus else [_used(est)[-1]]
        return all(f - u >= margin for f, u in zip(free, used, strict=True))

    if fits(current):
        return _noted(first, ["--fit: it fits as it is; nothing changed"])
    auto_context = settings.ctx_size == 0
    hp = first.hparams
    n_max = hp.n_ctx_train * streams
    n_min = min_context * streams
    if auto_context and n_max > n_min and _surplus(current, free, margin) < 0:
        target = sum(free) - margin * len(free)
        low = estimate(model, replace(settings, ctx_size=n_min), gpus)
        used_low, used_high = sum(_used(low)[: len(free)]), sum(_used(first)[: len(free)])
        if target > used_low and used_high > used_low:
            n_ctx = n_min + (n_max - n_min) * (target - used_low) // (used_high - used_low)
            n_ctx = max(n_ctx - n_ctx % (256 * streams), n_min)
        else:
            n_ctx = n_min
        notes.append(f"--fit: context lowered from {first.context.n_ctx} to {n_ctx}")
        settings = replace(settings, ctx_size=n_ctx)
        current = estimate(model, settings, gpus)
        if fits(current) or (len(gpus) <= 1 and target > used_low):
            return _noted(current, notes)
    if not gpus:
        raise WeightkitError("llama.cpp's fit: unable to fit the model into system memory by reducing the context")
    if settings.n_gpu_layers != -1:
        return _noted(current, [*notes, f"--fit: -ngl {settings.n_gpu_layers} was given, so layers are not moved"])
    counts = _fit_layers(model, settings, gpus, free, margin, hp.n_layer_all + 1)
    settings = replace(settings, n_gpu_layers=sum(counts), tensor_split=tuple(float(c) for c in counts))
    notes.append(f"--fit: {sum(counts)} of {hp.n_layer_all + 1} layers on the GPUs ({', '.join(map(str, counts))})")
    return _noted(estimate(model, settings, gpus), notes)


def _fit_layers(model: ModelFile, settings: LlamaCppSettings, gpus: Sequence[GPU], free: Sequence[int],
                margin: int, n_layers: int) -> list[int]:  # fmt: skip
    """Layers per GPU, filled from the last GPU to the first, each as many as leave its margin free."""
    counts = [0] * len(gpus)
    for device in reversed(range(len(gpus))):
        later = sum(counts[device + 1 :])
        low, high = 0, n_layers - later
        while low < high:  # the most layers whose memory leaves the margin on this device
            mid = (low + high + 1) // 2
            trial = [*counts[:device], mid, *counts[device + 1 :]]
            est = estimate(model, replace(settings, n_gpu_layers=sum(trial), tensor_split=tuple(map(float, trial))),
                           gpus)  # fmt: skip
            if free[device] - _used(est)[device] >= margin:
                low = mid
            else:
                high = mid - 1
        counts[device] = low
    return counts


def _noted(est: LlamaCppEstimate, notes: list[str]) -> LlamaCppEstimate:
    return replace(est, notes=(*notes, *est.notes))
