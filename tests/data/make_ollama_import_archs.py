"""Record the checkpoint of each architecture in Ollama's import registry (x/create's
tensorImportTransformRegistry) as transformers 5.25 saves it: config.json and every tensor's name, dtype and
shape, into ollama_import_archs.json, which tests/ollama/test_import.py plans imports from.

Run with the recording environment: /work/venv-rec/bin/python tests/data/make_ollama_import_archs.py
Each model is built on the meta device (no weights) from its class's default config with the blocks and experts
cut down (4 blocks, or as many as every kind of block needs; 4 experts) so the recording stays small, and its
state dict is put back into the saved checkpoint's names as save_pretrained does (transformers'
revert_weight_conversion). The two classes transformers does not ship, NVIDIA's remote-code Nemotron-H VL and
omni models (NemotronH_Nano_VL_V2, NemotronH_Nano_Omni_Reasoning_V3), are recorded from the configs Ollama's own
tests give them (convert/convert_nemotron_h_test.go; VL V2 with x/models/nemotron_h_test.go's "M*E-" layer
pattern, so that every kind of block is there): their language model is transformers' NemotronHForCausalLM of
the `llm_config` under `language_model.`, as x/models/nemotron_h loads it; the RADIO vision tower, its `mlp1`
projector, the Parakeet sound encoder and `sound_projection` carry the names Ollama's converter maps
(convert_nemotron_h.go's Replacements), one block each, with the towers' widths cut down (in the config too)
so that the tests can write them from numpy.
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
    "Gemma4UnifiedForCausalLM": ("gemma4_unified_text", "Gemma4UnifiedForCausalLM"),
    "Gemma4AssistantForCausalLM": (
        "gemma4_assistant",
        "Gemma4AssistantForCausalLM",
        {"text_config": {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0}},
    ),
    "Gemma4UnifiedAssistantForCausalLM": ("gemma4_unified_assistant", "Gemma4UnifiedAssistantForCausalLM"),
    "LagunaForCausalLM": ("laguna", "LagunaForCausalLM"),
    "MuseGlimmerForConditionalGeneration": ("muse_glimmer", "MuseGlimmerForConditionalGeneration"),
    "Cohere2MoeForCausalLM": ("cohere2_moe", "Cohere2MoeForCausalLM"),
    "NemotronHForCausalLM": ("nemotron_h", "NemotronHForCausalLM"),
}
LAYERS = ("num_hidden_layers", "num_layers", "depth", "encoder_layers", "num_blocks")
EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts")
PER_LAYER = ("layer_types", "mlp_layer_types", "hybrid_override_pattern", "layers_block_type")

# upstream's llm_config (TestNemotronHNanoVLLoadModelMetadata), with a small vocabulary and MLP so the
# checkpoint stays small; the experts are cut to 4 as for every class
NEMOTRON_LLM = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "num_hidden_layers": 4,
    "hidden_size": 512, "max_position_embeddings": 262144, "num_attention_heads": 8, "num_key_value_heads": 2,
    "head_dim": 64, "layer_norm_epsilon": 1e-5, "conv_kernel": 4, "ssm_state_size": 128, "mamba_num_heads": 16,
    "mamba_head_dim": 32, "n_groups": 8, "hybrid_override_pattern": "ME*M", "n_routed_experts": 16,
    "num_experts_per_tok": 4, "moe_intermediate_size": 256,
    "vocab_size": 1024, "intermediate_size": 1024, "moe_shared_expert_intermediate_size": 256,
}  # fmt: skip
# the towers' widths, cut down from upstream's (vit_hidden_size 1280, sound hidden_size 1024, ...)
VIT, SOUND, SOUND_FF, SOUND_HEADS, SUB_CHANNELS, MELS, PROJ = 64, 64, 256, 2, 16, 16, 128
SOUND_CONFIG = {
    "model_type": "parakeet", "hidden_size": SOUND, "num_attention_heads": SOUND_HEADS, "num_hidden_layers": 1,
    "intermediate_size": SOUND_FF, "conv_kernel_size": 9, "subsampling_conv_channels": SUB_CHANNELS,
    "subsampling_conv_kernel_size": 3, "subsampling_conv_stride": 2, "subsampling_factor": 8,
    "num_mel_bins": MELS, "projection_hidden_size": PROJ, "sampling_rate": 16000,
}  # fmt: skip
NEMOTRON_REMOTE = {
    "NemotronH_Nano_VL_V2": {
        "architectures": ["NemotronH_Nano_VL_V2"], "model_type": "NemotronH_Nano_VL_V2",
        "max_sequence_length": 131072, "force_image_size": 512, "downsample_ratio": 0.5, "patch_size": 16,
        "use_thumbnail": True, "img_context_token_id": 18, "img_context_token": "<image>",
        "img_start_token": "<img>", "img_end_token": "</img>", "sound_context_token_id": 27,
        "sound_context_token": "<so_embedding>", "vit_hidden_size": VIT, "projector_hidden_size": PROJ,
        "vision_config": {"version": "radio_v2.5-h", "patch_size": 16, "max_resolution": 128,
                          "separate_video_embedder": True},
        "sound_config": SOUND_CONFIG,
        "llm_config": {**NEMOTRON_LLM, "hybrid_override_pattern": "M*E-"},
    },
    "NemotronH_Nano_Omni_Reasoning_V3": {
        "architectures": ["NemotronH_Nano_Omni_Reasoning_V3"], "model_type": "NemotronH_Nano_Omni_Reasoning_V3",
        "max_sequence_length": 131072, "force_image_size": 512, "downsample_ratio": 0.5, "patch_size": 16,
        "img_context_token_id": 18, "img_context_token": "<image>", "img_start_token": "<img>",
        "img_end_token": "</img>", "sound_context_token_id": 27, "sound_context_token": "<so_embedding>",
        "vit_hidden_size": VIT, "projector_hidden_size": PROJ,
        "vision_config": {"version": "radio_v2.5-h", "patch_size": 16, "max_resolution": 128,
                          "min_num_patches": 1024, "max_num_patches": 13312,
                          "args": {"min_num_patches": 1024, "max_num_patches": 13312}},
        "sound_config": SOUND_CONFIG,
        "llm_config": NEMOTRON_LLM,
    },
}  # fmt: skip


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


def radio_tensors(config: dict) -> dict[str, list]:
    """RADIO's tensors (one block) and the mlp1 projector: RMS norm of the 2x2-shuffled patches, two linears."""
    h, patch, llm = config["vit_hidden_size"], config["patch_size"], config["llm_config"]["hidden_size"]
    grid = config["vision_config"]["max_resolution"] // patch
    gen, blk = "vision_model.radio_model.model.patch_generator.", "vision_model.radio_model.model.blocks.0."
    out = {
        "vision_model.radio_model.input_conditioner.norm_mean": [3, 1, 1],
        "vision_model.radio_model.input_conditioner.norm_std": [3, 1, 1],
        gen + "embedder.weight": [h, 3 * patch * patch], gen + "pos_embed": [1, grid * grid, h],
        gen + "cls_token.token": [10, h],
        blk + "norm1.weight": [h], blk + "norm1.bias": [h], blk + "norm2.weight": [h], blk + "norm2.bias": [h],
        blk + "attn.qkv.weight": [3 * h, h], blk + "attn.qkv.bias": [3 * h],
        blk + "attn.proj.weight": [h, h], blk + "attn.proj.bias": [h],
        blk + "mlp.fc1.weight": [4 * h, h], blk + "mlp.fc1.bias": [4 * h],
        blk + "mlp.fc2.weight": [h, 4 * h], blk + "mlp.fc2.bias": [h],
        "mlp1.0.weight": [4 * h], "mlp1.1.weight": [config["projector_hidden_size"], 4 * h],
        "mlp1.3.weight": [llm, config["projector_hidden_size"]],
    }  # fmt: skip
    if config["vision_config"].get("separate_video_embedder"):
        out[gen + "video_embedder.weight"] = [h, 2 * 3 * patch * patch]
    return {name: ["bfloat16", shape] for name, shape in out.items()}


def parakeet_tensors(config: dict) -> dict[str, list]:
    """The Parakeet encoder's tensors as NeMo names them (one conformer block) and the sound projection."""
    sc, llm = config["sound_config"], config["llm_config"]["hidden_size"]
    d, ff, c, k = sc["hidden_size"], sc["intermediate_size"], sc["subsampling_conv_channels"], sc["conv_kernel_size"]
    enc, blk = "sound_encoder.encoder.", "sound_encoder.encoder.layers.0."
    out = {enc + "subsampling.layers.0.weight": [c, 1, 3, 3], enc + "subsampling.layers.0.bias": [c]}
    for i in (2, 5):
        out |= {
            f"{enc}subsampling.layers.{i}.weight": [c, 1, 3, 3],
            f"{enc}subsampling.layers.{i}.bias": [c],
            f"{enc}subsampling.layers.{i + 1}.weight": [c, c, 1, 1],
            f"{enc}subsampling.layers.{i + 1}.bias": [c],
        }
    out |= {enc + "subsampling.linear.weight": [d, c * sc["num_mel_bins"] // 8], enc + "subsampling.linear.bias": [d]}
    for norm in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out", "conv.norm"):
        out |= {f"{blk}{norm}.weight": [d], f"{blk}{norm}.bias": [d]}
    for ffn in ("feed_forward1", "feed_forward2"):
        out |= {
            f"{blk}{ffn}.linear1.weight": [ff, d],
            f"{blk}{ffn}.linear1.bias": [ff],
            f"{blk}{ffn}.linear2.weight": [d, ff],
            f"{blk}{ffn}.linear2.bias": [d],
        }
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        out |= {f"{blk}self_attn.{proj}.weight": [d, d], f"{blk}self_attn.{proj}.bias": [d]}
    heads = sc["num_attention_heads"]
    out |= {blk + "self_attn.relative_k_proj.weight": [d, d], blk + "self_attn.bias_u": [heads, d // heads],
            blk + "self_attn.bias_v": [heads, d // heads],
            blk + "conv.pointwise_conv1.weight": [2 * d, d, 1], blk + "conv.pointwise_conv1.bias": [2 * d],
            blk + "conv.depthwise_conv.weight": [d, 1, k], blk + "conv.depthwise_conv.bias": [d],
            blk + "conv.norm.running_mean": [d], blk + "conv.norm.running_var": [d],
            blk + "conv.pointwise_conv2.weight": [d, d, 1], blk + "conv.pointwise_conv2.bias": [d],
            "sound_projection.norm.weight": [d], "sound_projection.linear1.weight": [sc["projection_hidden_size"], d],
            "sound_projection.linear2.weight": [llm, sc["projection_hidden_size"]]}  # fmt: skip
    tensors = {name: ["bfloat16", shape] for name, shape in out.items()}
    tensors[blk + "conv.norm.num_batches_tracked"] = ["int64", []]
    featurizer = enc + "feature_extractor.featurizer."
    tensors |= {featurizer + "fb": ["float32", [1, sc["num_mel_bins"], 257]], featurizer + "window": ["float32", [400]]}
    return tensors


def state_of(cls_name: str, config) -> dict[str, list]:
    """Every tensor's dtype and shape of `cls_name` built on the meta device, as save_pretrained names them."""
    with torch.device("meta"):
        model = getattr(transformers, cls_name)._from_config(config, dtype=torch.bfloat16)
    state = revert_weight_conversion(model, model.state_dict())
    return {name: [str(t.dtype).removeprefix("torch."), list(t.shape)] for name, t in sorted(state.items())}


def nemotron_remote(config: dict) -> dict:
    """A remote-code Nemotron-H VL/omni checkpoint: the language model under `language_model.`, the towers."""
    llm = transformers.AutoConfig.for_model(**config["llm_config"])
    shrink(llm)
    config["llm_config"] |= {"n_routed_experts": llm.n_routed_experts, "num_experts_per_tok": llm.num_experts_per_tok}
    tensors = {"language_model." + name: v for name, v in state_of("NemotronHForCausalLM", llm).items()}
    tensors |= radio_tensors(config) | parakeet_tensors(config)
    return {"config": config, "tensors": dict(sorted(tensors.items()))}


def main() -> None:
    recorded = {"transformers": transformers.__version__}
    for key, (model_type, cls_name, *kwargs) in ARCHS.items():
        config = transformers.AutoConfig.for_model(model_type, **(kwargs[0] if kwargs else {}))
        shrink(config)
        config.architectures = [cls_name]
        tensors = state_of(cls_name, config)  # first: building the model sets the config's dtype
        recorded[key] = {"config": json.loads(config.to_json_string()), "tensors": tensors}
        print(key, len(recorded[key]["tensors"]))
    for key, config in NEMOTRON_REMOTE.items():
        recorded[key] = nemotron_remote(json.loads(json.dumps(config)))
        print(key, len(recorded[key]["tensors"]))
    OUT.write_text(json.dumps(recorded, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
