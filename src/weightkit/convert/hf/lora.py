"""`convert_lora`: a PEFT LoRA adapter folder to the GGUF llama.cpp's `convert_lora_to_gguf.py` writes.

The reference runs its base model's conversion class over the adapter: each targeted module's lora_A and lora_B
are paired under the base tensor's name, which the base class's filters and name map turn into the GGUF name
(`blk.0.attn_q.weight`), written as `<name>.lora_a` and `<name>.lora_b`. The base's transforms act on the
product B @ A: a row permutation (Llama's Q/K rope order) moves lora_B's rows. Only the base's config.json is
read, never its weights or tokenizer; the metadata is the adapter's (`general.type` "adapter", `adapter.type`
"lora", `adapter.lora.alpha`) with `general.*` derived from the adapter folder as the reference's model card.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ArgumentError, FormatError, UnsupportedError
from ...gguf import GGUFValueType, Value
from .. import families
from ..families.family import Conversion
from .config import CONFIG_NAME, HFConfig, load_hparams, read_json_object, read_raw_config
from .convert import (
    OUTTYPES,
    ConvertReport,
    PlannedTensor,
    Progress,
    common_filter,
    encode_values,
    hf_architecture,
    map_tensor_name,
    tensor_name_map,
    tensor_type,
    write_planned,
)
from .kv import KV
from .metadata import derive_metadata, write_metadata
from .parameters import block_count
from .tensors import SourceTensor, bin_part, close_all, safetensors_part

ADAPTER_CONFIG = "adapter_config.json"
#: convert_lora_to_gguf.py's --outtype choices it converts with (its "auto" fails on the adapter's tensors)
LORA_OUTTYPES = ("f32", "f16", "bf16", "q8_0")


@dataclass
class _Pair:
    """One adapted module: lora_A (rank, in) and lora_B (out, rank), under the base tensor's name; a layer's
    experts stacked: ([experts,] rank, in) and ([experts,] out, rank)."""

    a: SourceTensor | None = None
    b: SourceTensor | None = None


#: the adapter's tensors under their base tensors' names: pairs, and the norms mergekit-extract-lora adds
Items = list[tuple[str, _Pair | SourceTensor]]


def base_tensor_name(name: str) -> str:
    """The base model's tensor an adapter tensor adapts (the reference's `get_base_tensor_name`)."""
    name = name.replace("base_model.model.", "")
    for part in (".lora_A.weight", ".lora_B.weight", ".lora_embedding_A", ".lora_embedding_B"):
        name = name.replace(part, ".weight")
    return name


def resolve_base(adapter: Path, lora_config: dict[str, Any], base: Path | None) -> Path:
    """The base model's folder: `base`, else the adapter config's `base_model_name_or_path` where it is a local
    folder (the reference's `AutoConfig.from_pretrained` loads it offline); a hub name needs --base here."""
    if base is not None:
        if not (base / CONFIG_NAME).is_file():
            raise ArgumentError(f"--base {base}: no config.json there (give the base model's Hugging Face folder)")
        return base
    named = lora_config.get("base_model_name_or_path")
    if not isinstance(named, str) or not named:
        raise ArgumentError(f"{adapter / ADAPTER_CONFIG}: 'base_model_name_or_path' is not found in "
                            "adapter_config.json; give the base model's folder with --base")  # fmt: skip
    if not (Path(named) / CONFIG_NAME).is_file():
        raise ArgumentError(f"{adapter / ADAPTER_CONFIG}: the base model {named!r} is not a local folder with a "
                            "config.json; download it and give its folder with --base")  # fmt: skip
    return Path(named)


def convert_lora(
    adapter: str | os.PathLike[str],
    output: str | os.PathLike[str],
    base: str | os.PathLike[str] | None = None,
    outtype: str = "f32",
    progress: Progress | None = None,
) -> ConvertReport:
    """Convert the PEFT LoRA adapter in `adapter` (adapter_config.json, adapter_model.safetensors or .bin) to a
    GGUF at `output`, byte for byte as `convert_lora_to_gguf.py --base BASE --outtype OUTTYPE` would (f32, f16,
    bf16 or q8_0). `base` is the base model's folder (only its config.json is read); without it, the adapter
    config's `base_model_name_or_path` when that is a local folder."""
    adapter, output = Path(adapter), Path(output)
    if outtype not in LORA_OUTTYPES:
        why = " (convert_lora_to_gguf.py's auto fails on an adapter's tensors)" if outtype == "auto" else ""
        raise ArgumentError(f"--outtype {outtype!r} with --lora: one of {', '.join(LORA_OUTTYPES)}{why}")
    if not adapter.is_dir():
        raise ArgumentError(f"{adapter}: not a folder (give a PEFT adapter's folder)")
    if output.is_dir():
        raise ArgumentError(f"{output}: is a folder; give the GGUF file's path")
    lora_config = read_json_object(adapter / ADAPTER_CONFIG, "adapter_config.json (not a PEFT adapter folder?)")
    alpha = lora_config.get("lora_alpha")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise FormatError(adapter / ADAPTER_CONFIG, None, f"lora_alpha {alpha!r} is not a number")
    base_folder = resolve_base(adapter, lora_config, None if base is None else Path(base))
    name = hf_architecture(read_raw_config(base_folder), base_folder)
    arch = families.CONVERSIONS.get(name)
    if arch is None:
        raise UnsupportedError(f"{base_folder / CONFIG_NAME}: architecture {name!r} is not supported "
                               f"(supported: {', '.join(families.CONVERSIONS)})")  # fmt: skip
    hparams = load_hparams(base_folder, families.CONFIG_CLASSES)
    sources, opened = _read_adapter(adapter)
    try:
        file_type, matrix_type = OUTTYPES[outtype]
        plan = _plan(arch, hparams, _rewritten(arch, hparams, _pairs(sources, arch)), matrix_type, adapter)
        kv = KV(arch.gguf)
        kv.string("general.type", "adapter")
        kv.string("adapter.type", "lora")
        raw = read_raw_config(adapter) if (adapter / CONFIG_NAME).is_file() else {}
        meta = derive_metadata(adapter, raw, -_parameter_count(plan), fallback_name=base_folder.name)
        write_metadata(kv, meta, (adapter / "README.md", adapter / "generation_config.json"))
        kv.f32("adapter.lora.alpha", float(alpha))
        _invocation_tokens(kv, lora_config, adapter)
        kv.u32("general.quantization_version", 2)
        report = ConvertReport(str(adapter), str(output), name, arch.gguf, outtype, file_type, 0, None,
                               len(kv.values))  # fmt: skip
        write_planned(output, kv, plan, report, progress, None)
    finally:
        close_all(opened)
    return report


def _read_adapter(adapter: Path) -> tuple[dict[str, SourceTensor], list[Any]]:
    """The adapter's tensors by name (adapter_model.safetensors, else adapter_model.bin, as the reference loads
    them) and the opened file (to close when done)."""
    opened: list[Any] = []
    if (adapter / "adapter_model.safetensors").is_file():
        found = safetensors_part(adapter / "adapter_model.safetensors", opened)
    elif (adapter / "adapter_model.bin").is_file():
        found = bin_part(adapter / "adapter_model.bin")
    else:
        raise FormatError(adapter, None, "no adapter_model.safetensors and no adapter_model.bin: not a PEFT adapter")
    return {t.name: t for t in found}, opened


def _invocation_tokens(kv: KV, lora_config: dict[str, Any], adapter: Path) -> None:
    """An activated LoRA's `alora_invocation_tokens` (a UINT32 array); its `invocation_string` alone would need
    the base model's tokenizer, which weightkit does not run."""
    tokens = lora_config.get("alora_invocation_tokens")
    if not tokens and lora_config.get("invocation_string"):
        raise UnsupportedError(
            f"{adapter / ADAPTER_CONFIG}: invocation_string without alora_invocation_tokens "
            "needs the base model's tokenizer; give its token ids as alora_invocation_tokens"
        )
    if not tokens:
        return
    if not isinstance(tokens, list) or not all(isinstance(t, int) and 0 <= t < 1 << 32 for t in tokens):
        raise FormatError(adapter / ADAPTER_CONFIG, None, f"alora_invocation_tokens {tokens!r} are not token ids")
    kv.values["adapter.alora.invocation_tokens"] = Value(np.asarray(tokens, np.uint32), GGUFValueType.ARRAY,
                                                         GGUFValueType.UINT32)  # fmt: skip


def _pairs(sources: dict[str, SourceTensor], arch: Conversion) -> Items:
    """The adapter's tensors by base tensor name, in the reference's order: lora_A/lora_B pairs, and the norms
    mergekit-extract-lora adds (as they are); the base layers' own weights skipped; anything else refused."""
    out: dict[str, _Pair | SourceTensor] = {}
    for name, t in sources.items():
        base: str | None = base_tensor_name(name)
        for f in (*arch.filters, common_filter):
            base = f(base) if base is not None else None
        if base is None:
            continue
        is_a = ".lora_A.weight" in name or ".lora_embedding_A" in name
        is_b = ".lora_B.weight" in name or ".lora_embedding_B" in name
        if not is_a and not is_b:
            if ".base_layer.weight" in name:
                continue
            if "_layernorm" in name or ".norm" in name:
                out[base] = t
                continue
            hint = ""
            if ".embed_tokens.weight" in name or ".lm_head.weight" in name:
                hint = " (whole embeddings in an adapter: tokens added in fine-tuning, which llama.cpp's LoRA lacks)"
            raise UnsupportedError(f"{t.file}: unexpected tensor {name!r}: not a lora_A or lora_B tensor{hint}")
        pair = out.setdefault(base, _Pair())
        if not isinstance(pair, _Pair):
            raise FormatError(t.file, None, f"{name!r} adapts {base!r}, which the adapter also holds whole")
        if is_a:
            pair.a = t
        else:
            pair.b = t
    for base, pair in out.items():
        if isinstance(pair, _Pair) and (pair.a is None or pair.b is None):
            given = pair.a or pair.b
            assert given is not None
            raise FormatError(given.file, None, f"{base!r} has a lora_{'B' if pair.a is None else 'A'} without its "
                                                f"lora_{'A' if pair.a is None else 'B'}")  # fmt: skip
    return list(out.items())


def _rewritten(arch: Conversion, h: HFConfig, pairs: Items) -> Items:
    """The base class's rewrites of its tensor list (a layer's experts stacked) over the pairs: run over the
    lora_A tensors and over the lora_B tensors apart, since a stack of pairs is the pair of the stacks (the
    reference's LoraTorchTensor stacks its A and B); a norm goes through both sides as itself."""
    if not arch.rewrites:
        return pairs
    sides = []
    for side in ("a", "b"):
        tensors = [(name, getattr(item, side) if isinstance(item, _Pair) else item) for name, item in pairs]
        for rewrite in arch.rewrites:
            tensors = rewrite(tensors, h)
        sides.append(tensors)
    out: Items = []
    for (name, a), (name_b, b) in zip(*sides, strict=True):
        assert name == name_b, (name, name_b)  # the rewrites go by names alone
        out.append((name, a if a is b else _Pair(a, b)))
    return out


def _plan(arch: Conversion, h: HFConfig, pairs: Items, matrix_type: str, adapter: Path) -> list[PlannedTensor]:
    """The GGUF's tensors: each pair's `<name>.lora_a` and `<name>.lora_b`, each norm under its name."""
    names = tensor_name_map(arch, block_count(h))
    plan: list[PlannedTensor] = []
    for hf_name, item in pairs:
        gguf_name = map_tensor_name(names, hf_name)
        if gguf_name is None:
            if hf_name == "lm_head.weight":
                raise UnsupportedError(f"{adapter}: lm_head is present in adapter, but is ignored in base model")
            raise UnsupportedError(f"{adapter}: Can not map tensor {hf_name!r}: the adapter adapts it, which has no "
                                   f"GGUF name for {arch.gguf}")  # fmt: skip
        transforms = [tr for tr in arch.transforms if tr.applies_to(hf_name)]
        if isinstance(item, SourceTensor):
            if len(item.shape) != 1:
                raise FormatError(item.file, None, f"{hf_name!r} {list(item.shape)}: a norm in an adapter is a vector")
            plan.append(_planned(gguf_name, item, item.shape, matrix_type, h, transforms))
            continue
        a, b = item.a, item.b
        assert a is not None and b is not None
        if len(a.shape) not in (2, 3) or a.shape[:-2] != b.shape[:-2] or a.shape[-2] != b.shape[-1]:
            raise FormatError(a.file, None, f"{hf_name!r}: lora_A {list(a.shape)} and lora_B {list(b.shape)} are not "
                                            "(rank, in) and (out, rank) matrices (or stacks of them)")  # fmt: skip
        product = (*b.shape[:-1], a.shape[-1])
        if any(not tr.rows for tr in transforms):
            raise UnsupportedError(
                f"{adapter}: {arch.gguf}'s conversion changes {hf_name!r} in a way weightkit "
                "does not carry over to a LoRA pair (it moves only rows, onto lora_B)"
            )
        for tr in transforms:
            if (why := tr.check(product, h)) is not None:
                raise FormatError(a.file, None, f"{hf_name!r} {list(product)}: {why}")
        widen = a.dtype != b.dtype  # the reference computes a mixed pair in float32
        embedding = "token_embd.weight" in gguf_name  # mergekit-extract-lora's layout: lora_a is transposed
        a_shape = a.shape[::-1] if embedding else a.shape
        plan.append(_planned(gguf_name + ".lora_a", a, a_shape, matrix_type, h, [], widen, transpose=embedding))
        plan.append(_planned(gguf_name + ".lora_b", b, b.shape, matrix_type, h, transforms, widen))
    return plan


def _planned(name: str, t: SourceTensor, shape: tuple[int, ...], matrix_type: str, h: HFConfig, transforms: list,
             widen: bool = False, *, transpose: bool = False) -> PlannedTensor:  # fmt: skip
    """One output tensor: `t`'s values (in float32 where `widen`), transposed or through the row `transforms`."""
    kind = tensor_type(name, len(shape), matrix_type, shape)

    def make() -> np.ndarray:
        values = t.read()
        if widen:
            values = values.astype(np.float32)
        if transpose:
            values = values.T
        for tr in transforms:
            values = tr.apply(values, h)
        return encode_values(values, kind)

    return PlannedTensor(name, kind, shape, make)


def _parameter_count(plan: list[PlannedTensor]) -> int:
    """gguf-py's `get_total_parameter_count` over an adapter: each pair counted as the (out, in) matrix it adds
    to, each norm as itself (the reference then negates it: "not exact")."""
    total = 0
    lora_a: PlannedTensor | None = None
    for p in plan:
        if p.name.endswith(".lora_a"):
            lora_a = p
            continue
        shape = p.shape if lora_a is None or not p.name.endswith(".lora_b") else (*p.shape[:-1], lora_a.shape[-1])
        total += int(np.prod(shape, dtype=np.int64))
    return total
