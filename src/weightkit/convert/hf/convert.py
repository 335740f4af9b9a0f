"""`convert_hf`: a Hugging Face checkpoint folder to the GGUF llama.cpp's `convert_hf_to_gguf.py` writes.

The steps follow the reference's: hyperparameters (config.json through transformers' defaults), the
architecture's table entry, the tensors in the reference's order (generated ones first) through renames,
transforms and the per-tensor type rule, then the metadata in the reference's key order (`general.*`, the
architecture's keys, the tokenizer's). Everything is planned from the files' headers before any tensor is
read; then the writer streams one tensor at a time from the memory-mapped shards into a temporary file that
replaces the destination only when complete.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ... import quant
from ...dtypes import ggml_type
from ...errors import ArgumentError, FormatError, UnsupportedError
from ...gguf import Metadata, Value, plan_tensor, row_groups, write_gguf
from ...gguf.split import ConverterSplit, write_files
from ...llama_quantize import QuantizeOptions, quantize_model
from ...model import ModelFile, TensorInfo
from .. import families
from ..families.family import Conversion, Transform
from .config import (
    CONFIG_NAME,
    PARAMS_JSON,
    HFConfig,
    load_hparams,
    parse_once,
    read_json_object,
    read_raw_config,
)
from .kv import KV
from .metadata import derive_metadata, size_label, write_metadata
from .parameters import block_count, rope_parameters
from .projector import load_projector_hparams, projector_architecture, projector_filter
from .tensors import SourceTensor, close_all, is_16bit, read_checkpoint

#: --outtype -> (llama.cpp file type, GGML type of the matrices)
OUTTYPES: dict[str, tuple[int, str]] = {
    "f32": (0, "F32"), "f16": (1, "F16"), "bf16": (32, "BF16"), "q8_0": (7, "Q8_0"), "tq1_0": (36, "TQ1_0"),
    "tq2_0": (37, "TQ2_0"),
}  # fmt: skip
OUTTYPE_CHOICES = (*OUTTYPES, "auto")
_INTERMEDIATE = ("f32", "f16", "bf16", "auto")  # what llama-quantize can take from the converter
_SKIPPED = (".attention.masked_bias", ".attention.bias", ".rotary_emb.inv_freq")
#: Matrices the converter keeps in F32 whatever the outtype (its list, for the tensors our architectures have).
_F32_MATRICES = ("ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight", "position_embd.weight", "token_types.weight",
                 "v.position_embd.weight", "a.position_embd.weight", "ssm_conv1d.weight",
                 "shortconv.conv.weight", "altup_correct_coef.weight", "altup_predict_coef.weight")  # fmt: skip
#: ... and in F16 under the ternary outtypes (the converter's "TODO: use Q4_K and Q6_K").
_F16_UNDER_TERNARY = ("token_embd.weight", "per_layer_token_embd.weight", "output.weight")
_BLOCK = re.compile(r"^blk\.\d+\.")
_FLOAT_FILE_TYPES = (0, 1, 32)
#: quant_method -> the file type the converter writes instead of f32/f16/bf16's
_QUANT_FILE_TYPES = {"mxfp4": 38}

Progress = Callable[[str, int, int], None]


@dataclass
class ConvertReport:
    """What `convert_hf` wrote: the GGUF architecture, the resolved outtype, and each tensor's type."""

    source: str
    output: str
    hf_architecture: str
    architecture: str
    outtype: str  # with `quantized`, the type the converter would have written before llama-quantize
    file_type: int
    parameters: int
    size_label: str | None
    metadata_keys: int
    tensors: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)  # name -> (type, shape)
    bytes_written: int = 0
    quantized: str | None = None  # the llama-quantize target, when converted and quantized in one pass
    outputs: list[str] = field(default_factory=list)  # the files written: `output`, or its shards


@dataclass
class PlannedTensor:
    name: str
    type: str
    shape: tuple[int, ...]
    make: Callable[[], np.ndarray]  # the tensor's bytes as `type`
    rows: Callable[[int, int], np.ndarray] | None = None  # ... rows start:stop of them, when made by rows


def hf_architecture(raw: dict, folder: Path) -> str:
    """The class name the converter goes by: `architectures[0]`, or its text model's when it has one."""
    text = raw.get("text_config")
    for config in (text if isinstance(text, dict) else {}, raw):
        arches = config.get("architectures")
        if isinstance(arches, list) and arches and isinstance(arches[0], str):
            return arches[0]
    raise FormatError(folder / CONFIG_NAME, None, "no 'architectures' list naming the model class")


def _conversion(folder: Path, mmproj: bool, mistral_format: bool) -> tuple[str, Conversion, dict, HFConfig]:
    """The converter's class for the folder, its conversion, the config file as written and the hparams: from
    config.json, or (`mistral_format`) Mistral's params.json, read as written."""
    if mistral_format:
        if mmproj:
            raise ArgumentError("--mistral-format with --mmproj: a Mistral-format projector is not supported")
        raw = read_json_object(folder / PARAMS_JSON, "params.json (--mistral-format: Mistral's own format)")
        return "MistralModel", families.MISTRAL_FORMAT, raw, HFConfig(raw)
    raw = read_raw_config(folder)
    name = (projector_architecture if mmproj else hf_architecture)(raw, folder)
    table = families.PROJECTORS if mmproj else families.CONVERSIONS
    arch = table.get(name)
    if arch is None:
        what = "a projector (--mmproj) for" if mmproj else "architecture"
        raise UnsupportedError(f"{folder / CONFIG_NAME}: {what} {name!r} is not supported "
                               f"(supported: {', '.join(table)})")  # fmt: skip
    loader = load_projector_hparams if mmproj else load_hparams
    return name, arch, raw, loader(folder, families.CONFIG_CLASSES)


@parse_once()  # the steps reading tokenizer.json share one parse of it
def convert_hf(
    folder: str | os.PathLike[str],
    output: str | os.PathLike[str],
    outtype: str = "auto",
    progress: Progress | None = None,
    *,
    quantize: QuantizeOptions | str | None = None,
    mmproj: bool = False,
    split: ConverterSplit | None = None,
    mistral_format: bool = False,
) -> ConvertReport:
    """Convert the checkpoint in `folder` to a GGUF at `output`, byte for byte as llama.cpp's converter would
    with `--outtype` (f32, f16, bf16, q8_0, tq1_0, tq2_0, or auto: bf16 or f16 after the first 16-bit matrix,
    else f16). `progress(tensor_name, bytes_done, bytes_total)` is called after each tensor is written.

    With `quantize` (a `QuantizeOptions`, or a type name such as "Q4_K_M"), the output is what llama-quantize
    makes of the converter's output, in one pass: each tensor is converted as the converter would write it
    and quantized as llama-quantize would, with no intermediate file. The converter's type is then `outtype`
    (f32, f16 or bf16), and "auto" means the type the checkpoint's first matrix is stored in (bf16, f16, else
    f32): the one that loses nothing before quantizing.

    With `mmproj`, the output is the model's projector (`convert_hf_to_gguf.py --mmproj`): its vision encoder
    and projection, the `clip` architecture, as its family declares it (`Family.projectors`).

    With `split` (the converter's `--split-max-tensors`, `--split-max-size`, `--no-tensor-first-split`), the
    output is the shards the converter writes (`ConverterSplit`), all moved into place once all are written.

    With `mistral_format` (the converter's `--mistral-format`), the folder is in Mistral's own format: params.json,
    consolidated.safetensors and tekken.json."""
    folder, output = Path(folder), Path(output)
    options = None if quantize is None else _quantize_options(quantize, outtype)
    if outtype not in OUTTYPE_CHOICES:
        raise ArgumentError(f"--outtype {outtype!r}: one of {', '.join(OUTTYPE_CHOICES)}")
    if not folder.is_dir():
        raise ArgumentError(f"{folder}: not a folder (give a Hugging Face checkpoint folder)")
    if output.is_dir():
        raise ArgumentError(f"{output}: is a folder; give the GGUF file's path")
    if split is not None and options is not None:
        raise ArgumentError("the converter's split options apply to its own output; to split a quantized model, "
                            "run split on it")  # fmt: skip
    if mmproj and options is not None:
        raise ArgumentError("a projector (mmproj) is converted to --outtype's types, not quantized in the same pass")
    name, arch, raw, hparams = _conversion(folder, mmproj, mistral_format)
    quantized = _quant_method(hparams, arch, folder)
    for check in arch.checks:
        check(folder, hparams)
    rope = {} if mmproj else rope_parameters(hparams)
    sources, opened = read_checkpoint(folder, mistral_format=mistral_format)
    try:
        tensors = _filtered(sources, arch, projector_filter if mmproj else common_filter)
        if arch.blocks is not None:
            hparams.block_count = arch.blocks(hparams, [n for n, _ in tensors])
        outtype = _resolve_outtype(outtype, tensors, lossless=options is not None)
        file_type, matrix_type = OUTTYPES[outtype]
        if quantized is not None and file_type in _FLOAT_FILE_TYPES:
            file_type = _QUANT_FILE_TYPES[quantized]  # `prepare_metadata`: the file is as quantized as its experts
        plan = _plan(arch, hparams, rope, tensors, matrix_type, folder)
        counts = _parameter_counts(plan)
        kv = KV(arch.gguf)
        for lead in arch.leading_parameters:  # set while the converter generates its extra tensors
            lead(kv, arch.gguf, hparams, rope)
        kv.string("general.type", arch.general_type)
        meta = derive_metadata(folder, raw, counts[0])
        if meta.size_label is None and counts[0] > 0:
            meta.size_label = size_label(*counts)
        write_metadata(kv, meta, (folder / "README.md", folder / "generation_config.json"))
        arch.text_parameters(kv, arch.gguf, hparams, rope, file_type)
        for write in arch.parameters:
            write(kv, arch.gguf, folder, hparams)
        kv.u32("general.quantization_version", 2)
        arch.vocab(kv, folder, hparams)
        report = ConvertReport(str(folder), str(output), name, arch.gguf, outtype, file_type, counts[0],
                               meta.size_label, len(kv.values))  # fmt: skip
        if options is None:
            write_planned(output, kv, plan, report, progress, split)
        else:
            _write_quantized(output, kv, plan, options, report, progress)
    finally:
        close_all(opened)
    return report


def _quant_method(h: HFConfig, arch: Conversion, folder: Path) -> str | None:
    """The checkpoint's `quantization_config.quant_method`, when it has one the architecture converts."""
    config = h.get("quantization_config")
    if not config:
        return None
    method = config.get("quant_method") if isinstance(config, dict) else None
    if method not in arch.quantized:
        raise UnsupportedError(f"{folder / CONFIG_NAME}: quantized checkpoints (quantization_config, quant_method "
                               f"{method!r}) are not supported for {arch.gguf}")  # fmt: skip
    return method


_MULTIMODAL_PREFIXES = ("mlp", "vit.", "vpm.", "siglip2.", "conformer.", "merger.", "resampler.", "sound_encoder.",
                        "sound_projection.", "speech_embeddings.")  # fmt: skip
_MULTIMODAL_PARTS = ("visual.", "vision.", "audio.", "talker.", "vision_", "audio_", "token2wav.", "code2wav.",
                     "projector.", "pre_mm_projector_norm", "image_newline", "view_seperator", "patch_embed",
                     "patch_embedding", "patch_merger.", "patch_merge_mlp.", "model.connector.")  # fmt: skip


def common_filter(name: str) -> str | None:
    """`TextModel.filter_tensors` and `ModelBase.filter_tensors`, which every architecture ends with: drop
    multimodal towers, drop `language_model.` from names."""
    if name.startswith(_MULTIMODAL_PREFIXES) or any(p in name for p in _MULTIMODAL_PARTS):
        return None
    if name.endswith("e_score_correction_bias"):
        name = name.replace("e_score_correction_bias", "e_score_correction.bias")
    return name.replace("language_model.", "")


def _filtered(sources: dict[str, SourceTensor], arch: Conversion,
              common: Callable[[str], str | None]) -> list[tuple[str, SourceTensor]]:  # fmt: skip
    """The architecture's renames and drops, then the `common` ones (a text model's or a projector's); a later
    duplicate name replaces the earlier tensor in its position (the converter keeps them in a dict)."""
    kept: dict[str, SourceTensor] = {}
    for name, t in sources.items():
        new: str | None = name
        for f in (*arch.filters, common):
            new = f(new)
            if new is None:
                break
        if new is not None:
            kept[new] = t
    return list(kept.items())


def _resolve_outtype(outtype: str, tensors: list[tuple[str, SourceTensor]], *, lossless: bool = False) -> str:
    """`--outtype auto`: bf16 or f16 after the first matrix stored so; f16 when there is none. Before
    quantizing (`lossless`): the first matrix's own type, bf16, f16 or else f32."""
    if outtype != "auto":
        return outtype
    matrices = [t for _, t in tensors if len(t.shape) >= 2]
    if lossless:
        return (is_16bit(matrices[0]) if matrices else None) or "f32"
    return next((kind for t in matrices if (kind := is_16bit(t))), "f16")


def _quantize_options(quantize: QuantizeOptions | str, outtype: str) -> QuantizeOptions:
    """The options of the one-pass quantization, checked against what a conversion can give them."""
    options = quantize if isinstance(quantize, QuantizeOptions) else QuantizeOptions(quantize)
    if outtype not in _INTERMEDIATE:
        raise ArgumentError(f"--outtype {outtype!r} with --type: the converter's type before quantizing is one of "
                            f"{', '.join(_INTERMEDIATE)}")  # fmt: skip
    if options.keep_split:
        raise ArgumentError("--keep-split: a converted checkpoint is one file; there are no shards to keep")
    return options


def tensor_name_map(arch: Conversion, n_blocks: int) -> dict[str, str]:
    """The HF -> GGUF names for blocks 0..n_blocks-1, plus each GGUF name for itself (as gguf-py's map has)."""
    out: dict[str, str] = {}
    for hf, gguf in arch.tensor_names.items():
        for bid in range(n_blocks) if "{bid}" in hf else [None]:
            out[hf.format(bid=bid)] = gguf.format(bid=bid)
            out[gguf.format(bid=bid)] = gguf.format(bid=bid)
    return out


def map_tensor_name(names: dict[str, str], name: str) -> str | None:
    if name in names:
        return names[name]
    for suffix in (".weight", ".bias"):
        if name.endswith(suffix) and (base := names.get(name[: -len(suffix)])) is not None:
            return base + suffix
    return None


def tensor_type(gguf_name: str, ndim: int, matrix_type: str, shape: tuple[int, ...], forced: str | None = None) -> str:
    """The converter's per-tensor type: F32 for vectors and norms; the `forced` type (its `tensor_force_quant`)
    where there is one; else F32 for biases and a few matrices, F16 for the embeddings and output under
    TQ1_0/TQ2_0, the outtype's type for the rest; F16 for rows that are not whole blocks of a quantized type
    (32 for Q8_0, 256 for TQ1_0/TQ2_0)."""
    if ndim <= 1 or gguf_name.endswith("_norm.weight"):
        return "F32"
    if forced is None:
        if _BLOCK.sub("", gguf_name) in _F32_MATRICES or gguf_name[-7:] not in (".weight", ".lora_a", ".lora_b"):
            return "F32"
        if matrix_type.startswith("TQ") and gguf_name in _F16_UNDER_TERNARY:
            return "F16"
    kind = forced or matrix_type
    if shape[-1] % ggml_type(kind).block_size:
        return "F16"
    return kind


def _plan(arch: Conversion, h: HFConfig, rope: dict, tensors: list[tuple[str, SourceTensor]], matrix_type: str,
          folder: Path) -> list[PlannedTensor]:  # fmt: skip
    """Every output tensor, in order, with its type, shape and a maker of its bytes; checks names and shapes."""
    n_blocks = block_count(h)
    if not isinstance(n_blocks, int) or isinstance(n_blocks, bool) or n_blocks < 0:
        raise FormatError(folder / CONFIG_NAME, None, f"layer count {n_blocks!r} is not a count")
    names = tensor_name_map(arch, n_blocks)
    plan: list[PlannedTensor] = []
    for make in arch.extra_tensors:
        for name, values in make(h, rope):
            kind = tensor_type(name, values.ndim, matrix_type, values.shape)
            plan.append(PlannedTensor(name, kind, values.shape, lambda v=values, k=kind: quant.quantize(v, k)))
    tensors = [(name, t) for name, t in tensors if not name.endswith(_SKIPPED)]
    for rewrite in arch.rewrites:
        tensors = rewrite(tensors, h)
    for hf_name, t in tensors:
        gguf_name = map_tensor_name(names, hf_name)
        if gguf_name is None:
            raise FormatError(t.file, None, f"tensor {hf_name!r} has no GGUF name for {arch.gguf} "
                                            f"({n_blocks} layers in config.json)")  # fmt: skip
        transforms = [tr for tr in arch.transforms if tr.applies_to(hf_name)]
        for tr in transforms:
            if (why := tr.check(t.shape, h)) is not None:
                raise FormatError(t.file, None, f"tensor {hf_name!r} {list(t.shape)}: {why}")
        forced = next((k for f in arch.forced_types if (k := f(hf_name, gguf_name, matrix_type))), None)
        kind = t.ggml or tensor_type(gguf_name, len(t.shape), matrix_type, t.shape, forced)
        rows = _row_maker(t, kind) if not transforms else None
        plan.append(PlannedTensor(gguf_name, kind, t.shape, _maker(t, transforms, h, kind), rows))
    _check_complete(arch, h, plan, n_blocks, folder)
    return plan


def _maker(t: SourceTensor, transforms: list[Transform], h: HFConfig, kind: str) -> Callable[[], np.ndarray]:
    """Read, transform and convert one tensor when the writer asks for it: its bytes as type `kind`.

    An untransformed tensor is converted straight from its view of the mapped file, a chunk at a time
    (`quant.quantize` casts each chunk to float32 as the converter computes), or handed over as it is when
    it is stored in `kind` already; so only the output is held in memory."""

    def make() -> np.ndarray:
        if not transforms and t.stored is not None:
            return encode_values(t.stored(), kind)
        if not transforms and t.rows is not None:
            return encode_values(t.rows(0, _row_count(t.shape)), kind)
        values = t.read()
        if t.ggml is not None:
            return values  # already quantized: written as it is
        for tr in transforms:
            values = tr.apply(values, h)
        return encode_values(values, kind)

    return make


def encode_values(values: np.ndarray, kind: str) -> np.ndarray:
    """The bytes of `values` as type `kind`, as the converter makes them: F32 and F16 values of that type
    already are taken as they are (the converter's cast to their own type changes nothing)."""
    if kind in ("F32", "F16") and values.dtype == ggml_type(kind).numpy:
        return np.ascontiguousarray(values).reshape(-1).view(np.uint8)  # a strided slice (GPT-OSS's gate/up) is copied
    return quant.quantize(values, kind)


def _row_maker(t: SourceTensor, kind: str) -> Callable[[int, int], np.ndarray] | None:
    """Rows start:stop (along the last axis) of an untransformed tensor's bytes as type `kind`, made from
    its view of the mapped file (or its own rows, for a padded one): what quantizing and the writer read, a
    group of rows at a time, so that no tensor is held whole, in the converter's type or in the output's."""
    stored = t.stored_rows()
    if stored is None:
        return None

    def rows(start: int, stop: int) -> np.ndarray:
        return encode_values(stored(start, stop), kind).reshape(stop - start, -1)

    return rows


def _row_count(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape[:-1], dtype=np.int64))


def _pieces(p: PlannedTensor) -> Iterator[np.ndarray]:
    """The tensor's bytes for the writer: a group of rows at a time when it is made by rows, else whole."""
    if p.rows is None or len(p.shape) < 2:
        yield p.make()
        return
    for start, stop in row_groups(_row_count(p.shape), p.shape[-1]):
        yield p.rows(start, stop).reshape(-1)


def _check_complete(arch: Conversion, h: HFConfig, plan: list[PlannedTensor], n_blocks: int, folder: Path) -> None:
    """Every tensor the architecture needs is there, with the dimensions config.json gives."""
    shapes = {p.name: p.shape for p in plan}
    for template, dims in arch.required.items():
        for bid in range(n_blocks) if "{bid}" in template else [None]:
            name = template.format(bid=bid)
            shape = shapes.get(name)
            if shape is None:
                raise FormatError(folder, None, f"the checkpoint has no {name} ({n_blocks} layers in config.json)")
            expected = tuple(_dimension(h, d) if d is not None else n for d, n in zip(dims, shape, strict=False))
            if len(shape) != len(dims) or shape != expected:
                want = [(d if isinstance(d, str) else "|".join(d)) if d is not None else "*" for d in dims]
                given = ", ".join(f"{w}={_dimension(h, d)}" for w, d in zip(want, dims, strict=True) if d)
                raise FormatError(folder, None, f"{name} has shape {list(shape)}; config.json implies {want} ({given})")


def _dimension(h: HFConfig, key: str | tuple[str, ...]) -> object:
    """A required dimension: config.json's `key`, or the first present of several (the converter's find_hparam)."""
    return h.get(key) if isinstance(key, str) else h.find(key, None)


def _parameter_counts(plan: list[PlannedTensor]) -> tuple[int, int, int, int]:
    """gguf-py's `get_total_parameter_count`: (total, shared, expert, experts per tensor) over the output."""
    total = shared = expert = expert_sum = expert_tensors = 0
    for p in plan:
        size = int(np.prod(p.shape, dtype=np.int64))
        if "_exps." in p.name and len(p.shape) >= 3:
            count = p.shape[-2 if ".bias" in p.name else -3]
            expert += size // count
            expert_sum += count
            expert_tensors += 1
        else:
            shared += size
        total += size
    return total, shared, expert, expert_sum // expert_tensors if expert_tensors else 0


def write_planned(
    output: Path, kv: KV, plan: list[PlannedTensor], report: ConvertReport, progress: Progress | None,
    split: ConverterSplit | None,
) -> None:  # fmt: skip
    """Stream the planned tensors into the GGUF, or its shards (atomically), reporting progress after each."""
    nbytes = [ggml_type(p.type).nbytes(int(np.prod(p.shape, dtype=np.int64))) for p in plan]
    total = sum(nbytes)
    done = 0
    tensors = []
    for p, n in zip(plan, nbytes, strict=True):

        def data(p: PlannedTensor = p, n: int = n) -> Iterator[np.ndarray]:
            nonlocal done
            yield from _pieces(p)
            done += n
            if progress is not None:
                progress(p.name, done, total)

        tensors.append(plan_tensor(p.name, p.shape, p.type, data))
        report.tensors[p.name] = (p.type, tuple(p.shape))
    if split is None:
        write_gguf(output, kv.values, tensors)
        report.outputs = [str(output)]
    else:
        report.outputs = [str(path) for path in write_files(split.files(output, kv.values, tensors))]
    report.bytes_written = sum(Path(path).stat().st_size for path in report.outputs)


class ConvertedModel(ModelFile):
    """The GGUF the converter would write, as an opened model whose tensors are made when read: what
    `quantize_model` takes in place of the converter's output file, so that llama-quantize's logic runs once,
    on either."""

    format = "gguf"

    def __init__(self, path: Path, metadata: dict[str, Value], plan: list[PlannedTensor]) -> None:
        infos = {}
        for i, p in enumerate(plan):
            planned = plan_tensor(p.name, p.shape, p.type)
            infos[p.name] = TensorInfo(p.name, planned.type, planned.shape, i, planned.nbytes)
        super().__init__(path, Metadata(metadata), infos)
        self._plan = {p.name: p for p in plan}

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes as the converter writes them, made now."""
        return self._plan[name].make()

    def row_source(self, name: str) -> Callable[[int, int], np.ndarray]:
        """Rows of the tensor's bytes, made when asked for: only those rows when the tensor is made by rows;
        else from the whole tensor, made now and held by the maker."""
        rows = self._plan[name].rows
        return rows if rows is not None else super().row_source(name)

    def close(self) -> None:
        pass


def _write_quantized(output: Path, kv: KV, plan: list[PlannedTensor], options: QuantizeOptions, report: ConvertReport,
                     progress: Progress | None) -> None:  # fmt: skip
    """Quantize the converter's tensors as they are made into the GGUF at `output` (atomically)."""
    with ConvertedModel(output, kv.values, plan) as model:
        quantized = quantize_model(model, output, options, progress=progress)
    report.tensors = quantized.tensors
    report.metadata_keys = quantized.metadata_keys
    report.file_type = options.target.file_type_id
    report.quantized = options.target.name
    report.outputs = [str(output)]
    report.bytes_written = output.stat().st_size
