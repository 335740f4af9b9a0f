"""The pieces projector conversions (`--mmproj`) share: `projector`, the shape of their declaration; the SigLIP
vision encoder's tensor names and shapes; and the rewrites of fused attention and Conv3D patch embeddings."""

from __future__ import annotations

from typing import Any

from ...errors import FormatError
from ..hf.config import HFConfig
from ..hf.experts import Tensors, derived_tensor
from ..hf.projector import PROJECTOR_LAYERS, no_vocab, patch_embedding_type
from ..hf.tensors import SourceTensor
from .family import Blocks, Conversion, Dims, ForcedType


def _blocks(h: HFConfig, names: list[str]) -> int:
    """`MmprojModel`'s block count: the vision config's first layer-count key."""
    return h.find(PROJECTOR_LAYERS, None)


def projector(*, forced_types: tuple[ForcedType, ...] = (), blocks: Blocks = _blocks, **fields: Any) -> Conversion:
    """A projector conversion (`MmprojModel`): the `clip` architecture, no vocabulary, the encoder's layers as
    its blocks (unless `blocks` says otherwise), and the patch embedding's forced type after the model's own
    (`forced_types`)."""
    return Conversion(gguf="clip", vocab=no_vocab, blocks=blocks, general_type="mmproj",
                      forced_types=(*forced_types, patch_embedding_type), **fields)  # fmt: skip


#: SigLIP's vision encoder (`SiglipVisionModel`) -> llama.cpp's clip names, under the checkpoint's prefix
_SIGLIP_NAMES = {
    "embeddings.patch_embedding": "v.patch_embd",
    "embeddings.position_embedding": "v.position_embd",
    "encoder.layers.{bid}.layer_norm1": "v.blk.{bid}.ln1",
    "encoder.layers.{bid}.layer_norm2": "v.blk.{bid}.ln2",
    "encoder.layers.{bid}.self_attn.q_proj": "v.blk.{bid}.attn_q",
    "encoder.layers.{bid}.self_attn.k_proj": "v.blk.{bid}.attn_k",
    "encoder.layers.{bid}.self_attn.v_proj": "v.blk.{bid}.attn_v",
    "encoder.layers.{bid}.self_attn.out_proj": "v.blk.{bid}.attn_out",
    "encoder.layers.{bid}.mlp.fc1": "v.blk.{bid}.ffn_up",
    "encoder.layers.{bid}.mlp.fc2": "v.blk.{bid}.ffn_down",
    "post_layernorm": "v.post_ln",
}
_V = "hidden_size"
#: clip tensor -> its shape by the vision config's keys (None: any)
SIGLIP_REQUIRED: dict[str, Dims] = {
    "v.patch_embd.weight": (_V, "num_channels", "patch_size", "patch_size"),
    "v.position_embd.weight": (None, _V),
    **{f"v.blk.{{bid}}.{norm}.weight": (_V,) for norm in ("ln1", "ln2")},
    **{f"v.blk.{{bid}}.attn_{x}.weight": (_V, _V) for x in ("q", "k", "v", "out")},
    "v.blk.{bid}.ffn_up.weight": ("intermediate_size", _V),
    "v.blk.{bid}.ffn_down.weight": (_V, "intermediate_size"),
    "v.post_ln.weight": (_V,),
}


def siglip_names(prefix: str) -> dict[str, str]:
    """The SigLIP encoder's HF -> clip names for a checkpoint that holds it under `prefix`."""
    return {prefix + hf: gguf for hf, gguf in _SIGLIP_NAMES.items()}


def _rows(t: SourceTensor, name: str, start: int, stop: int) -> tuple[str, SourceTensor]:
    """Rows start:stop of `t` (entries, for a vector), as tensor `name`."""
    return name, derived_tensor(t, name, (stop - start, *t.shape[1:]), lambda: t.read()[start:stop])


def split_fused_qkv(tensors: Tensors, h: HFConfig) -> Tensors:
    """`Qwen2VLVisionModel.modify_tensors`: a fused `.qkv.` weight or bias split into thirds by rows, written
    as `.q.`, `.k.` and `.v.` in its place."""
    out: Tensors = []
    for name, t in tensors:
        if ".qkv." not in name:
            out.append((name, t))
            continue
        if not t.shape or t.shape[0] % 3:
            raise FormatError(t.file, None, f"tensor {name!r} {list(t.shape)}: fused Q/K/V rows not divisible by 3")
        third = t.shape[0] // 3
        out += [_rows(t, name.replace("qkv", x), i * third, (i + 1) * third) for i, x in enumerate("qkv")]
    return out


#: The Conv3D patch embedding's GGUF names, one per frame of its two (clip's two Conv2Ds)
TEMPORAL_PATCHES = ("v.patch_embd.weight", "v.patch_embd.weight.1")


def split_temporal_patches(tensors: Tensors, h: HFConfig) -> Tensors:
    """`Qwen2VLVisionModel.modify_tensors`: the Conv3D patch embedding `[out, in, 2, h, w]` (`patch_embed.proj`)
    written as the two Conv2D kernels of its frames, `TEMPORAL_PATCHES`."""
    out: Tensors = []
    for name, t in tensors:
        if not name.endswith("patch_embed.proj.weight"):
            out.append((name, t))
            continue
        if len(t.shape) != 5 or t.shape[2] != 2:
            raise FormatError(t.file, None, f"tensor {name!r} {list(t.shape)}: only a Conv3D patch embedding over "
                                            "2 frames ([out, in, 2, h, w]) is converted")  # fmt: skip
        shape = (*t.shape[:2], *t.shape[3:])
        out += [(n, derived_tensor(t, n, shape, lambda f=frame, t=t: t.read()[:, :, f])) for frame, n in
                enumerate(TEMPORAL_PATCHES)]  # fmt: skip
    return out
