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

from ..dtypes import MLXQuantType
from ..gguf import GGUFFile, open_gguf
from ..gguf.constants import FILE_TYPES, KEY_ARCHITECTURE, KEY_FILE_TYPE
from ..llama_quantize.options import QuantizeOptions
from ..quant.mlx import mlx_quantize
from ..safetensors import SafetensorsCheckpoint, tensor_from, write_safetensors
from .names import ModelName, parse_name
from .store import CONFIG_MEDIA_TYPE, MEDIA_TYPES, Layer, Manifest, Store, Transaction
from .tensor_blobs import blob_metadata, canonical_quant, expert_group_prefix, tensor_quantization

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
    """Import a safetensors checkpoint folder as a tensor-blob model, as `ollama create --quantize` does."""
    name = parse_name(name) if isinstance(name, str) else name
    target = canonical_quant(quantize) if quantize else None
    folder = Path(folder)
    layers = []
    with store.transaction() as tx:
        with SafetensorsCheckpoint(folder) as model:
            groups: dict[str, list[str]] = {}
            for tensor_name in model.tensors:
                groups.setdefault(expert_group_prefix(tensor_name) or tensor_name, []).append(tensor_name)
            total = sum(i.nbytes for i in model.tensors.values())
            done = 0
            for layer_name, members in groups.items():
                plan: list[tuple[str, MLXQuantType | None]] = []
                for t in members:
                    info = model.tensors[t]
                    q = None if target is None else tensor_quantization(t, info.shape, target)
                    plan.append((t, q))
                layers.append(_write_tensor_blob(tx, model, layer_name, plan))
                done += sum(model.tensors[t].nbytes for t in members)
                if progress is not None:
                    progress(done, total)
            counts: dict[str, int] = {}
            for info in model.tensors.values():
                counts[info.dtype.value] = counts.get(info.dtype.value, 0) + info.n_elements
            source_type = max(counts, key=counts.get).lower() if counts else ""
            params = sum(i.n_elements for i in model.tensors.values())
            arch = _architecture(model.config or {})
        for path in sorted(folder.glob("*.json")):
            if path.name != "model.safetensors.index.json":
                layers.append(tx.add_file(path, MEDIA_TYPES["json"], path.name))
        config = {
            "model_format": "safetensors",
            "model_family": arch,
            "model_families": [arch] if arch else None,
            "model_type": human_number(params),
            "file_type": target.value if target else source_type,
            "capabilities": ["completion"],
            "architecture": "amd64",
            "os": "linux",
        }
        config_layer = tx.add_bytes(json.dumps(config, separators=(",", ":")).encode(), CONFIG_MEDIA_TYPE)
        manifest = Manifest(config_layer, layers)
        tx.write_manifest(name, manifest)
    return manifest


def _architecture(config: dict) -> str:
    arch = config.get("architectures")
    if isinstance(arch, list) and arch and isinstance(arch[0], str):
        return arch[0]
    return config.get("model_type", "") if isinstance(config.get("model_type"), str) else ""


def _write_tensor_blob(tx: Transaction, model, layer_name: str, plan) -> Layer:
    """One blob: each tensor as it is, or quantized into {name}, {name}.scale and {name}.bias."""
    tensors = []
    for t, q in plan:
        if q is None:
            info = model.tensors[t]
            tensors.append(tensor_from(t, model.raw(t), info.dtype, info.shape))
            continue
        w = model.tensor(t)
        if w.dtype not in (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
            w = w.astype(ml_dtypes.bfloat16)  # as Ollama: other types are quantized from bfloat16
        packed, scales, biases = mlx_quantize(w, q.value, q.group_size)
        tensors.append(tensor_from(t, packed))
        tensors.append(tensor_from(f"{t}.scale", scales))
        if biases is not None:
            tensors.append(tensor_from(f"{t}.bias", biases))
    tmp = tx.temp_path()
    write_safetensors(tmp, tensors, blob_metadata(plan))
    return tx.adopt(tmp, MEDIA_TYPES["tensor"], layer_name)
