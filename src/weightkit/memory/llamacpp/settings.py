"""llama-server's options that bear on memory, under its own flag names, and what llama-server makes of them
(`common/common.h`'s defaults, `common/arg.cpp`, `tools/server/server.cpp`) before it creates the context."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import ArgumentError
from .context import CACHE_TYPES, FLASH_ATTN, ContextParams
from .placement import CPU, EXPERTS_PATTERN, SPLIT_MODES, Override

#: --parallel's "auto": four slots sharing one unified KV cache (server.cpp)
AUTO_PARALLEL = 4
#: The largest integer llama-server's flags take: it reads them with std::stoi, as a 32-bit int (common/arg.cpp)
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class LlamaCppSettings:
    """What `llama-server` is started with; the defaults are its own.

    - `ctx_size` (`-c`): the context, 0 for the model's trained length. Like every integer here, at most
      2**31 - 1: llama-server reads its flags as 32-bit integers.
    - `batch_size` (`-b`), `ubatch_size` (`-ub`): logical and physical batch.
    - `parallel` (`-np`): sequences; -1 is llama-server's auto (4 slots, unified KV cache).
    - `flash_attn` (`-fa`): on, off or auto.
    - `cache_type_k`, `cache_type_v` (`-ctk`, `-ctv`): f16, f32, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1.
    - `swa_full`: a full-size cache for sliding-window layers; `kv_unified` (`-kvu`): one cache for all sequences.
    - `embeddings` (`--embedding`): an embedding server (embeddings out, the batch held to the ubatch).
    - `n_gpu_layers` (`-ngl`): layers to offload, -1 for all; `split_mode` (`-sm`): none, layer or row;
      `main_gpu` (`-mg`); `tensor_split` (`-ts`): the share of each GPU (default: by free memory).
    - `no_kv_offload` (`-nkvo`): the KV cache stays in system memory.
    - `override_tensor` (`-ot`): (pattern, buffer) pairs, a weight whose name the pattern is found in going to
      that buffer ("CPU", or a GPU by llama.cpp's name: CUDA0, Metal, Vulkan1, ...), first match first;
      `cpu_moe` (`-cmoe`) keeps every expert tensor on the CPU, `n_cpu_moe` (`-ncmoe`) those of the first N
      layers (after `-ot`, in that order).
    - `n_outputs_max`: the outputs a batch is reserved for (`llama_context_params.n_outputs_max`); None is
      llama-server's choice (one per sequence, the batch for embeddings), 0 llama.cpp's default (the whole
      batch), which llama-cli and llama-fit-params keep.
    - `lora_init_without_apply` (`--lora-init-without-apply`): LoRA adapters loaded but not applied (no products
      in the compute graph).
    """

    ctx_size: int = 0
    batch_size: int = 2048
    ubatch_size: int = 512
    parallel: int = -1
    flash_attn: str = "auto"
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    swa_full: bool = False
    kv_unified: bool = False
    embeddings: bool = False
    n_gpu_layers: int = -1
    split_mode: str = "layer"
    main_gpu: int = 0
    tensor_split: tuple[float, ...] = ()
    no_kv_offload: bool = False
    override_tensor: tuple[tuple[str, str], ...] = ()
    cpu_moe: bool = False
    n_cpu_moe: int = 0
    n_outputs_max: int | None = None
    lora_init_without_apply: bool = False

    def __post_init__(self) -> None:
        for name, low in (("ctx_size", 0), ("batch_size", 1), ("ubatch_size", 1), ("parallel", -1),
                          ("n_gpu_layers", -1), ("main_gpu", -1), ("n_cpu_moe", 0)):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ArgumentError(f"--{name.replace('_', '-')} must be an integer >= {low}, got {value!r}")
            if value > INT32_MAX:
                flag = "--" + name.replace("_", "-")
                raise ArgumentError(f"{flag} {value}: llama-server reads it as a 32-bit integer, at most {INT32_MAX}")
        if self.n_outputs_max is not None and (
            isinstance(self.n_outputs_max, bool) or not isinstance(self.n_outputs_max, int) or self.n_outputs_max < 0
        ):
            raise ArgumentError(f"n_outputs_max must be an integer >= 0 or None, got {self.n_outputs_max!r}")
        if self.parallel == 0:
            raise ArgumentError("--parallel must be -1 (auto) or at least 1")
        if self.flash_attn not in FLASH_ATTN:
            raise ArgumentError(f"--flash-attn {self.flash_attn!r}: one of {', '.join(FLASH_ATTN)}")
        for name in ("cache_type_k", "cache_type_v"):
            if getattr(self, name) not in CACHE_TYPES:
                flag = "--" + name.replace("_", "-")
                raise ArgumentError(f"{flag} {getattr(self, name)!r}: one of {', '.join(CACHE_TYPES)}")
        if self.split_mode not in SPLIT_MODES:
            raise ArgumentError(f"--split-mode {self.split_mode!r}: one of {', '.join(SPLIT_MODES)}")
        split = tuple(self.tensor_split)
        if any(not isinstance(x, (int, float)) or x < 0 for x in split):
            raise ArgumentError(f"--tensor-split {split!r}: non-negative numbers, one per GPU")
        object.__setattr__(self, "tensor_split", tuple(float(x) for x in split))
        pairs = []
        for pair in self.override_tensor:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
                raise ArgumentError(f"--override-tensor {pair!r}: a (pattern, buffer type) pair")
            try:
                re.compile(pair[0])
            except re.error as e:
                raise ArgumentError(f"--override-tensor {pair[0]!r}: not a regular expression ({e})") from None
            pairs.append(tuple(pair))
        object.__setattr__(self, "override_tensor", tuple(pairs))

    def overrides(self, devices: Sequence[str]) -> list[Override]:
        """The tensor overrides, their buffers resolved against the GPUs' names (`devices`)."""
        index = {name: i for i, name in enumerate(devices)} | {CPU: -1}
        out = []
        for pattern, buffer in self.override_tensor:
            if buffer not in index:
                known = ", ".join(index)
                raise ArgumentError(f"--override-tensor {pattern}={buffer}: unknown buffer type (available: {known})")
            out.append(Override(pattern, index[buffer]))
        if self.cpu_moe:
            out.append(Override(EXPERTS_PATTERN, -1))
        out += [Override(rf"blk\.{il}{EXPERTS_PATTERN}", -1) for il in range(self.n_cpu_moe)]
        return out

    def context_params(self) -> ContextParams:
        """The `llama_context_params` llama-server passes (`common_context_params_to_llama` after server.cpp's
        adjustments)."""
        parallel, unified = self.parallel, self.kv_unified
        if parallel < 0:
            parallel, unified = AUTO_PARALLEL, True
        batch = min(self.batch_size, self.ubatch_size) if self.embeddings else self.batch_size
        if self.n_outputs_max is not None:
            outputs = self.n_outputs_max or batch
        else:
            outputs = batch if self.embeddings else min(batch, parallel)
        return ContextParams(
            n_ctx=self.ctx_size,
            n_batch=batch,
            n_ubatch=self.ubatch_size,
            n_seq_max=parallel,
            flash_attn=self.flash_attn,
            type_k=self.cache_type_k,
            type_v=self.cache_type_v,
            swa_full=self.swa_full,
            kv_unified=unified,
            embeddings=self.embeddings,
            offload_kqv=not self.no_kv_offload,
            n_outputs_max=outputs,
        )
