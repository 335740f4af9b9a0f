"""Record the checkpoint of each architecture in Ollama's import registry (x/create's
tensorImportTransformRegistry) as transformers 5.25 saves it: config.json and every tensor's name, dtype and
shape, into ollama_import_archs.json, which tests/ollama/test_import.py plans imports from.

Run with the recording environment: /work/venv-rec/bin/python tests/data/make_ollama_import_archs.py
Each model is built on the meta device (no weights) from its class's default config with the blocks and experts
cut down (4 blocks, or as many as every kind of block needs; 4 experts) so the recording stays small, and its
state dict is put back into the saved checkpoint's names as save_pretrained does (transformers'
revert_weight_conversion). Classes that transformers does not ship (NVIDIA's remote-code Nemotron-H VL and omni
models) are left out.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from transformers.core_model_loading import revert_weight_conversion

OUT = Path(__file__).with_name("ollama_import_archs.json")

# registry key -> (model_type of its config, transformers class[, config arguments: the towers of Gemma 4's
# multimodal model, which its default config leaves out; the assistant's text config without the per-layer
# inputs, which its validation requires and its default does not give])
ARCHS = {
    "Qwen3_5ForCausalLM": ("qwen3_5_text", "Qwen3_5ForCausalLM"),
    "Qwen3_5ForConditionalGeneration": ("qwen3_5", "Qwen3_5ForConditionalGeneration"),
    "Qwen3NextForCausalLM": ("qwen3_next", "Qwen3NextForCausalLM"),
    "Qwen3_5MoeForCausalLM": ("qwen3_5_moe_text", "Qwen3_5MoeForCausalLM"),
    "Qwen3_5MoeForConditionalGeneration": ("qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration"),
    "Gemma4ForCausalLM": ("gemma4_text", "Gemma4ForCausalLM"),
    "Gemma4ForConditionalGeneration": (
        "gemma4",
        "Gemma4ForConditionalGeneration",
        {"vision_config": {}, "audio_config": {}},
    ),
    "Gemma4UnifiedForConditionalGeneration": ("gemma4_unified", "Gemma4UnifiedForConditionalGeneration"),
    "Gemma4AssistantForCausalLM": (
        "gemma4_assistant",
        "Gemma4AssistantForCausalLM",
        {"text_config": {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0}},
    ),
    "LagunaForCausalLM": ("laguna", "LagunaForCausalLM"),
    "MuseGlimmerForConditionalGeneration": ("muse_glimmer", "MuseGlimmerForConditionalGeneration"),
    "Cohere2MoeForCausalLM": ("cohere2_moe", "Cohere2MoeForCausalLM"),
    "NemotronHForCausalLM": ("nemotron_h", "NemotronHForCausalLM"),
}
LAYERS = ("num_hidden_layers", "num_layers", "depth", "encoder_layers", "num_blocks")
EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts")
PER_LAYER = ("layer_types", "mlp_layer_types", "hybrid_override_pattern", "layers_block_type")


def shrink(config) -> None:
    """Fewer blocks (4, or as many as it takes to keep every kind of block; lists of per-layer kinds cut to
    match) and experts, in the config and its sub-configs."""
    for sub in [config, *(getattr(config, k) for k in config.sub_configs if getattr(config, k, None) is not None)]:
        n = None
        kinds = [v for k in PER_LAYER if isinstance(v := getattr(sub, k, None), (list, str))]
        # enough blocks for every kind of block a per-layer list names (Gemma 4's full attention comes sixth)
        needed = max((max(v.index(kind) for kind in set(v)) + 1 for v in kinds if v), default=0)
        for key in LAYERS:
            if isinstance(getattr(sub, key, None), int):
                n = min(getattr(sub, key), max(4, needed))
                if getattr(sub, "num_kv_shared_layers", None) == getattr(sub, key):  # Gemma 4's assistant: all
                    sub.num_kv_shared_layers = n
                setattr(sub, key, n)
        for key in PER_LAYER:
            value = getattr(sub, key, None)
            if n is not None and isinstance(value, (list, str)) and len(value) > n:
                setattr(sub, key, value[:n])
        for key in EXPERTS:
            if isinstance(getattr(sub, key, None), int) and getattr(sub, key) > 4:
                setattr(sub, key, 4)
        if isinstance(getattr(sub, "num_experts_per_tok", None), int) and sub.num_experts_per_tok > 2:
            sub.num_experts_per_tok = 2


def main() -> None:
    recorded = {"transformers": transformers.__version__}
    for key, (model_type, cls_name, *kwargs) in ARCHS.items():
        config = transformers.AutoConfig.for_model(model_type, **(kwargs[0] if kwargs else {}))
        shrink(config)
        config.architectures = [cls_name]
        with torch.device("meta"):
            model = getattr(transformers, cls_name)._from_config(config, dtype=torch.bfloat16)
        state = revert_weight_conversion(model, model.state_dict())
        tensors = {name: [str(t.dtype).removeprefix("torch."), list(t.shape)] for name, t in sorted(state.items())}
        recorded[key] = {"config": json.loads(config.to_json_string()), "tensors": tensors}
        print(key, len(tensors))
    OUT.write_text(json.dumps(recorded, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
