"""Where llama.cpp puts a model: which device each layer runs on (`llama_model_base::load_tensors`), and the bytes
of weights each device's buffers hold (the sum of each tensor's allocation size, padded to the buffer type's
alignment, as `ggml_backend_alloc_ctx_tensors_from_buft` sums it).

The devices are the GPUs given, in order, then the CPU. Layer `n_layer_all` is the output layer; the token
embeddings always stay on the CPU.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...dtypes import ggml_type
from ...errors import ArgumentError, FormatError
from ...model import ModelFile, TensorInfo
from ..devices import GPU
from .hparams import LlamaCppHParams

CPU = "CPU"
SPLIT_MODES = ("none", "layer", "row")
#: tensors of the input layer (`LLM_TENSOR_LAYER_INPUT`): always on the CPU
INPUT_TENSORS = frozenset(
    {"token_embd.weight", "position_embd.weight", "token_types.weight", "per_layer_token_embd.weight"}
)
#: tensors used at the start of the first layer (`LLM_TENSOR_LAYER_REPEATING` without a layer number)
FIRST_LAYER_TENSORS = frozenset(
    {"token_embd_norm.weight", "token_embd_norm.bias", "per_layer_model_proj.weight", "per_layer_proj_norm.weight"}
)
#: tensors every layer uses, one copy in each device's buffer that holds a layer (`TENSOR_DUPLICATED` for
#: layers after the first, `LLM_TENSOR_LAYER_REPEATING`)
PER_LAYER_SHARED = frozenset({"rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"})
_LAYER = re.compile(r"blk\.(\d+)\.")
MATRIX_ROW_PADDING = 512  # ggml-cuda: quantized rows are padded to this many elements


OFFLOAD_ANY, OFFLOAD_MATMUL = "any", "matmul"


@dataclass(frozen=True)
class Buffer:
    """What a device does to sizes and to the scheduler: its buffers' alignment, CUDA's padding of quantized
    rows, and which ops on CPU weights it takes over for large batches (`offload_op`: any op, matrix
    multiplications only, or none)."""

    alignment: int
    pad_quantized_rows: bool = False
    offload: str | None = None
    exact: bool = False  # no graph optimization of its own: compute buffers as checked against llama.cpp

    def raw_size(self, type: int, ne0: int, nbytes: int) -> int:
        """`ggml_backend_buft_get_alloc_size`: CUDA pads the last row of a quantized tensor to 512 elements."""
        if self.pad_quantized_rows and ne0 % MATRIX_ROW_PADDING and (info := ggml_type(type)).quantized:
            nbytes += info.nbytes(MATRIX_ROW_PADDING - ne0 % MATRIX_ROW_PADDING)
        return nbytes

    def alloc_size(self, type: int, ne0: int, nbytes: int) -> int:
        """The allocation size rounded up to the alignment, as a buffer of tensors sums it."""
        return -(-self.raw_size(type, ne0, nbytes) // self.alignment) * self.alignment


CPU_BUFFER = Buffer(32, exact=True)
#: by GPU library: ggml-cuda (ROCm builds it too), ggml-metal, ggml-vulkan, and ggml-rpc to a CPU rpc-server
GPU_BUFFERS = {
    "CUDA": Buffer(128, True, OFFLOAD_ANY),
    "ROCm": Buffer(128, True, OFFLOAD_ANY),
    "Metal": Buffer(32, False, OFFLOAD_MATMUL),
    "Vulkan": Buffer(32, False, OFFLOAD_ANY),
    "RPC": Buffer(32, exact=True),
}


def buffer_of(device: GPU | None) -> Buffer:
    return CPU_BUFFER if device is None else GPU_BUFFERS.get(device.library, Buffer(32))


#: `LLM_FFN_EXPS_REGEX` (common.h): the expert tensors `--cpu-moe` and `--n-cpu-moe` keep on the CPU
EXPERTS_PATTERN = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"


@dataclass(frozen=True)
class Override:
    """`--override-tensor PATTERN=BUFFER`: weights whose name the pattern is found in (`std::regex_search`)
    go to `device` (-1: the CPU)."""

    pattern: str
    device: int
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", re.compile(self.pattern))  # compiled once: fit tries it on every weight

    def matches(self, name: str) -> bool:
        return self._regex.search(name) is not None


@dataclass(frozen=True)
class Placement:
    """`dev_layer`: the device index (into the GPUs, or -1 for the CPU) of every layer and of the output; and
    the tensor overrides, first match first."""

    gpus: tuple[GPU, ...]
    layers: tuple[int, ...]  # n_layer_all entries
    output: int
    overrides: tuple[Override, ...] = ()
    output_norm_embd: bool = False  # `token_embd_norm` is the final norm (`LlamaCppHParams.output_norm_embd`)
    #: `tensor_device`'s answers so far: the weights' sums and the compute graph ask for each weight
    devices: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def device_of(self, il: int) -> int:
        return self.output if il >= len(self.layers) else self.layers[il]

    @property
    def offloaded(self) -> int:
        """Layers on GPUs, the output layer counted (llama.cpp's "offloaded N/M layers to GPU")."""
        return sum(d >= 0 for d in self.layers) + (self.output >= 0)


def place_layers(
    hp: LlamaCppHParams,
    gpus: Sequence[GPU],
    *,
    n_gpu_layers: int = -1,
    split_mode: str = "layer",
    main_gpu: int = 0,
    tensor_split: Sequence[float] = (),
    overrides: Sequence[Override] = (),
) -> Placement:
    """llama.cpp's assignment of layers to devices for these options (`-ngl`, `-sm`, `-mg`, `-ts`, `-ot`)."""
    if split_mode not in SPLIT_MODES:
        raise ArgumentError(f"--split-mode {split_mode!r}: one of {', '.join(SPLIT_MODES)}")
    devices = list(range(len(gpus)))
    if split_mode == "none" and devices:
        if main_gpu < 0:
            devices = []
        elif main_gpu >= len(devices):
            raise ArgumentError(f"--main-gpu {main_gpu}: there are {len(devices)} GPUs (invalid value for main_gpu)")
        else:
            devices = [main_gpu]
    if tensor_split and len(tensor_split) > len(gpus):
        raise ArgumentError(f"--tensor-split has {len(tensor_split)} parts for {len(gpus)} GPUs")
    n_all = hp.n_layer_all
    ngl = n_gpu_layers if n_gpu_layers >= 0 else n_all + 1
    weights = [float(tensor_split[d]) if d < len(tensor_split) else 0.0 for d in devices]
    if not any(weights):
        weights = [float(gpus[d].free) for d in devices]
    cumulative = np.cumsum(np.asarray(weights, np.float32), dtype=np.float32)
    splits = cumulative / cumulative[-1] if devices else cumulative
    start = max(n_all + 1 - ngl, 0)
    active = min(ngl, n_all + 1) if devices else 0

    def device(il: int) -> int:
        if il < start or il - start >= active:
            return -1
        position = np.float32(il - start) / np.float32(active)
        return devices[int(np.searchsorted(splits, position, side="right"))]

    layers = tuple(device(il) for il in range(n_all))
    return Placement(tuple(gpus), layers, device(n_all), tuple(overrides), hp.output_norm_embd)


def tensor_device(name: str, placement: Placement) -> int:
    """The device a weight lives on: input tensors on the CPU, a layer's on its layer's device (the embedding
    norm on the first layer's unless it is the final norm), the rest (output, output_norm, ...) on the output
    layer's; an override first."""
    device = placement.devices.get(name)
    if device is None:
        device = placement.devices[name] = _tensor_device(name, placement)
    return device


def _tensor_device(name: str, placement: Placement) -> int:
    for override in placement.overrides:
        if override.matches(name):
            return override.device
    if name in INPUT_TENSORS:
        return -1
    if name in FIRST_LAYER_TENSORS and not (name == "token_embd_norm.weight" and placement.output_norm_embd):
        return placement.device_of(0)
    m = _LAYER.match(name)
    return placement.device_of(int(m[1])) if m else placement.output


def weights_per_device(hp: LlamaCppHParams, tensors: Mapping[str, TensorInfo], placement: Placement) -> dict[int, int]:
    """Bytes of weights each device holds (-1: the CPU), as the model's buffers sum them. A tied output matrix is
    a second copy of the token embeddings on the output layer's device when that is a GPU; a tensor every layer
    uses (rope frequencies) has a copy on each device that holds a layer using it; NextN layers' tensors are skipped
    unless loaded for speculative decoding (they are not here), but for those the loader creates all the same
    (`nextn_loaded`)."""
    out: dict[int, int] = {}
    buffers = {device: buffer_of(gpu) for device, gpu in [(-1, None), *enumerate(placement.gpus)]}
    n_layer = hp.n_layer
    cpu_only = not placement.gpus  # every tensor once, in the CPU's buffer (which pads no row): nothing to work out
    align = CPU_BUFFER.alignment
    for name, info in tensors.items():
        m = _LAYER.match(name)
        if m and int(m[1]) >= n_layer and name[m.end() :] not in hp.nextn_loaded:
            continue
        if cpu_only:
            out[-1] = out.get(-1, 0) + -(-info.nbytes // align) * align
            continue
        shared = name in PER_LAYER_SHARED
        for device in _shared_devices(hp, placement) if shared else (tensor_device(name, placement),):
            _add(out, device, buffers[device], info)
    if hp.tied_output and "output.weight" not in tensors and "token_embd.weight" in tensors and placement.output >= 0:
        _add(out, placement.output, buffers[placement.output], tensors["token_embd.weight"])
    return out


def lora_weights_per_device(arch: str, tensors: Mapping[str, TensorInfo], adapter: ModelFile,
                            placement: Placement) -> dict[int, int]:  # fmt: skip
    """Bytes of a LoRA adapter's weights each device holds (-1: the CPU), as `llama_adapter_lora_init` allocates
    them: each `<name>.lora_a` / `.lora_b` pair in the buffer type of the base model's `<name>` (a buffer per
    type, each tensor padded to its alignment), after llama.cpp's checks of the adapter against the model."""
    meta = adapter.metadata
    for key, want in (("general.type", "adapter"), ("general.architecture", arch), ("adapter.type", "lora")):
        if meta.get(key) != want:
            raise FormatError(adapter.path, None, f"{key} is {meta.get(key)!r}, not {want!r}: not a LoRA adapter "
                                                  f"of this {arch} model")  # fmt: skip
    pairs: dict[str, dict[str, TensorInfo]] = {}
    for name, info in adapter.tensors.items():
        base, _, part = name.rpartition(".")
        if part in ("lora_a", "lora_b"):
            pairs.setdefault(base, {})[part] = info
        elif not name.endswith("_norm.weight"):  # norms (mergekit-extract-lora's) are skipped
            raise FormatError(adapter.path, None, f"LoRA tensor {name!r} has an unexpected suffix")
    out: dict[int, int] = {}
    buffers = {device: buffer_of(gpu) for device, gpu in [(-1, None), *enumerate(placement.gpus)]}
    for base, pair in pairs.items():
        if len(pair) != 2:
            raise FormatError(adapter.path, None, f"the LoRA tensor pair for {base!r} is missing one component")
        weight = tensors.get(base)
        if weight is None:
            raise FormatError(adapter.path, None, f"LoRA tensor {base!r} does not exist in the base model "
                                                  "(the wrong base model?)")  # fmt: skip
        a, b = pair["lora_a"].shape, pair["lora_b"].shape  # numpy order: (rank, in) and (out, rank)
        if base.endswith("token_embd.weight"):
            fits = weight.shape[-1] == b[-2] and weight.shape[-2] == a[-2]  # A and B flipped
        else:
            fits = weight.shape[-1] == a[-1] and weight.shape[-2] == b[-2] and a[-2] == b[-1]
        if not fits:
            raise FormatError(adapter.path, None, f"LoRA tensors of {base!r} have shapes {list(a)} and {list(b)}, "
                                                  f"which do not fit its {list(weight.shape)}")  # fmt: skip
        device = tensor_device(base, placement)
        for info in pair.values():
            _add(out, device, buffers[device], info)
    return out


def _shared_devices(hp: LlamaCppHParams, placement: Placement) -> list[int]:
    """The devices of the layers that load a tensor every layer uses (`TENSOR_DUPLICATED` after the first)."""
    layers = range(hp.n_layer)
    if hp.rope_freqs_full_attention:
        layers = [il for il in layers if not hp.is_swa[il]]
    return sorted({placement.layers[il] for il in layers})


def _add(out: dict[int, int], device: int, buffer: Buffer, info: TensorInfo) -> None:
    ne0 = info.shape[-1] if info.shape else 1
    out[device] = out.get(device, 0) + buffer.alloc_size(int(info.dtype), ne0, info.nbytes)
