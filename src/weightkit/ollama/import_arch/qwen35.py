"""Qwen 3.5 and Qwen3-Next, dense and MoE (x/create/qwen35.go): the generic rule, but the gated-delta-net's
low-rank a/b input projections stay at source precision."""

from __future__ import annotations

from ...dtypes import MLXQuantType
from ..tensor_blobs import tensor_quantization

_LOW_RANK = (".linear_attn.in_proj_a.weight", ".linear_attn.in_proj_b.weight", ".linear_attn.in_proj_ba.weight")


def policy(config: dict):
    def quantization(name: str, shape: tuple[int, ...], quantize: MLXQuantType) -> MLXQuantType | None:
        return None if name.endswith(_LOW_RANK) else tensor_quantization(name, shape, quantize)

    return quantization
