"""Importing models into an Ollama store: a GGUF file as a `.model` layer (rewritten by llama-quantize COPY, a
split one merged, as Ollama's createModel does); a Hugging Face safetensors checkpoint as tensor blobs
(quantized with MLX's modes as Ollama quantizes them) plus its `.json` files, or converted to a GGUF (quantized
to a llama.cpp type as llama-quantize would) stored as a `.model` layer."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import ml_dtypes
import numpy as np

from ..dtypes import SafetensorsDType, as_bytes, safetensors_dtype_of_numpy
from ..errors import ArgumentError, FormatError, ModelNotFound, UnsupportedError, WeightkitError
from ..gguf import GGUFFile, GGUFValueType, Value, open_gguf
from ..gguf.constants import FILE_TYPES, KEY_ARCHITECTURE, KEY_FILE_TYPE, KEY_SPLIT_COUNT
from ..llama_quantize.options import COPY, QuantizeOptions
from ..llama_quantize.quantize import quantize_model
from ..quant.mlx import is_mlx_mode, mlx_quantize
from ..safetensors import SafetensorsFile
from .blob_bytes import BlobTensor, go_packed_header, mlx_blob
from .go_gguf import go_architecture, go_kv, go_value, split_merged_kv, write_go_gguf
from .go_template import TemplateError, check_template
from .import_plan import (
    DECODE_FP8,
    DECODE_STACK_FP8,
    DRAFT_CONFIG_PREFIX,
    DRAFT_TENSOR_PREFIX,
    INDEX_NAME,
    NONE,
    RECIPROCAL_F32,
    RELABEL_U8,
    REPACK_FP4,
    STACK_EXPERTS,
    BlobSpec,
    SourceTensor,
    TensorSpec,
    architecture_policy,
    classify,
    draft_policy,
    plan,
    prefix_specs,
    read_inventory,
)
from .modelfile import (
    CreateRequest,
    ModelfileError,
    create_request,
    go_json,
    messages_json,
    params_json,
    parse_modelfile,
)
from .names import ModelName, parse_name
from .safetensors_config import MIN_OLLAMA_VERSION, safetensors_config
from .store import CONFIG_MEDIA_TYPE, MEDIA_TYPES, Layer, Manifest, Store, Transaction
from .template_library import detect_template
from .tensor_blobs import blob_metadata

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)
_T = GGUFValueType


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
    """The config blob Ollama writes for a GGUF model (model/ConfigV2), before a Modelfile's settings."""
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


# ConfigV2's fields in its order (the optional ones omitted when empty, as Go's omitempty does).
_CONFIG_FIELDS = ("model_format", "model_family", "model_families", "model_type", "file_type", "renderer", "parser",
                  "requires", "remote_host", "remote_model", "capabilities", "context_length", "embedding_length",
                  "base_name", "draft", "architecture", "os")  # fmt: skip
_CONFIG_REQUIRED = ("model_format", "model_family", "model_families", "model_type", "file_type", "architecture", "os")
# createModel's renderer and parser (and default stop) by GGUF architecture.
_ARCH_DEFAULTS = {
    "gemma4": ("gemma4", "gemma4", ["<turn|>"]),
    "laguna": ("laguna", "laguna", None),
    "nemotron_h": ("nemotron-3-nano", "nemotron-3-nano", None),
    "nemotron_h_moe": ("nemotron-3-nano", "nemotron-3-nano", None),
    "nemotron_h_omni": ("nemotron-3-nano", "nemotron-3-nano", None),
}


def config_json(config: dict) -> bytes:
    """ConfigV2 as json.Marshal writes it: its field order, the optional ones omitted when empty."""
    return go_json({k: config.get(k) for k in _CONFIG_FIELDS if k in _CONFIG_REQUIRED or config.get(k)}).encode()


def config_bytes(config: dict) -> bytes:
    """ConfigV2 as createConfigLayer writes it (json.Encoder: a newline after)."""
    return config_json(config) + b"\n"


def _server_config(config: dict, request: CreateRequest | None, parameters: dict) -> dict:
    """createModel's settings on the config: the Modelfile's RENDERER, PARSER and REQUIRES, else the
    architecture's defaults (and its default stop, into `parameters`, unless the Modelfile set one)."""
    config = dict(config)
    if request is not None:
        for key in ("renderer", "parser", "requires"):
            config[key] = getattr(request, key) or config.get(key, "")
    defaults = _ARCH_DEFAULTS.get(config.get("model_family", ""))
    if defaults and not (config.get("renderer") and config.get("parser")):
        config["renderer"] = config.get("renderer") or defaults[0]
        config["parser"] = config.get("parser") or defaults[1]
        if defaults[2] is not None and "stop" not in parameters:
            parameters["stop"] = list(defaults[2])
    return config


def _server_layers(
    tx: Transaction, layers: list[Layer], request: CreateRequest | None, parameters: dict
) -> list[Layer]:
    """createModel's Modelfile layers after the model's: TEMPLATE and SYSTEM replace theirs, each LICENSE
    is added, PARAMETERs are merged over the stored ones (the request's win), MESSAGEs replace theirs."""

    def replace(kind: str, data: bytes) -> None:
        layers[:] = [layer for layer in layers if layer.media_type != MEDIA_TYPES[kind]]
        layers.append(tx.add_bytes(data, MEDIA_TYPES[kind]))

    if request is not None and request.template:
        replace("template", request.template.encode())
    if request is not None and request.system:
        replace("system", request.system.encode())
    for text in request.licenses if request is not None else ():
        layers.append(tx.add_bytes(text.encode(), MEDIA_TYPES["license"]))
    merged = dict(parameters)
    for layer in [layer for layer in layers if layer.media_type == MEDIA_TYPES["params"]]:
        stored = tx.blob_path(layer.digest)
        try:
            existing = json.loads(stored.read_bytes())
        except (OSError, ValueError) as e:
            raise FormatError(stored, None, f"the params layer is not JSON: {e}") from None
        for key, value in existing.items():
            merged.setdefault(key, value)
    if merged:
        replace("params", params_json(merged))
    if request is not None and request.messages:
        replace("messages", messages_json(request.messages))
    return layers


def _write_gguf_model(tx: Transaction, name: ModelName, config: dict, layers: list[Layer],
                      request: CreateRequest | None) -> Manifest:  # fmt: skip
    """createModel's end for a GGUF model: the Modelfile's layers and settings, the config, the manifest."""
    parameters = dict(request.parameters) if request is not None else {}
    config = _server_config(config, request, parameters)
    layers = list(layers)
    if request is not None and request.adapter_path is not None:
        layers += _adapter_layers(tx, request.adapter_path)
    if request is not None and request.draft_path is not None:
        layer, arch = _gguf_draft_layer(tx, request.draft_path)
        config["draft"] = {"model_format": "gguf", **({"architecture": arch} if arch else {})}
        layers.append(layer)
    layers = _server_layers(tx, layers, request, parameters)
    manifest = Manifest(tx.add_bytes(config_bytes(config), CONFIG_MEDIA_TYPE), layers)
    tx.write_manifest(name, manifest)
    return manifest


def _gguf_draft_layer(tx: Transaction, path: Path) -> tuple[Layer, str]:
    """A DRAFT GGUF's layer and architecture, as createModel stores it: a file as given (marked as from its
    name); a split one merged into one layer with no source name, as a split model is: by Ollama's Go GGUF
    writer when it has compatibility tensors, else by llama-quantize COPY (copyLayerWithLlamaQuantize)."""
    with open_gguf(path) as draft:
        arch = draft.metadata.get(KEY_ARCHITECTURE, "")
        if not _is_split(draft):
            return _as_given(tx, path, MEDIA_TYPES["draft"]), arch
        if _has_compatibility_tensors(draft):
            return _go_merged_layer(tx, path, draft, MEDIA_TYPES["draft"])[0], arch
        tmp = tx.temp_path()
        quantize_model(draft, tmp, QuantizeOptions(COPY))
    return tx.adopt(tmp, MEDIA_TYPES["draft"]), arch


def _library_layers(tx: Transaction, model: GGUFFile) -> list[Layer]:
    """detectChatTemplate's layers for a GGUF Ollama imports from a file (a model or an adapter, not a draft):
    the library template nearest to its chat template, and that template's stop parameters."""
    entry = detect_template(model.metadata)
    if entry is None:
        return []
    layers = [tx.add_bytes(entry.template, MEDIA_TYPES["template"])]
    if entry.params is not None:
        layers.append(tx.add_bytes(entry.params, MEDIA_TYPES["params"]))
    return layers


# Tensor name prefixes of the projector, audio and MTP tensors some GGUFs carry beside the text model (Ollama's
# isEmbeddedCompatibilityTensor): such a file is stored as given, as llama.cpp's text loader would drop them.
_COMPATIBILITY_PREFIXES = ("a.", "mm.", "mtp.", "s.", "v.")


def _has_compatibility_tensors(model: GGUFFile) -> bool:
    return any(name.startswith(_COMPATIBILITY_PREFIXES) for name in model.tensors)


def _is_split(model: GGUFFile) -> bool:
    return len(getattr(model, "shards", [model])) > 1


def _refuse_compatibility_quantize(path: Path) -> None:
    """What weightkit has no reference for (docs/formats.md says why): Ollama quantizes a GGUF with
    compatibility tensors (FP8-sourced, or with --quantize) with its own llama-quantize build (its compatibility
    patches), then restores the tensors that build dropped."""
    raise UnsupportedError(f"{path}: Ollama quantizes a GGUF with projector, audio or MTP tensors (FP8-sourced, "
                           "or with --quantize) with its own llama-quantize build, which weightkit does not "
                           "reproduce")  # fmt: skip


def _go_merged_layer(tx: Transaction, path: Path, model: GGUFFile, media_type: str) -> tuple[Layer, dict]:
    """A split GGUF with compatibility tensors as createModel stores it (copySplitLayerPreservingTensors): its
    shards merged by Ollama's Go GGUF writer into one layer with no source name, not rewritten further unless
    the merged model is FP8-sourced (refused); the layer and the config read from it."""
    tmp = tx.temp_path()
    write_go_gguf(model, split_merged_kv(model), tmp)
    with open_gguf(tmp) as merged:
        if media_type == MEDIA_TYPES["model"] and _server_quantize(merged, None).type != COPY:
            _refuse_compatibility_quantize(path)
        config = gguf_config(merged)
    return tx.adopt(tmp, media_type), config


def gguf_layer_kind(kv: dict[str, Value]) -> str:
    """ggufLayers' choice of layer for a GGUF from a file (FROM or ADAPTER), given the KV ggml.Decode holds
    (`go_kv`): "adapter" when general.type says so, "projector" when isProjectorGGUF, else "model"."""
    if go_value(kv, "general.type", _T.STRING) == "adapter":
        return "adapter"
    return "projector" if _is_projector(kv) else "model"


def _is_projector(kv: dict[str, Value]) -> bool:
    """isProjectorGGUF: general.type projector or mmproj; or no ARCH.block_count (as a uint32, 0 counting as
    none) but a vision.block_count (a standalone vision model); or a clip file with no block_count and a
    vision or audio encoder."""
    if go_value(kv, "general.type", _T.STRING) in ("projector", "mmproj"):
        return True
    if go_value(kv, "block_count", _T.UINT32):
        return False
    if go_value(kv, "vision.block_count", _T.UINT32):
        return True
    encoder = go_value(kv, "has_vision_encoder", _T.BOOL) or go_value(kv, "has_audio_encoder", _T.BOOL)
    return go_architecture(kv) == "clip" and bool(encoder)


def _needs_default_projector_type(kv: dict[str, Value]) -> bool:
    """needsDefaultLlavaProjectorType: a clip projector with a vision encoder and neither clip.projector_type
    nor clip.vision.projector_type (of any type) is a llava one, whose type Ollama then writes as "mlp"."""
    return (go_architecture(kv) == "clip" and bool(go_value(kv, "has_vision_encoder", _T.BOOL))
            and "clip.projector_type" not in kv and "clip.vision.projector_type" not in kv)  # fmt: skip


def _file_layer(tx: Transaction, path: Path, model: GGUFFile) -> Layer:
    """A GGUF from a file, of the layer `gguf_layer_kind` says, as createModel stores an adapter or projector:
    as given, marked as from its file name; a llava projector (`_needs_default_projector_type`) rewritten
    by Ollama's Go GGUF writer with clip.projector_type "mlp" added (addDefaultLlavaProjectorType), no name."""
    kv = go_kv(model)
    kind = gguf_layer_kind(kv)
    if kind == "projector" and _needs_default_projector_type(kv):
        tmp = tx.temp_path()
        write_go_gguf(model, {**kv, "clip.projector_type": Value("mlp", _T.STRING)}, tmp)
        return tx.adopt(tmp, MEDIA_TYPES[kind])
    return _as_given(tx, path, MEDIA_TYPES[kind])


def _as_given(tx: Transaction, path: Path, media_type: str) -> Layer:
    """A file stored as it is, its layer marked as from the file's name (createModel's layers of user files)."""
    return dataclasses.replace(tx.add_file(path, media_type), from_=path.name)


def _fp8_sourced(model: GGUFFile) -> bool:
    """hasSourceFP8Tensors: the file Ollama's converter made from an FP8 checkpoint (its keys under the
    architecture, where that converter's writer puts them)."""
    md = model.metadata
    arch = md.get(KEY_ARCHITECTURE)
    quant, tensors = (f"{arch if isinstance(arch, str) else 'unknown'}.{key}"  # kv.Architecture()'s keys
                      for key in ("source_quantization", "source_fp8_tensors"))  # fmt: skip
    return md.get(quant) == "hf_fp8" and bool(md.get(tensors)) and md.element_type(tensors) == GGUFValueType.STRING


# ggml.ParseFileType: the types `ollama create --quantize` takes (upper-cased), and the files it quantizes.
_OLLAMA_QUANTIZE_TYPES = {"F32": "F32", "F16": "F16", "Q8_0": "Q8_0", "Q4_K_S": "Q4_K_S", "Q4_K_M": "Q4_K_M",
                          "Q4_K": "Q4_K_M", "BF16": "BF16"}  # fmt: skip
_QUANTIZED_FROM = ("F16", "BF16", "F32")
# llamaQuantizeArgs' --tensor-type additions by architecture, for Q4_K_S and Q4_K_M only.
_MLA_TENSORS = ("attn_k_b", "attn_q_a", "attn_q_b", "attn_v_b", "attn_kv_a_mqa")
_GLM_EMBEDDINGS = ((r"^token_embd\.weight$", "f16"), (r"^output\.weight$", "f16"))
_ARCH_TENSOR_TYPES = {
    "qwen35": ((r"^blk\.[0-9]+\.nextn\.eh_proj\.weight$", "q8_0"),),
    "qwen35moe": ((r"^blk\.[0-9]+\.nextn\.eh_proj\.weight$", "q8_0"),),
    "gemma3n": ((r"^per_layer_token_embd\.weight$", "f16"),),
    "deepseek2": tuple((rf"{t}\.weight$", "q8_0") for t in _MLA_TENSORS),
    "glmocr": _GLM_EMBEDDINGS,
    "glm4": _GLM_EMBEDDINGS,
}


def _server_quantize(model: GGUFFile, quantize: str | None) -> QuantizeOptions:
    """What createModel has llama-quantize make of a GGUF model layer. With `quantize` (`create --quantize`):
    that type (ggml.ParseFileType's), from an F16, BF16 or F32 file only, COPY where the file has it already,
    with llamaQuantizeArgs' per-architecture tensor types. Without: Q8_0 for an F16, BF16 or F32 file that
    Ollama's converter made from an FP8 checkpoint (hasSourceFP8Tensors), else COPY."""
    ft = model.metadata.get(KEY_FILE_TYPE)
    file_type = FILE_TYPES.get(ft, "unknown") if isinstance(ft, int) else "unknown"
    if not quantize:
        return QuantizeOptions("Q8_0" if _fp8_sourced(model) and file_type in _QUANTIZED_FROM else COPY)
    want = _OLLAMA_QUANTIZE_TYPES.get(quantize.upper())
    if want is None:
        raise ArgumentError(f"--quantize: unsupported quantization type {quantize.upper()} - supported types are "
                            "F32, F16, Q4_K_S, Q4_K_M, Q8_0")  # fmt: skip
    if file_type not in _QUANTIZED_FROM:
        raise UnsupportedError(f"{model.path}: quantization is only supported for F16, BF16 and F32 models "
                               f"(this one is {file_type})")  # fmt: skip
    if file_type == want:
        return QuantizeOptions(COPY)
    arch = model.metadata.get(KEY_ARCHITECTURE, "")
    overrides = _ARCH_TENSOR_TYPES.get(arch, ()) if want in ("Q4_K_S", "Q4_K_M") else ()
    return QuantizeOptions(want, tensor_type=overrides)


def create_from_gguf(
    store: Store,
    name: ModelName | str,
    path: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
    request: CreateRequest | None = None,
    quantize: str | None = None,
) -> Manifest:
    """Store a GGUF model as `ollama create` does (createModel): rewritten by llama-quantize COPY (every tensor
    as it is, in llama-quantize's layout and metadata; a split model, opened from any shard, merged into one
    layer), quantized to `quantize` (`ollama create --quantize`; see `_server_quantize`), or Q8_0 for one
    converted from FP8, the config read from what was stored; the library template its chat template is
    nearest to; with a Modelfile's layers and settings when `request` is given. A GGUF with projector, audio
    or MTP tensors beside the text model is stored as given, a split one merged by Ollama's Go GGUF writer
    (`write_go_gguf`). A GGUF that is an adapter or projector (`gguf_layer_kind`) is stored as that layer."""
    return create_from_gguf_files(store, name, [path], progress=progress, request=request, quantize=quantize)


def create_from_gguf_files(
    store: Store,
    name: ModelName | str,
    paths: list[str | os.PathLike[str]],
    *,
    progress: Progress | None = None,
    request: CreateRequest | None = None,
    quantize: str | None = None,
) -> Manifest:
    """`create_from_gguf` for FROM a folder of several GGUFs (a model and its projector, say), as
    convertModelFromFiles takes them: a layer for each file in order of name (`gguf_layer_kind`: a model as
    `create_from_gguf` stores it, an adapter or projector by `_file_layer`), then each one's library template.
    The config is the model's (with no model fields when none is). Not followed, so refused: several files
    with more than one model, or one of them split (one file may be a split GGUF opened from any shard)."""
    name = parse_name(name) if isinstance(name, str) else name
    paths = sorted((Path(p) for p in paths), key=lambda p: p.name)
    with ExitStack() as stack, store.transaction() as tx:
        models = [stack.enter_context(open_gguf(p)) for p in paths]
        kinds = [gguf_layer_kind(go_kv(model)) for model in models]
        if len(paths) > 1 and (kinds.count("model") > 1 or any(_is_split(model) for model in models)):
            raise UnsupportedError(f"{paths[0].parent}: a folder of GGUFs holding more than one model, or a split "
                                   "one beside other files, is not supported")  # fmt: skip
        layers, config = [], _NO_MODEL_CONFIG
        for path, model, kind in zip(paths, models, kinds, strict=True):
            if kind == "model":
                layer, config = _model_layer(tx, path, model, quantize, progress)
            elif _is_split(model):
                raise UnsupportedError(f"{path}: a split GGUF that is not a model (an {kind}) is not supported")
            else:
                layer = _file_layer(tx, path, model)
            layers.append(layer)
        layers += [layer for model in models for layer in _library_layers(tx, model)]
        return _write_gguf_model(tx, name, config, layers, request)


# ConfigV2 when no layer is a model: createModel fills its model fields from model layers only.
_NO_MODEL_CONFIG = {"model_format": "", "model_family": "", "model_families": None, "model_type": "",
                    "file_type": "", "architecture": "amd64", "os": "linux"}  # fmt: skip


def _model_layer(
    tx: Transaction, path: Path, model: GGUFFile, quantize: str | None, progress: Progress | None
) -> tuple[Layer, dict]:
    """createModel's model layer for a GGUF model and the config read from it: llama-quantize's COPY or
    quantization (`_server_quantize`); one with compatibility tensors as given (named from its file), a split
    one merged by Ollama's Go GGUF writer, refused where it would be quantized."""
    options = _server_quantize(model, quantize)
    if not _has_compatibility_tensors(model):
        return _quantized_layer(tx, model, options, progress)
    if options.type != COPY:
        _refuse_compatibility_quantize(path)
    if _is_split(model):
        return _go_merged_layer(tx, path, model, MEDIA_TYPES["model"])
    return _file_layer(tx, path, model), gguf_config(model)


def _quantized_layer(
    tx: Transaction, model: GGUFFile, options: QuantizeOptions, progress: Progress | None
) -> tuple[Layer, dict]:
    """A model layer made by llama-quantize from `model`, and the config read from it."""
    tmp = tx.temp_path()
    counted = None if progress is None else lambda _, done, total: progress(done, total)
    quantize_model(model, tmp, options, progress=counted)
    with open_gguf(tmp) as stored:
        config = gguf_config(stored)
    return tx.adopt(tmp, MEDIA_TYPES["model"]), config


def create_from_hf_gguf(
    store: Store,
    name: ModelName | str,
    folder: str | os.PathLike[str],
    quantize: QuantizeOptions | str,
    *,
    progress: Progress | None = None,
    request: CreateRequest | None = None,
) -> Manifest:
    """Convert a Hugging Face checkpoint to GGUF and store it as a `.model` layer, as `ollama create --quantize
    Q4_K_M` does with safetensors: `quantize` is a llama.cpp file type or GGML type (or `QuantizeOptions`),
    and the GGUF is `convert_hf(folder, ..., quantize=quantize)`'s, streamed into the blob being written;
    then the library template its chat template is nearest to, and a Modelfile's layers and settings when
    `request` is given."""
    from ..convert.hf import convert_hf

    name = parse_name(name) if isinstance(name, str) else name
    with store.transaction() as tx:
        tmp = tx.temp_path()
        convert_hf(folder, tmp, quantize=quantize,
                   progress=None if progress is None else lambda _, done, total: progress(done, total))  # fmt: skip
        with open_gguf(tmp) as model:
            config = gguf_config(model)
            detected = _library_layers(tx, model)
        layer = tx.adopt(tmp, MEDIA_TYPES["model"])
        return _write_gguf_model(tx, name, config, [layer, *detected], request)


def create_from_checkpoint(
    store: Store,
    name: ModelName | str,
    folder: str | os.PathLike[str],
    *,
    quantize: str | None = None,
    progress: Progress | None = None,
    request: CreateRequest | None = None,
) -> Manifest:
    """Import a safetensors checkpoint folder as tensor blobs, as `ollama create [--quantize]` does
    (x/create's pipeline: inventory, classification, the architecture's policy, the plan, the blobs, then
    the folder's .json files and the config), with a Modelfile's DRAFT folder imported beside it
    (`_draft_import`): the same blobs, config and manifest, so the same model ID. Bad input raises before
    anything is stored."""
    name = parse_name(name) if isinstance(name, str) else name
    folder = Path(folder)
    inv = read_inventory(folder)
    cls = classify(inv, quantize)
    imports = [(folder, plan(inv, cls), "")]
    draft = None
    if request is not None and request.draft_path is not None:
        draft_specs, draft = _draft_import(request.draft_path)
        imports.append((request.draft_path, draft_specs, DRAFT_CONFIG_PREFIX))
    advance = _progress_over([specs for _, specs, _ in imports], progress)
    layers = []
    with store.transaction() as tx:
        for source, specs, config_prefix in imports:
            layers += _write_import(tx, source, specs, config_prefix, advance)
        layers += _x_create_layers(tx, request)
        file_type = cls.quantize.value if cls.quantize else ""
        settings = {k: getattr(request, k) for k in ("parser", "renderer", "requires")} if request else {}
        config = safetensors_config(folder, inv.config, file_type, draft=draft, **settings)
        config_layer = tx.add_bytes(config, CONFIG_MEDIA_TYPE)
        manifest = Manifest(config_layer, layers)
        tx.write_manifest(name, manifest)
    return manifest


def _progress_over(plans: list[list[BlobSpec]], progress: Progress | None) -> Callable[[BlobSpec], None]:
    """A callback for each blob written that reports the source bytes done of all the plans' bytes."""
    total, done = sum(_spec_bytes(spec) for specs in plans for spec in specs) or 1, 0

    def advance(spec: BlobSpec) -> None:
        nonlocal done
        done += _spec_bytes(spec)
        if progress is not None:
            progress(done, total)

    return advance


def _write_import(tx: Transaction, folder: Path, specs: list[BlobSpec], config_prefix: str,
                  advance: Callable[[BlobSpec], None]) -> list[Layer]:  # fmt: skip
    """WriteBlobs then importConfigBlobs: the planned blobs, then the folder's .json files."""
    layers = []
    with _Sources(folder) as sources:
        for spec in specs:
            layers.append(_write_tensor_blob(tx, sources, spec))
            advance(spec)
    return layers + _json_layers(tx, folder, config_prefix)


def _json_layers(tx: Transaction, folder: Path, prefix: str) -> list[Layer]:
    """importConfigBlobs: every .json file of the folder but the shard index, sorted, named with `prefix`."""
    return [tx.add_file(path, MEDIA_TYPES["json"], prefix + path.name) for path in sorted(folder.iterdir())
            if path.is_file() and path.name.endswith(".json") and path.name != INDEX_NAME]  # fmt: skip


def _draft_import(folder: Path) -> tuple[list[BlobSpec], dict]:
    """A DRAFT beside a safetensors model (CreateDraftLayers, with no --draft-quantize): its folder planned as
    a model is, under `draft_policy`, its names prefixed `draft.` (its .json files `draft/`), and the config's
    `draft` (draftMetadata: its first architecture, else its model_type)."""
    if not _safetensors_model_dir(folder):
        raise UnsupportedError(f"draft {folder} is not a supported safetensors model directory")
    inv = read_inventory(folder)
    specs = plan(inv, classify(inv, None), draft_policy(architecture_policy(inv)))
    archs, model_type = inv.config.get("architectures") or [], inv.config.get("model_type") or ""
    arch = (archs[0] if archs else "") or model_type
    if not arch:
        raise FormatError(folder / "config.json", None, "draft architecture not found")
    draft = {"model_format": "safetensors", "architecture": arch, "tensor_prefix": DRAFT_TENSOR_PREFIX,
             "config": DRAFT_CONFIG_PREFIX + "config.json"}  # fmt: skip
    return prefix_specs(specs, DRAFT_TENSOR_PREFIX), draft


def _spec_bytes(spec: BlobSpec) -> int:
    return sum(_source_bytes(s) for t in spec.tensors for s in t.sources)


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


def _x_create_layers(tx: Transaction, request: CreateRequest | None) -> list[Layer]:
    """x/create's Modelfile layers (createModelfileLayers): TEMPLATE, SYSTEM, the last LICENSE and the
    PARAMETERs as its client typed them; it takes no MESSAGE or ADAPTER."""
    if request is None:
        return []
    layers = []
    for kind, text in (("template", request.template), ("system", request.system),
                       ("license", request.licenses[-1] if request.licenses else "")):  # fmt: skip
        if text:
            layers.append(tx.add_bytes(text.encode(), MEDIA_TYPES[kind]))
    if request.parameters:
        layers.append(tx.add_bytes(params_json(request.parameters, through_server=False), MEDIA_TYPES["params"]))
    return layers


def read_modelfile(path: str | os.PathLike[str]) -> CreateRequest:
    """A Modelfile read and parsed, and the request `ollama create -f` builds from it (its paths relative
    to the Modelfile's folder)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise WeightkitError(f"{path}: {e.strerror}") from None
    return create_request(parse_modelfile(data, path), path.parent, str(path))


def create_from_modelfile(
    store: Store, name: ModelName | str, modelfile: str | os.PathLike[str], *, progress: Progress | None = None
) -> Manifest:
    """`ollama create NAME -f Modelfile`: see `create_from_request`."""
    return create_from_request(store, name, read_modelfile(modelfile), progress=progress)


def create_from_request(
    store: Store,
    name: ModelName | str,
    request: CreateRequest,
    *,
    progress: Progress | None = None,
    quantize: str | None = None,
) -> Manifest:
    """A model made as `ollama create [--quantize Q]` makes it from a Modelfile's request: FROM a safetensors
    folder (or a stored safetensors model with a safetensors DRAFT) goes through x/create (quantized with an MLX
    mode), or with a llama.cpp `quantize` type is converted to a GGUF model layer; FROM a GGUF file (or a folder
    of them) or a stored model through the server's createModel, which quantizes its model layer to `quantize`,
    and whose TEMPLATE is checked as Go's text/template parses it. Everything is checked before anything is
    stored; a rejected request leaves the store as it was."""
    name = parse_name(name) if isinstance(name, str) else name
    source = request.from_path
    where = str(source or request.from_name)
    checkpoint = source is not None and source.is_dir() and _checkpoint_files(source)
    stored_with_draft = source is None and request.draft_path is not None and _safetensors_model_dir(request.draft_path)
    if stored_with_draft or (checkpoint and (not quantize or is_mlx_mode(quantize))):
        if request.requires and _version(request.requires) < _version(MIN_OLLAMA_VERSION):
            raise WeightkitError(f"requires {request.requires} is below the minimum supported version "
                                 f"{MIN_OLLAMA_VERSION} for safetensors models")  # fmt: skip
        if stored_with_draft:
            if quantize:
                raise ArgumentError("--quantize: a stored model with a safetensors DRAFT keeps its layers as they are")
            return _create_from_stored_with_draft(store, name, parse_name(request.from_name), request)
        return create_from_checkpoint(store, name, source, quantize=quantize, progress=progress, request=request)
    _check_server_request(request)
    if checkpoint:
        return create_from_hf_gguf(store, name, source, quantize, progress=progress, request=request)
    if source is None:
        return _create_from_stored(store, name, parse_name(request.from_name), request, quantize)
    if source.is_dir():
        ggufs = sorted(source.glob("*.gguf"))
        if not ggufs:
            raise FormatError(source, None, "no Modelfile or safetensors files found")
        if not _one_split_model(ggufs):
            return create_from_gguf_files(store, name, ggufs, progress=progress, request=request, quantize=quantize)
        source = ggufs[0]
    elif _is_gguf(source):
        _check_not_one_shard(source)
    if not _is_gguf(source):
        raise FormatError(where, 0, "unknown type")
    return create_from_gguf(store, name, source, progress=progress, request=request, quantize=quantize)


def _check_server_request(request: CreateRequest) -> None:
    """What the server checks of a request before storing anything: its TEMPLATE parses as Go's text/template,
    its DRAFT and ADAPTER are GGUFs (their paths resolved to the files)."""
    if request.template:
        try:
            check_template(request.template)
        except TemplateError as e:
            raise ModelfileError(request.modelfile, None, str(e)) from None
    if request.draft_path is not None:
        request.draft_path = _draft_file(request.draft_path)
    if request.adapter_path is not None:
        request.adapter_path = _adapter_file(request.adapter_path)


def _check_not_one_shard(path: Path) -> None:
    """FROM one shard of a split GGUF is refused, as Ollama's server gets that file alone (mergeSplitGGUFLayers);
    FROM their folder merges them."""
    with GGUFFile(path, header_only=True) as model:
        count = model.metadata.get(KEY_SPLIT_COUNT, 1)
    if isinstance(count, int) and count > 1:
        raise FormatError(path, None, f"split GGUF has 1 shards, expected {count} (FROM their folder merges them)")


def _one_split_model(ggufs: list[Path]) -> bool:
    """Whether a folder's GGUFs are the shards of one split model (its first file's split.count of them)."""
    with GGUFFile(ggufs[0], header_only=True) as first:
        return first.metadata.get(KEY_SPLIT_COUNT, 1) == len(ggufs)


def _is_gguf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


# Ollama converts a safetensors ADAPTER with its own converter (convert.ConvertAdapter: llama and gemma2 bases),
# which weightkit does not reproduce: it has no oracle here (Ollama's convert package needs Go 1.24 or later and
# modules Debian does not package). llama.cpp's converter, which weightkit does reproduce, is the way round.
SAFETENSORS_ADAPTER = (
    "{path}: a safetensors ADAPTER is converted by Ollama's own converter, which weightkit does not reproduce; "
    "convert it with `weightkit convert ADAPTER_DIR adapter.gguf --lora --base BASE` (llama.cpp's "
    "convert_lora_to_gguf.py) and name adapter.gguf in ADAPTER"
)


def _adapter_file(path: Path) -> Path:
    """The GGUF an ADAPTER names (a file, or a folder's only one), refused as Ollama refuses the rest."""
    if path.suffix == ".safetensors" or (path.is_dir() and any(path.glob("*.safetensors"))):
        raise UnsupportedError(SAFETENSORS_ADAPTER.format(path=path))
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if not ggufs:
            raise FormatError(path, None, "no Modelfile or safetensors files found")
        if len(ggufs) > 1:
            raise FormatError(path, None, "only one adapter is currently supported")
        path = ggufs[0]
    if not _is_gguf(path):
        raise FormatError(path, 0, "supplied file was not in GGUF format")
    return path


def _refuse_safetensors_draft(path: Path) -> None:
    raise UnsupportedError(f"{path}: a safetensors DRAFT beside a GGUF model is converted by Ollama's own converter "
                           "(Qwen 3.5's MTP head), which weightkit does not reproduce")  # fmt: skip


def _draft_file(path: Path) -> Path:
    """The GGUF a DRAFT beside a GGUF or stored model names: a file, or a folder holding one GGUF or the shards of
    one split GGUF (one shard alone is refused, as for FROM). A safetensors draft there is refused: Ollama's
    server converts it with its own converter (ConvertQwen35MTPDraft: Qwen 3.5's MTP head, given the base
    model's tensors), which weightkit does not reproduce."""
    if path.is_dir():
        if _checkpoint_files(path):
            _refuse_safetensors_draft(path)
        ggufs = sorted(path.glob("*.gguf"))
        if not ggufs:
            raise FormatError(path, None, "no Modelfile or safetensors files found")
        with GGUFFile(ggufs[0], header_only=True) as first:
            count = first.metadata.get(KEY_SPLIT_COUNT, 1)
        if count != len(ggufs):
            raise UnsupportedError(f"{path}: a DRAFT folder must hold one GGUF model (or the shards of one split "
                                   f"model), not {len(ggufs)} files")  # fmt: skip
        path = ggufs[0]
    elif _is_gguf(path):
        _check_not_one_shard(path)
    if not _is_gguf(path):
        raise FormatError(path, 0, "supplied file was not in GGUF format")
    return path


def _adapter_layers(tx: Transaction, path: Path) -> list[Layer]:
    """An ADAPTER's GGUF as ggufLayers and createModel store it (`_file_layer`; one that is a model, not an
    adapter or projector, is stored as given with a model layer, where Ollama would also have llama-quantize
    COPY it); then the library template its chat template, if it has one, is nearest to."""
    with open_gguf(path) as model:
        return [_file_layer(tx, path, model), *_library_layers(tx, model)]


def _checkpoint_files(folder: Path) -> bool:
    """filesForModel's safetensors patterns."""
    return any(folder.glob("model*.safetensors")) or any(folder.glob("consolidated*.safetensors"))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("-")[0].split("+")[0].split("."))


def _safetensors_model_dir(folder: Path) -> bool:
    """IsSafetensorsModelDir: a folder with config.json and a .safetensors file."""
    return folder.is_dir() and (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))


def _create_from_stored_with_draft(
    store: Store, name: ModelName, source: ModelName, request: CreateRequest
) -> Manifest:
    """FROM a stored safetensors model with a safetensors DRAFT, as `ollama create --experimental` does it
    (createModelFromBaseWithDraft): the base's layers as they are, the draft's after them (`_draft_import`), then
    the Modelfile's; the base's config with x/create's requires (or REQUIRES), the Modelfile's PARSER and
    RENDERER over the base's, and the draft. Ollama's server takes no safetensors draft beside a stored model."""
    try:
        base = store.manifest(source)
    except (FileNotFoundError, ModelNotFound):
        raise ModelNotFound(f"pull model manifest: {source.short}: not found in the store") from None
    stored = json.loads(store.blob_path(base.config.digest).read_bytes()) if base.config.digest else {}
    if stored.get("model_format") != "safetensors" or "completion" not in (stored.get("capabilities") or []):
        _refuse_safetensors_draft(request.draft_path)
    if not any(layer.name == "config.json" for layer in base.layers):
        raise FormatError(source.short, None, "base model does not contain config.json")
    specs, draft = _draft_import(request.draft_path)
    config = {k: stored.get(k, None if k == "model_families" else "") for k in _CONFIG_FIELDS}  # as Go decoded it
    config.update(model_format="safetensors", draft=draft, requires=request.requires or MIN_OLLAMA_VERSION)
    for key in ("parser", "renderer"):
        config[key] = getattr(request, key) or stored.get(key)
    with store.transaction() as tx:
        layers = [Layer(layer.media_type, layer.digest, layer.size, layer.name) for layer in base.layers]
        for layer in layers:
            if not tx.pin(layer):
                raise WeightkitError(f"{source.short}: blob {layer.digest} is missing (see weightkit verify)")
        layers += _write_import(tx, request.draft_path, specs, DRAFT_CONFIG_PREFIX, _progress_over([specs], None))
        layers += _x_create_layers(tx, request)
        manifest = Manifest(tx.add_bytes(config_json(config), CONFIG_MEDIA_TYPE), layers)
        tx.write_manifest(name, manifest)
    return manifest


def _create_from_stored(
    store: Store, name: ModelName, source: ModelName, request: CreateRequest, quantize: str | None = None
) -> Manifest:
    """FROM a stored model (parseFromModel): its layers, each marked as from it, its config's renderer,
    parser, requires, format and capabilities, the rest read again from its GGUF model layer; that layer
    quantized as createModel quantizes it (`_server_quantize`: a new layer, from no model; a COPY keeps it)."""
    try:
        base = store.manifest(source)
    except (FileNotFoundError, ModelNotFound):
        raise ModelNotFound(f"pull model manifest: {source.short}: not found in the store") from None
    stored = json.loads(store.blob_path(base.config.digest).read_bytes()) if base.config.digest else {}
    config: dict = {k: stored.get(k) or "" for k in ("renderer", "parser", "requires", "model_format")}
    config["capabilities"] = stored.get("capabilities")
    config.update(model_family="", model_families=None, model_type="", file_type="", architecture="amd64", os="linux")
    layers = [Layer(layer.media_type, layer.digest, layer.size, layer.name, source.short) for layer in base.layers]
    with store.transaction() as tx:
        for layer in layers:
            if not tx.pin(layer):
                raise WeightkitError(f"{source.short}: blob {layer.digest} is missing (see weightkit verify)")
        for i, layer in enumerate(layers):
            if layer.media_type != MEDIA_TYPES["model"]:
                continue
            with open_gguf(tx.blob_path(layer.digest)) as model:
                options = _server_quantize(model, quantize)
                if options.type == COPY:
                    found = gguf_config(model)
                elif _has_compatibility_tensors(model):  # Ollama restores them after llama-quantize
                    raise UnsupportedError(f"{source.short}: a model with projector, audio or MTP tensors is not "
                                           "quantized by weightkit yet")  # fmt: skip
                else:
                    layers[i], found = _quantized_layer(tx, model, options, None)
            config["model_format"] = config["model_format"] or found["model_format"]
            for key in ("model_family", "model_type", "file_type"):
                config[key] = config[key] or found[key]
            config["model_families"] = [*(config["model_families"] or []), found["model_family"]]
        return _write_gguf_model(tx, name, config, layers, request)
