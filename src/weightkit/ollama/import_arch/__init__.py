"""Ollama's per-architecture import policies (x/create's tensorImportTransformRegistry): which tensors of a
checkpoint are quantized, and to what, keyed as Ollama keys them (the config's first architecture, else its
model_type). One module per architecture; an architecture not in the table takes the generic rule."""

from __future__ import annotations

from collections.abc import Callable

from ...dtypes import MLXQuantType
from ..tensor_blobs import tensor_quantization
from . import cohere2moe, gemma4, glimmer, laguna, nemotron_h, qwen35

Policy = Callable[[str, tuple[int, ...], MLXQuantType], MLXQuantType | None]

IMPORT_POLICIES: dict[str, Callable[[dict], Policy]] = {
    "Qwen3_5ForCausalLM": qwen35.policy,
    "Qwen3_5ForConditionalGeneration": qwen35.policy,
    "Qwen3NextForCausalLM": qwen35.policy,
    "Qwen3NextForConditionalGeneration": qwen35.policy,
    "Qwen3_5MoeForCausalLM": qwen35.policy,
    "Qwen3_5MoeForConditionalGeneration": qwen35.policy,
    "Qwen3NextMoeForCausalLM": qwen35.policy,
    "Qwen3NextMoeForConditionalGeneration": qwen35.policy,
    "Gemma4ForCausalLM": gemma4.policy,
    "Gemma4ForConditionalGeneration": gemma4.policy,
    "Gemma4UnifiedForCausalLM": gemma4.policy,
    "Gemma4UnifiedForConditionalGeneration": gemma4.policy,
    "gemma4_unified": gemma4.policy,
    "gemma4_unified_text": gemma4.policy,
    "Gemma4AssistantForCausalLM": gemma4.policy,
    "Gemma4UnifiedAssistantForCausalLM": gemma4.policy,
    "gemma4_unified_assistant": gemma4.policy,
    "LagunaForCausalLM": laguna.policy,
    "MuseGlimmerForConditionalGeneration": glimmer.policy,
    "Cohere2MoeForCausalLM": cohere2moe.policy,
    "NemotronH_Nano_VL_V2": nemotron_h.policy,
    "NemotronH_Nano_Omni_Reasoning_V3": nemotron_h.policy,
    "NemotronHForCausalLM": nemotron_h.policy,
}


def import_policy(architecture: str, config: dict) -> Policy:
    """The policy for a checkpoint of `architecture` (its config.json given), the generic rule by default."""
    factory = IMPORT_POLICIES.get(architecture)
    return tensor_quantization if factory is None else factory(config)
