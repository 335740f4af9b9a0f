"""GPT-OSS: `GptOssModel` of llama.cpp's converter. Its experts come stacked: as MXFP4 blocks and scales
(written first, repacked into GGML's MXFP4 layout, as the quantized data it is), or as dense `gate_up_proj`
`[n_experts, hidden, 2 * ff]` with gate and up interleaved column by column."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ...errors import FormatError
from ..hf.config import ConfigClass, HFConfig, positive_integer
from ..hf.experts import Tensors, derived_tensor
from ..hf.kv import KV
from ..hf.tensors import SourceTensor
from .decoder import (
    DECODER_DEFAULTS,
    DECODER_NAMES,
    DECODER_REQUIRED,
    DENSE_FFN,
    FF,
    MOE_NAMES,
    H,
    gpt2_vocab,
    head_dim_from_hidden_size,
    kv_heads_default_to_heads,
    moe_required,
    rope_type_from_type,
)
from .family import Conversion, Family


def repack_mxfp4(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Hugging Face MXFP4 (per 32 values: 16 bytes with values 2i and 2i+1 in byte i's low and high nibbles,
    and an E8M0 scale byte apart) as GGML's `block_mxfp4` rows: the scale byte, then byte j holding values j
    (low nibble) and j + 16 (high). Only bits move; both index the same E2M1 value table."""
    values = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    packed = values[..., :16] | (values[..., 16:] << 4)
    out = np.concatenate([scales[..., None], packed], axis=-1)
    return np.ascontiguousarray(out.reshape(*blocks.shape[:-2], blocks.shape[-2] * 17))


def _mxfp4_tensor(name: str, blocks: SourceTensor, scales: SourceTensor, rows: slice) -> tuple[str, SourceTensor]:
    """One GGML MXFP4 tensor of logical shape [experts, rows, columns] from the rows `rows` of a checkpoint's
    blocks `[experts, rows, columns / 32, 16]` and scales `[experts, rows, columns / 32]`."""

    def read() -> np.ndarray:
        u8 = np.uint8  # the readers give float32; 0..255 come back exactly
        return repack_mxfp4(blocks.read()[:, rows].astype(u8), scales.read()[:, rows].astype(u8))

    n_experts, n_rows, n_blocks, _ = blocks.shape
    shape = (n_experts, len(range(n_rows)[rows]), n_blocks * 32)
    return name, replace(derived_tensor(blocks, name, shape, read), dtype="U8", ggml="MXFP4")


def _check_mxfp4_pair(prefix: str, blocks: SourceTensor | None, scales: SourceTensor | None) -> None:
    some = blocks or scales
    assert some is not None
    if blocks is None or scales is None:
        have, lack = ("blocks", "scales") if scales is None else ("scales", "blocks")
        raise FormatError(some.file, None, f"{prefix}_{have} has no {prefix}_{lack}: MXFP4 experts need both")
    for t in (blocks, scales):
        if t.dtype not in ("U8", "uint8"):
            raise FormatError(t.file, None, f"{t.name!r} is {t.dtype}; MXFP4 blocks and scales are U8")
    if len(blocks.shape) != 4 or blocks.shape[-1] != 16 or blocks.shape[:-1] != scales.shape:
        raise FormatError(blocks.file, None, f"{blocks.name!r} {list(blocks.shape)} and {scales.name!r} "
                                             f"{list(scales.shape)} are not MXFP4 blocks [experts, rows, columns/32, "
                                             "16] and their scales [experts, rows, columns/32]")  # fmt: skip
    if prefix.endswith("gate_up_proj") and blocks.shape[1] % 2:
        raise FormatError(blocks.file, None, f"{blocks.name!r} has {blocks.shape[1]} rows: not gate and up pairs")


def gpt_oss_mxfp4(tensors: Tensors, h: HFConfig) -> Tensors:
    """`GptOssModel.generate_extra_tensors`: the MXFP4 experts, before every other tensor, each where its
    scales are in the checkpoint's order; gate and up are the even and odd rows of `gate_up_proj`."""
    by_name = dict(tensors)
    quantized: Tensors = []
    for name, t in tensors:
        stem, _, part = name.rpartition("_")
        if part not in ("blocks", "scales") or "mlp.experts." not in name:
            continue
        blocks, scales = by_name.get(stem + "_blocks"), by_name.get(stem + "_scales")
        _check_mxfp4_pair(stem, blocks, scales)
        if part == "blocks":
            continue
        assert blocks is not None and scales is not None
        if stem.endswith("down_proj"):
            quantized.append(_mxfp4_tensor(stem + ".weight", blocks, scales, slice(None)))
        elif stem.endswith("gate_up_proj"):
            base = stem.removesuffix("gate_up_proj")
            quantized.append(_mxfp4_tensor(base + "gate_proj.weight", blocks, scales, slice(0, None, 2)))
            quantized.append(_mxfp4_tensor(base + "up_proj.weight", blocks, scales, slice(1, None, 2)))
        else:
            raise FormatError(t.file, None, f"MXFP4 tensor {name!r} is neither down_proj nor gate_up_proj")
    rest = [(n, t) for n, t in tensors if not ("mlp.experts." in n and n.endswith(("_blocks", "_scales")))]
    return quantized + rest


def _columns(t: SourceTensor, name: str, start: int, transpose: bool) -> tuple[str, SourceTensor]:
    """Every other entry of the last axis from `start` (of the transposed matrices when `transpose`)."""

    def read() -> np.ndarray:
        values = t.read()
        return np.swapaxes(values, -1, -2)[..., start::2, :] if transpose else values[..., start::2]

    shape = (*t.shape[:-2], t.shape[-1] // 2, t.shape[-2]) if transpose else (*t.shape[:-1], t.shape[-1] // 2)
    return name, derived_tensor(t, name, shape, read)


def _transposed(t: SourceTensor, name: str) -> tuple[str, SourceTensor]:
    shape = (*t.shape[:-2], t.shape[-1], t.shape[-2])
    return name, derived_tensor(t, name, shape, lambda: np.swapaxes(t.read(), -1, -2))


def gpt_oss_experts(tensors: Tensors, h: HFConfig) -> Tensors:
    """`GptOssModel.modify_tensors`: the expert biases (`gate_up_proj_bias` split into its even and odd
    entries) and, in a dequantized checkpoint, the expert matrices, stored `[experts, in, out]` and written
    transposed (`gate_up_proj` split into its even and odd output columns)."""
    out: Tensors = []
    for name, t in tensors:
        dense = "mlp.experts." in name and name.endswith(("down_proj", "gate_up_proj"))
        if dense and (len(t.shape) != 3 or (name.endswith("gate_up_proj") and t.shape[-1] % 2)):
            raise FormatError(t.file, None, f"expert tensor {name!r} {list(t.shape)} is not [experts, in, out]"
                                            " (with an even out for gate_up_proj)")  # fmt: skip
        if name.endswith("down_proj_bias"):
            out.append((name.replace("down_proj_bias", "down_proj.bias"), t))
        elif name.endswith("gate_up_proj_bias"):
            if len(t.shape) < 1 or t.shape[-1] % 2:
                raise FormatError(t.file, None, f"{name!r} {list(t.shape)}: not gate and up pairs")
            out.append(_columns(t, name.replace("gate_up_proj_bias", "gate_proj.bias"), 0, transpose=False))
            out.append(_columns(t, name.replace("gate_up_proj_bias", "up_proj.bias"), 1, transpose=False))
        elif dense and name.endswith("down_proj"):
            out.append(_transposed(t, name + ".weight"))
        elif dense:
            base = name.removesuffix("gate_up_proj")
            out.append(_columns(t, base + "gate_proj.weight", 0, transpose=True))
            out.append(_columns(t, base + "up_proj.weight", 1, transpose=True))
        else:
            out.append((name, t))
    return out


def gpt_oss_filter(name: str) -> str:
    """`GptOssModel.filter_tensors`: the attention sinks get a `.weight` suffix."""
    return name + ".weight" if "sinks" in name else name


def _parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`GptOssModel.set_gguf_parameters`'s additions: the sliding window and the experts' size."""
    kv.u32(f"{arch}.attention.sliding_window", positive_integer(h, "sliding_window", folder))
    kv.u32(f"{arch}.expert_feed_forward_length", h[FF])


_NAMES = {
    **DECODER_NAMES,
    **MOE_NAMES,
    "model.layers.{bid}.post_attention_layernorm": "blk.{bid}.post_attention_norm",
    "model.layers.{bid}.self_attn.sinks": "blk.{bid}.attn_sinks",
    "model.layers.{bid}.mlp.router": "blk.{bid}.ffn_gate_inp",
}
_REQUIRED = {
    **{k: v for k, v in DECODER_REQUIRED.items() if k not in DENSE_FFN and k != "blk.{bid}.ffn_norm.weight"},
    **moe_required("num_local_experts", FF),
    "blk.{bid}.post_attention_norm.weight": (H,),
    "blk.{bid}.attn_sinks.weight": ("num_attention_heads",),
    "blk.{bid}.ffn_gate_inp.bias": ("num_local_experts",),
    "blk.{bid}.ffn_gate_exps.bias": ("num_local_experts", FF),
    "blk.{bid}.ffn_up_exps.bias": ("num_local_experts", FF),
    "blk.{bid}.ffn_down_exps.bias": ("num_local_experts", H),
}

FAMILY = Family(
    name="gpt_oss",
    configs={
        "gpt_oss": ConfigClass(
            "GptOssConfig",
            DECODER_DEFAULTS | {"num_hidden_layers": 36, "num_local_experts": 128, "vocab_size": 201088,
                                "hidden_size": 2880, "intermediate_size": 2880, "head_dim": 64,
                                "num_attention_heads": 64, "num_key_value_heads": 8, "sliding_window": 128,
                                "rope_theta": 150000.0, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
                                "num_experts_per_tok": 4,
                                "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                                 "beta_slow": 1.0, "truncate": False,
                                                 "original_max_position_embeddings": 4096}},
            (kv_heads_default_to_heads, head_dim_from_hidden_size, rope_type_from_type),
        ),
    },
    conversions={
        "GptOssForCausalLM": Conversion(
            gguf="gpt-oss",
            tensor_names=_NAMES,
            required=_REQUIRED,
            vocab=gpt2_vocab,
            filters=(gpt_oss_filter,),
            parameters=(_parameters,),
            rewrites=(gpt_oss_mxfp4, gpt_oss_experts),
            quantized=("mxfp4",),
        ),
    },
)  # fmt: skip
