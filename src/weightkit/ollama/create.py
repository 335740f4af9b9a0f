"""Importing models into an Ollama store: a GGUF file as a `.model` layer; a Hugging Face safetensors
checkpoint as tensor blobs (quantized with MLX's modes as Ollama quantizes them) plus its `.json` files, or
converted to a GGUF (quantized to a llama.cpp type as llama-quantize would) stored as a `.model` layer."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np

from ..dtypes import SafetensorsDType, as_bytes, safetensors_dtype_of_numpy
from ..errors import FormatError, UnsupportedError
from ..gguf import GGUFFile, open_gguf
from ..gguf.constants import FILE_TYPES, KEY_ARCHITECTURE, KEY_FILE_TYPE
from ..llama_quantize.options import QuantizeOptions
from ..quant.mlx import mlx_quantize
from ..safetensors import SafetensorsFile
from .blob_bytes import BlobTensor, go_packed_header, mlx_blob
from .import_plan import (
    DECODE_FP8,
    DECODE_STACK_FP8,
    INDEX_NAME,
    NONE,
    RECIPROCAL_F32,
    RELABEL_U8,
    REPACK_FP4,
    STACK_EXPERTS,
    BlobSpec,
    SourceTensor,
    TensorSpec,
    classify,
    plan,
    read_inventory,
)
from .names import ModelName, parse_name
from .safetensors_config import safetensors_config
from .store import CONFIG_MEDIA_TYPE, MEDIA_TYPES, Layer, Manifest, Store, Transaction
from .tensor_blobs import blob_metadata

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


def human_number(n: int) -> str:
    """Ollama's format.HumanNumber: what `ollama show` calls the parameter size (e.g. 268.10M, 8B)."""
    for div, unit, digits in ((10**9, "B", 1), (10**6, "M", 2)):
        if n >= div:
            number = n / div
            return f"{number:.0f}{unit}" if number == math.floor(number) else f"{number:.{digits}f}{unit}"
    if n >= 1000:
        return f"{n / 1000:.0f}K"
    return str(n)


def gguf_config(model: GGUFFile) -> dict:
    """The config blob Ollama writes for a GGUF model (model/ConfigV2)."""
    arch = model.metadata.get(KEY_ARCHITECTURE, "")
    ft = model.metadata.get(KEY_FILE_TYPE)
    params = sum(t.n_elements for t in model.tensors.values())
    return {
        "model_format": "gguf",
        "model_family": arch,
        "model_families": [arch] if arch else None,
        "model_type": human_number(params),
        "file_type": FILE_TYPES.get(ft, "unknown") if isinstance(ft, int) else "unknown",
        "architecture": "amd64",
        "os": "linux",
    }


def create_from_gguf(
    store: Store, name: ModelName | str, path: str | os.PathLike[str], *, progress: Progress | None = None
) -> Manifest:
    """Store a GGUF model (any shard of a split one opens all of it; each shard becomes a `.model` layer)."""
    name = parse_name(name) if isinstance(name, str) else name
    with open_gguf(path) as model:
        shards = [s.path for s in getattr(model, "shards", [model])]
        config = gguf_config(model)
    total = sum(p.stat().st_size for p in shards)
    done = 0
    layers = []
    with store.transaction() as tx:
        for shard in shards:

            def counted(chunks, base=done):
                seen = 0
                for chunk in chunks:
                    seen += len(chunk)
                    if progress is not None:
                        progress(base + seen, total)
                    yield chunk

            with open(shard, "rb") as f:
                layers.append(tx.add_blob(counted(iter(lambda f=f: f.read(8 << 20), b"")), MEDIA_TYPES["model"]))
            done += Path(shard).stat().st_size
        config_layer = tx.add_bytes(json.dumps(config, separators=(",", ":")).encode(), CONFIG_MEDIA_TYPE)
        manifest = Manifest(config_layer, layers)
        tx.write_manifest(name, manifest)
    return manifest


def create_from_hf_gguf(
    store: Store,
    name: ModelName | str,
    folder: str | os.PathLike[str],
    quantize: QuantizeOptions | str,
    *,
    progress: Progress | None = None,
) -> Manifest:
    """Convert a Hugging Face checkpoint to GGUF and store it as a `.model` layer, as `ollama create --quantize
    Q4_K_M` does with safetensors: `quantize` is a llama.cpp file type or GGML type (or `QuantizeOptions`),
    and the GGUF is `convert_hf(folder, ..., quantize=quantize)`'s, streamed into the blob being written."""
    from ..convert.hf import convert_hf

    name = parse_name(name) if isinstance(name, str) else name
    with store.transaction() as tx:
        tmp = tx.temp_path()
        convert_hf(folder, tmp, quantize=quantize,
                   progress=None if progress is None else lambda _, done, total: progress(done, total))  # fmt: skip
        with open_gguf(tmp) as model:
            config = gguf_config(model)
        layer = tx.adopt(tmp, MEDIA_TYPES["model"])
        config_layer = tx.add_bytes(json.dumps(config, separators=(",", ":")).encode(), CONFIG_MEDIA_TYPE)
        manifest = Manifest(config_layer, [layer])
        tx.write_manifest(name, manifest)
    return manifest


def create_from_checkpoint(
    store: Store,
    name: ModelName | str,
    folder: str | os.PathLike[str],
    *,
    quantize: str | None = None,
    progress: Progress | None = None,
) -> Manifest:
    """Import a safetensors checkpoint folder as tensor blobs, as `ollama create [--quantize]` does
    (x/create's pipeline: inventory, classification, the architecture's policy, the plan, the blobs, then
    the folder's .json files and the config): the same blobs, config and manifest, so the same model ID.
    Bad input raises before anything is stored."""
    name = parse_name(name) if isinstance(name, str) else name
    folder = Path(folder)
    inv = read_inventory(folder)
    cls = classify(inv, quantize)
    specs = plan(inv, cls)
    total = sum(_source_bytes(s) for spec in specs for t in spec.tensors for s in t.sources) or 1
    done = 0
    layers = []
    with store.transaction() as tx, _Sources(folder) as sources:
        for spec in specs:
            layers.append(_write_tensor_blob(tx, sources, spec))
            done += sum(_source_bytes(s) for t in spec.tensors for s in t.sources)
            if progress is not None:
                progress(done, total)
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.name.endswith(".json") and path.name != INDEX_NAME:
                layers.append(tx.add_file(path, MEDIA_TYPES["json"], path.name))
        file_type = cls.quantize.value if cls.quantize else ""
        config_layer = tx.add_bytes(safetensors_config(folder, inv.config, file_type), CONFIG_MEDIA_TYPE)
        manifest = Manifest(config_layer, layers)
        tx.write_manifest(name, manifest)
    return manifest


def _source_bytes(t: SourceTensor) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n * SafetensorsDType(t.dtype).bits // 8


class _Sources:
    """The checkpoint's shards, each opened once."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.files = folder, {}

    def __enter__(self) -> _Sources:
        return self

    def __exit__(self, *exc) -> None:
        for f in self.files.values():
            f.close()

    def raw(self, t: SourceTensor) -> memoryview:
        if t.file not in self.files:
            self.files[t.file] = SafetensorsFile(self.folder / t.file)
        return memoryview(self.files[t.file].raw(t.name)).cast("B")

    def array(self, t: SourceTensor, dtype: str | None = None, shape: tuple[int, ...] | None = None) -> np.ndarray:
        st = SafetensorsDType((dtype or t.dtype).upper())
        if st.numpy is None:
            raise UnsupportedError(f"{self.folder / t.file}: tensor {t.name!r} is {t.dtype}, which MLX cannot load")
        return np.frombuffer(self.raw(t), st.numpy).reshape(shape or t.shape)


def _byte_tensor(sources: _Sources, t: TensorSpec) -> BlobTensor:
    """A tensor made without MLX: copied, relabelled, a checked scalar (or its reciprocal), experts stacked."""
    src = t.sources[0]
    where = f"{sources.folder / src.file}: tensor {src.name!r}"
    if t.transform in (NONE, REPACK_FP4, RELABEL_U8):
        return BlobTensor(t.name, t.out_dtype or src.dtype, t.out_shape or src.shape, sources.raw(src))
    if t.transform == STACK_EXPERTS:
        data = b"".join(bytes(sources.raw(s)) for s in t.sources)
        return BlobTensor(t.name, t.out_dtype, t.out_shape, data)
    if src.dtype.upper() != "F32":
        raise FormatError(sources.folder / src.file, None, f"tensor {src.name!r}: a global scale must be F32, "
                          f"not {src.dtype}")  # fmt: skip
    value = np.frombuffer(sources.raw(src), "<f4")
    if value.size != 1:
        raise FormatError(sources.folder / src.file, None, f"tensor {src.name!r}: a global scale must be one "
                          f"value, not shape {list(src.shape)}")  # fmt: skip
    if t.transform == RECIPROCAL_F32:
        if value[0] == 0:
            raise FormatError(sources.folder / src.file, None, f"{where}: a zero global scale has no reciprocal")
        value = np.float32(1) / value
    return BlobTensor(t.name, "F32", src.shape, value.astype("<f4").tobytes())


def _decoded_fp8(sources: _Sources, t: TensorSpec) -> np.ndarray:
    """A block-FP8 weight (or its experts, stacked) times its 128x128 block scales, in bfloat16 as MLX
    decodes it: E4M3 is exact in bfloat16, the product is float32, rounded to bfloat16."""
    n = len(t.sources) // 2  # the weights (one, or each expert's), then their scales
    weights, scales = t.sources[:n], t.sources[n:]
    w = np.stack([sources.array(s, "U8").view(ml_dtypes.float8_e4m3fn) for s in weights])
    scale = np.stack([sources.array(s).astype(np.float32) for s in scales])
    rows, cols = w.shape[-2:]  # the plan checked the scales tile the weight in 128x128 blocks
    full = np.repeat(np.repeat(scale, 128, axis=-2), 128, axis=-1)[..., :rows, :cols]
    out = (w.astype(np.float32) * full).astype(ml_dtypes.bfloat16)
    return out if t.transform == DECODE_STACK_FP8 else out[0]


def _mlx_arrays(sources: _Sources, t: TensorSpec) -> list[BlobTensor]:
    """A tensor through MLX: decoded from FP8 or stacked if so planned, then kept or quantized."""
    if t.transform in (DECODE_FP8, DECODE_STACK_FP8):
        w = _decoded_fp8(sources, t)
    elif t.quantize is None:
        return [_byte_tensor(sources, t)]
    elif t.transform == STACK_EXPERTS:
        w = np.stack([sources.array(s) for s in t.sources])
    else:
        w = sources.array(t.sources[0])
    if t.quantize is None:
        return [BlobTensor(t.name, "BF16", w.shape, as_bytes(w))]
    if w.dtype not in (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        w = w.astype(ml_dtypes.bfloat16)  # as Ollama: other types are quantized from bfloat16
    packed, scales, biases = mlx_quantize(w, t.quantize.value, t.quantize.group_size)
    parts = {t.name: packed, f"{t.name}.scale": scales, f"{t.name}.bias": biases}
    return [
        BlobTensor(k, safetensors_dtype_of_numpy(a.dtype).value, a.shape, as_bytes(a))
        for k, a in parts.items()
        if a is not None
    ]


def _write_tensor_blob(tx: Transaction, sources: _Sources, spec: BlobSpec) -> Layer:
    """One blob, byte for byte as Ollama writes it: through MLX when a tensor is quantized or FP8-decoded."""
    if any(t.quantize is not None or t.transform in (DECODE_FP8, DECODE_STACK_FP8) for t in spec.tensors):
        arrays = {a.name: a for t in spec.tensors for a in _mlx_arrays(sources, t)}
        header, ordered = mlx_blob(arrays, blob_metadata((t.name, t.quantize) for t in spec.tensors))
    else:
        ordered = [_byte_tensor(sources, t) for t in spec.tensors]
        header = go_packed_header(ordered, spec.metadata)
    chunks = [header, *(memoryview(t.data).cast("B") for t in ordered)]  # every tensor's data is bytes-like
    return tx.add_blob(chunks, MEDIA_TYPES["tensor"], spec.name)
