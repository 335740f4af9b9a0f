"""Record the metadata and tensor infos llama.cpp's converter writes for real model shapes, without real weights,
into tests/data/skeletons/<name>.json; `memory_models.py` turns each into a skeleton GGUF (its data a hole).

For each entry of `SKELETONS`:
1. transformers' default configuration of the model type (each mirrors a released checkpoint), with the entry's
   overrides for a second size;
2. the model class a checkpoint of that type is saved from, built on torch's `meta` device, and
   `save_pretrained` run with safetensors files whose header is real and whose data is a file hole, so the
   folder holds the names, shapes and dtypes a transformers 5 checkpoint has;
3. `convert_hf_to_gguf.py`'s model class for the folder, run lazily (no tensor data is read or computed) with
   the vocabulary replaced by a synthetic one of the config's size (tokenizer "none", `<arch>.vocab_size`):
   what its GGUF writer would write, before it writes, is the record.

Where released checkpoints hold tensors that transformers 5 does not save (Qwen's MTP layer, Gemma 3n's K and V
projections in layers that share a cache), the checkpoint gets them as the released ones have them; where
transformers 5 packs experts otherwise than the releases (Qwen3-VL-MoE transposed, Phi-3.5-MoE and MiniMax-M2 one
tensor per expert), the tensors are laid out as released, the layout the converter reads; where the released
config.json says more than transformers 5 writes (Hunyuan's per-layer MoE lists and NTK-alpha rope, DeepSeek-V3.2's
routing function and MTP layer), it is written as released.

`NATIVE_MMPROJ_SKELETONS` are checkpoints in Mistral's own layout, which transformers does not write: params.json as
released and consolidated.safetensors with the released names and shapes (a hole), converted as
`--mistral-format --mmproj` converts them (that path needs `mistral_common`).

Needs transformers 5 (with its tokenizers), torch and llama-cpp-python 0.3.36's sdist, unpacked:

    pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36 && tar xzf llama_cpp_python-0.3.36.tar.gz
    python tests/data/make_skeletons.py --llama-cpp llama_cpp_python-0.3.36/vendor/llama.cpp [name ...]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import struct
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "skeletons"

MTP = {"qwen3_5", "qwen3_5_moe", "qwen3_next"}  # whose released checkpoints carry an MTP layer (see _add_mtp)
DEEPSEEK_MTP = {"deepseek_v32"}  # ... DeepSeek's, as one more decoder layer (see _add_deepseek_mtp)
# saved from the text model's class: Gemma 3n's vision tower is timm's, which needs a torchvision built for this
# torch; the language model and its names are the same, and the converter leaves the towers out of the text GGUF
TEXT_ONLY = {"gemma3n"}
_LFM2_LAYERS = ["full_attention" if il in (2, 5, 8, 10, 12, 14) else "conv" for il in range(16)]
_LFM2_MOE_LAYERS = ["full_attention" if il in (2, 6, 10, 14, 18, 21) else "conv" for il in range(24)]
# Nemotron-H's layer pattern as its released configs write it (M: Mamba-2, *: attention, -: FFN, E: experts)
_NEMOTRON_H_TYPES = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
_NEMOTRON_NANO_9B_V2 = "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"
_NEMOTRON_3_NANO_30B_A3B = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
_NEMOTRON_3_SUPER_120B_A12B = "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME"
_NEMOTRON_H_MOE_KEYS = ("n_routed_experts", "n_shared_experts", "moe_intermediate_size",
                        "moe_shared_expert_intermediate_size", "moe_latent_size", "moe_shared_expert_overlap",
                        "num_experts_per_tok", "routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob",
                        "output_router_logits", "num_nextn_predict_layers", "mtp_layers_block_type")  # fmt: skip
_KIMI_LINEAR_FULL = (3, 7, 11, 15, 19, 23, 26)  # Kimi-Linear-48B-A3B's MLA layers, counted from 0
# name -> (transformers model type, overrides of its default text configuration); the first entry of a family is
# the default configuration itself
_QWEN3_VL_ROPE = {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [24, 20, 20],
                  "mrope_interleaved": True}  # fmt: skip
_QWEN2_VL_ROPE = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}
_QWEN4_EXP_ROPE = {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                   "mrope_section": [11, 11, 10], "mrope_interleaved": True}  # fmt: skip
_QWEN4_EXP_QSA = {"indexer_n_heads": 4, "indexer_kv_heads": 1, "indexer_head_dim": 128, "indexer_budget": 2048,
                  "indexer_compress_ratio": 4}  # fmt: skip
SKELETONS: dict[str, tuple[str, dict]] = {
    "gemma4-default": ("gemma4", {}),
    "gemma4-48-layers": ("gemma4", {"num_hidden_layers": 48, "hidden_size": 3840, "intermediate_size": 15360}),
    # Gemma 4 26B-A4B: its released config.json (google/gemma-4-26B-A4B-it, as public configs quote it; llama.cpp's
    # test-backend-ops names its 16 query and 2 KV heads of 512 in the full-attention layers, and its OpenVINO backend
    # the experts' 704 columns); transformers' defaults already have its 30 layers (5:1 sliding), head sizes 256
    # and 512 (global_head_dim), vocabulary and tied output
    "gemma4-26b-a4b": (
        "gemma4",
        {
            "hidden_size": 2816,
            "intermediate_size": 2112,  # the dense FFN beside the experts (llama.cpp's "shared expert")
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "num_global_key_value_heads": 2,
            "sliding_window": 1024,
            "max_position_embeddings": 262144,
            "final_logit_softcapping": 30.0,
            "hidden_size_per_layer_input": 0,  # no per-layer embeddings
            "attention_k_eq_v": True,  # full-attention layers use K as V: no v_proj
            "enable_moe_block": True,
            "num_experts": 128,
            "top_k_experts": 8,
            "moe_intermediate_size": 704,
        },
    ),
    "qwen3_5-default": ("qwen3_5", {}),
    "qwen3_5-64-layers": ("qwen3_5", {"num_hidden_layers": 64, "hidden_size": 5120, "intermediate_size": 17408}),
    "qwen3_5_moe-default": ("qwen3_5_moe", {}),
    "qwen3_5_moe-60-layers": ("qwen3_5_moe", {"num_hidden_layers": 60, "hidden_size": 4096, "num_experts": 512}),
    "qwen3_next-default": ("qwen3_next", {}),
    "qwen3_next-24-layers": ("qwen3_next", {"num_hidden_layers": 24}),
    # GLM-4.5-Air is the default but for its heads of 128 (the default derives 4096 / 96 = 42) and its Q, K and V
    # biases; then GLM-4.5's shape
    "glm-4.5-air": ("glm4_moe", {"head_dim": 128, "attention_bias": True}),
    "glm-4.5": (
        "glm4_moe",
        {
            "num_hidden_layers": 92,
            "hidden_size": 5120,
            "head_dim": 128,
            "attention_bias": True,
            "intermediate_size": 12288,
            "moe_intermediate_size": 1536,
            "n_routed_experts": 160,
            "first_k_dense_replace": 3,
            "use_qk_norm": True,
            "routed_scaling_factor": 2.5,
        },
    ),
    # DeepSeek-V3.2 (671B: 61 layers, the first 3 dense, 256 experts; its config.json as released, with the MTP layer),
    # and no smaller one is released: the same blocks cut to 12 layers and 64 experts
    "deepseek_v32-default": ("deepseek_v32", {}),
    "deepseek_v32-12-layers-64-experts": ("deepseek_v32", {"num_hidden_layers": 12, "n_routed_experts": 64}),
    # GLM-5 (744B-A40B: 78 layers, the first 3 dense, 256 experts, an indexer in every layer; its one MTP layer
    # declared, not carried, as for GLM-4.5), and GLM-5.2's indexers: full in layers 0, 1 and every fourth from 2,
    # the others reusing the last full one's choice, with its 2**20-token context
    "glm_moe_dsa-default": ("glm_moe_dsa", {"num_nextn_predict_layers": 1}),
    "glm_moe_dsa-shared-indexers": (
        "glm_moe_dsa",
        {
            "num_nextn_predict_layers": 1,
            "max_position_embeddings": 1048576,
            "indexer_types": ["full", "full", *(["full", "shared", "shared", "shared"] * 19)],
        },
    ),
    # Qwen3.8-Flash-Next (Qwen/Qwen3.8-Flash-Next, 48 layers, 512 experts: its text configuration as released, with
    # QSA's indexer in the full-attention layers and the PLE n-gram embeddings in layer 2, counted from 1); and
    # transformers' default (40 layers, no PLE) given the same indexer and rotary width, which QSA requires
    "qwen3.8-flash-next": (
        "qwen4_exp",
        {
            "hidden_size": 2560,
            "num_hidden_layers": 48,
            "num_attention_heads": 24,
            "linear_num_value_heads": 48,
            "moe_intermediate_size": 640,
            "shared_expert_intermediate_size": 640,
            "max_position_embeddings": 262144,
            "rope_parameters": _QWEN4_EXP_ROPE,
            **_QWEN4_EXP_QSA,
            "ple_layer_ids": [2],
            "ple_embed_dim": 2560,
            "split_ngram_parts": 128,
            "eos_token_id": 248044,
            "output_gate_type": "sigmoid",
        },
    ),
    "qwen4_exp-default": ("qwen4_exp", {"rope_parameters": _QWEN4_EXP_ROPE, **_QWEN4_EXP_QSA}),
    "llama4-default": ("llama4", {}),
    "llama4-interleaved": ("llama4", {"num_local_experts": 128, "interleave_moe_layer_step": 2}),
    "mistral3-default": ("mistral3", {}),
    "mistral3-26-layers": ("mistral3", {"num_hidden_layers": 26, "hidden_size": 3072, "intermediate_size": 9216}),
    "mistral4-default": ("mistral3", {"model_type": "mistral4"}),  # released as Mistral 3's multimodal class
    "gemma3n-default": ("gemma3n", {}),
    "gemma3n-30-layers": ("gemma3n", {"num_hidden_layers": 30, "num_kv_shared_layers": 10}),
    # LFM2 1.2B and 350M: short-convolution layers but for attention at 2, 5, 8, 10, 12 and 14 (the default attends
    # in every layer); the FFN width the converter derives from block_ff_dim (12288 -> 8192, 6656 -> 4608)
    "lfm2-1.2b": (
        "lfm2",
        {"hidden_size": 2048, "intermediate_size": 12288, "num_hidden_layers": 16, "layer_types": _LFM2_LAYERS},
    ),
    "lfm2-350m": (
        "lfm2",
        {
            "hidden_size": 1024,
            "intermediate_size": 6656,
            "num_hidden_layers": 16,
            "num_attention_heads": 16,
            "layer_types": _LFM2_LAYERS,
        },
    ),
    # LFM2-8B-A1B (the default names no layer types): 24 layers, attention at 2, 6, 10, 14, 18 and 21
    "lfm2moe-8b-a1b": ("lfm2_moe", {"num_hidden_layers": 24, "layer_types": _LFM2_MOE_LAYERS}),
    # Falcon-H1 0.5B and 7B (transformers' table of the family: depth, width, attention and Mamba heads, head sizes,
    # state; attention and a Mamba-2 mixer side by side in every layer)
    "falcon_h1-0.5b": (
        "falcon_h1",
        {
            "hidden_size": 1024,
            "intermediate_size": 2048,
            "num_hidden_layers": 36,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 64,
            "mamba_n_heads": 24,
            "mamba_d_head": 64,
            "mamba_d_ssm": 1536,
            "mamba_d_state": 128,
            "vocab_size": 32784,
            "max_position_embeddings": 16384,
        },
    ),
    "falcon_h1-7b": (
        "falcon_h1",
        {
            "hidden_size": 3072,
            "intermediate_size": 12288,
            "num_hidden_layers": 44,
            "num_attention_heads": 12,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "mamba_n_heads": 24,
            "mamba_d_head": 128,
            "mamba_d_ssm": 3072,
            "mamba_d_state": 256,
            "vocab_size": 130048,
            "max_position_embeddings": 262144,
        },
    ),
    # Qwen3-VL's language models (the defaults mirror no release, and lack the M-RoPE sections llama.cpp requires)
    "qwen3_vl-8b": (
        "qwen3_vl",
        {
            "num_hidden_layers": 36,
            "intermediate_size": 12288,
            "num_key_value_heads": 8,
            "max_position_embeddings": 262144,
            "rope_parameters": _QWEN3_VL_ROPE,
        },
    ),
    "qwen3_vl-4b": (
        "qwen3_vl",
        {
            "num_hidden_layers": 36,
            "hidden_size": 2560,
            "intermediate_size": 9728,
            "num_key_value_heads": 8,
            "max_position_embeddings": 262144,
            "rope_parameters": _QWEN3_VL_ROPE,
        },
    ),
    "qwen3_vl_moe-30b-a3b": (
        "qwen3_vl_moe",
        {
            "num_hidden_layers": 48,
            "num_attention_heads": 32,
            "head_dim": 128,
            "num_key_value_heads": 4,
            "intermediate_size": 6144,
            "moe_intermediate_size": 768,
            "num_local_experts": 128,
            "num_experts_per_tok": 8,
            "max_position_embeddings": 262144,
            "rope_parameters": _QWEN3_VL_ROPE,
            "tie_word_embeddings": False,
        },
    ),
    "qwen3_vl_moe-235b-a22b": (
        "qwen3_vl_moe",
        {
            "num_hidden_layers": 94,
            "hidden_size": 4096,
            "num_attention_heads": 64,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "intermediate_size": 12288,
            "moe_intermediate_size": 1536,
            "num_local_experts": 128,
            "num_experts_per_tok": 8,
            "max_position_embeddings": 262144,
            "rope_parameters": _QWEN3_VL_ROPE,
            "tie_word_embeddings": False,
        },
    ),
    # Qwen2-VL 72B (the default) and 7B, with their M-RoPE sections
    "qwen2_vl-72b": ("qwen2_vl", {"rope_parameters": _QWEN2_VL_ROPE}),
    "qwen2_vl-7b": (
        "qwen2_vl",
        {
            "num_hidden_layers": 28,
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "rope_parameters": _QWEN2_VL_ROPE,
        },
    ),
    # Phi-3.5-MoE, with its long-context rope factors and biases
    "phimoe-default": (
        "phimoe",
        {
            "attention_bias": True,
            "lm_head_bias": True,
            "rope_parameters": {
                "rope_type": "longrope",
                "rope_theta": 10000.0,
                "long_factor": [1.0] * 64,
                "short_factor": [1.0] * 64,
                "original_max_position_embeddings": 4096,
                "long_mscale": 1.243,
                "short_mscale": 1.1902,
            },
        },
    ),
    # MiniMax-M2 (230B-A10B): its rotary dimensions and sigmoid routing as its config.json names them
    "minimax_m2-default": ("minimax_m2", {"rotary_dim": 64, "scoring_func": "sigmoid"}),
    # EmbeddingGemma (google/embeddinggemma-300m's config.json: 24 layers of 768, 3 heads and 1 KV head of 256, FFN
    # 1152, a 512-token window (before transformers halves it for bidirectional attention), 2048 tokens, vocabulary
    # 262144), saved as its Gemma3TextModel; sentence-transformers' mean pooling beside it (see EMBEDDING_MODELS)
    "embeddinggemma-300m": (
        "gemma3_text",
        {
            "hidden_size": 768,
            "intermediate_size": 1152,
            "num_hidden_layers": 24,
            "num_attention_heads": 3,
            "num_key_value_heads": 1,
            "head_dim": 256,
            "sliding_window": 512,
            "use_bidirectional_attention": True,
            "max_position_embeddings": 2048,
            "vocab_size": 262144,
        },
    ),
    # NVIDIA-Nemotron-Nano-9B-v2 (its config.json: 56 layers of 4480, Mamba-2 with 128 heads of 80 in 8 groups and a
    # state of 128, attention at 4 layers with 40 heads and 8 KV heads of 128, squared-ReLU FFNs of 15680); converted
    # from its own config.json, which has no MoE keys (see RELEASED_CONFIGS)
    "nemotron_h-nano-9b-v2": (
        "nemotron_h",
        {
            "hidden_size": 4480,
            "intermediate_size": 15680,
            "layers_block_type": [_NEMOTRON_H_TYPES[c] for c in _NEMOTRON_NANO_9B_V2],
            "num_attention_heads": 40,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "mamba_num_heads": 128,
            "mamba_head_dim": 80,
            "ssm_state_size": 128,
            "n_groups": 8,
            "conv_kernel": 4,
            "vocab_size": 131072,
            "max_position_embeddings": 131072,
        },
    ),
    # NVIDIA-Nemotron-3-Nano-30B-A3B (its config.json: 52 layers of 2688, 23 Mamba-2 with 64 heads of 64, 6 attention
    # with 32 heads and 2 KV heads of 128, 23 MoE layers of 128 squared-ReLU experts of 1856, 6 chosen by biased
    # sigmoid, scaled by 2.5, and a shared expert of 3712); the converter writes nemotron_h_moe
    "nemotron_h-3-nano-30b-a3b": (
        "nemotron_h",
        {
            "hidden_size": 2688,
            "intermediate_size": 1856,
            "layers_block_type": [_NEMOTRON_H_TYPES[c] for c in _NEMOTRON_3_NANO_30B_A3B],
            "num_attention_heads": 32,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "mamba_num_heads": 64,
            "mamba_head_dim": 64,
            "ssm_state_size": 128,
            "n_groups": 8,
            "conv_kernel": 4,
            "n_routed_experts": 128,
            "num_experts_per_tok": 6,
            "moe_intermediate_size": 1856,
            "moe_shared_expert_intermediate_size": 3712,
            "routed_scaling_factor": 2.5,
            "vocab_size": 131072,
            "max_position_embeddings": 262144,
        },
    ),
    # NVIDIA-Nemotron-3-Super-120B-A12B (88 layers of 4096: 40 Mamba-2 with 128 heads of 64, 8 attention, 40 MoE
    # layers of 512 experts of 2688 in a latent space of 1024, 22 chosen, scaled by 5, a shared expert of 5376, and
    # one MTP block, attention then experts, as its checkpoint carries it: see _add_nemotron_h_mtp)
    "nemotron_h-3-super-120b-a12b": (
        "nemotron_h",
        {
            "hidden_size": 4096,
            "layers_block_type": [_NEMOTRON_H_TYPES[c] for c in _NEMOTRON_3_SUPER_120B_A12B],
            "num_attention_heads": 32,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "mamba_num_heads": 128,
            "mamba_head_dim": 64,
            "ssm_state_size": 128,
            "n_groups": 8,
            "conv_kernel": 4,
            "n_routed_experts": 512,
            "num_experts_per_tok": 22,
            "moe_intermediate_size": 2688,
            "moe_shared_expert_intermediate_size": 5376,
            "moe_latent_size": 1024,
            "routed_scaling_factor": 5.0,
            "num_nextn_predict_layers": 1,
            "vocab_size": 131072,
            "max_position_embeddings": 262144,
        },
    ),
    # Kimi-Linear-48B-A3B: transformers' default is its shape but for the layer order; its config.json puts full
    # (MLA) attention at layers 4, 8, ..., 24 and 27 (counted from 1), KDA in the rest (see RELEASED_CONFIGS)
    "kimi_linear-48b-a3b": (
        "kimi_linear",
        {"layer_types": ["full_attention" if il in _KIMI_LINEAR_FULL else "linear_attention" for il in range(27)]},
    ),
    # Hunyuan-A13B (80B-A13B): 64 experts, 8 chosen, one shared expert as wide, the tied output
    "hunyuan_v1_moe-a13b": (
        "hunyuan_v1_moe",
        {
            "intermediate_size": 3072,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "num_experts": 64,
            "moe_topk": 8,
            "vocab_size": 128167,
            "tie_word_embeddings": True,
            "max_position_embeddings": 32768,
        },
    ),
    # Hunyuan-7B and Hunyuan-4B (the dense family of 2025; 4B's 32 heads of 128 are wider than its embedding)
    "hunyuan_v1_dense-7b": (
        "hunyuan_v1_dense",
        {
            "intermediate_size": 14336,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 128167,
            "tie_word_embeddings": True,
            "max_position_embeddings": 32768,
        },
    ),
    "hunyuan_v1_dense-4b": (
        "hunyuan_v1_dense",
        {
            "hidden_size": 3072,
            "num_hidden_layers": 36,
            "intermediate_size": 8192,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 120818,
            "tie_word_embeddings": True,
            "max_position_embeddings": 262144,
        },
    ),
    "smollm3-default": ("smollm3", {}),
    "olmo2-default": ("olmo2", {}),
    "granite-default": ("granite", {}),
    "exaone4-default": ("exaone4", {}),
    "exaone4-64-layers": (
        "exaone4",
        {
            "num_hidden_layers": 64,
            "hidden_size": 5120,
            "intermediate_size": 27392,
            "num_attention_heads": 40,
            "num_key_value_heads": 8,
        },
    ),
    "olmo3-default": ("olmo3", {}),  # llama.cpp's olmo2 with sliding-window layers
    # architectures without an exact entry, for the generic estimate's check (test_llamacpp_generic.py)
    "olmoe-default": ("olmoe", {}),  # OLMoE 1B-7B
    "arcee-default": ("arcee", {}),  # AFM 4.5B
    # Granite 3.3 8B's shapes (the default is a 32-layer one with full attention heads)
    "granite-40-layers": (
        "granite",
        {
            "num_hidden_layers": 40,
            "intermediate_size": 12800,
            "num_key_value_heads": 8,
            "vocab_size": 49159,
            "max_position_embeddings": 131072,
        },
    ),
    # Granite 3.1 3B-A800M (the default is a llama-7B-shaped one)
    "granitemoe-3b-a800m": (
        "granitemoe",
        {
            "hidden_size": 1536,
            "intermediate_size": 512,
            "num_attention_heads": 24,
            "num_key_value_heads": 8,
            "num_local_experts": 40,
            "num_experts_per_tok": 8,
            "vocab_size": 49155,
            "max_position_embeddings": 131072,
        },
    ),
    "seed_oss-default": ("seed_oss", {}),  # Seed-OSS 36B
    # Apertus 8B's and 70B's shapes
    "apertus-8b": ("apertus", {"intermediate_size": 21504, "num_key_value_heads": 8}),
    "apertus-70b": (
        "apertus",
        {
            "num_hidden_layers": 80,
            "hidden_size": 8192,
            "intermediate_size": 43008,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
        },
    ),
    "glm4-default": ("glm4", {}),  # GLM-4 9B 0414
    # GLM-4 32B 0414
    "glm4-61-layers": (
        "glm4",
        {
            "num_hidden_layers": 61,
            "hidden_size": 6144,
            "intermediate_size": 23040,
            "num_attention_heads": 48,
            "num_key_value_heads": 2,
        },
    ),
    "ernie4_5-default": ("ernie4_5", {}),  # ERNIE 4.5 0.3B
    "ernie4_5_moe-default": ("ernie4_5_moe", {}),  # ERNIE 4.5 21B-A3B
    # ERNIE 4.5 300B-A47B: three dense layers first, no shared experts
    "ernie4_5_moe-54-layers": (
        "ernie4_5_moe",
        {
            "num_hidden_layers": 54,
            "hidden_size": 8192,
            "intermediate_size": 28672,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "moe_k": 8,
            "moe_intermediate_size": 3584,
            "moe_layer_start_index": 3,
            "moe_num_shared_experts": 0,
        },
    ),
    # Command R7B and Command A (111B); their config.json has the `rotary_pct` the converter reads, which
    # transformers 5's configuration no longer writes
    "cohere2-32-layers": (
        "cohere2",
        {
            "num_hidden_layers": 32,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "rotary_pct": 1.0,
        },
    ),
    "cohere2-64-layers": (
        "cohere2",
        {
            "num_hidden_layers": 64,
            "hidden_size": 12288,
            "intermediate_size": 36864,
            "num_attention_heads": 96,
            "num_key_value_heads": 8,
            "rotary_pct": 1.0,
        },
    ),
}
# projector files (`--mmproj`): name -> (transformers model type, overrides of its vision configuration), converted
# as `convert_hf_to_gguf.py --mmproj` converts them (F16); the image processor's defaults stand in for the
# checkpoint's preprocessor_config.json
MMPROJ_SKELETONS: dict[str, tuple[str, dict]] = {
    # Gemma 3 4B-27B's SigLIP (transformers' default vision configuration is SigLIP base, not Gemma 3's)
    "mmproj-gemma3": (
        "gemma3",
        {
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_hidden_layers": 27,
            "num_attention_heads": 16,
            "image_size": 896,
            "patch_size": 14,
        },
    ),
    # Qwen3-VL 8B's (the default's output width is not its text model's)
    "mmproj-qwen3_vl": ("qwen3_vl", {"out_hidden_size": 4096}),
    # Qwen2.5-VL 72B's (the default's width is its output's, and its output is not its text model's)
    "mmproj-qwen2_5_vl": ("qwen2_5_vl", {"hidden_size": 1280, "out_hidden_size": 8192}),
    # Qwen2-VL 7B's (the default)
    "mmproj-qwen2_vl": ("qwen2_vl", {}),
    # Gemma 4's vision encoder as transformers' Gemma4VisionConfig defaults it (768 wide, 16 layers, no clip bounds)
    "mmproj-gemma4": ("gemma4", {}),
}
# audio projector files: name -> (transformers model type, overrides of its audio configuration; of the whole
# configuration for the Omni models, which nest their encoders in the thinker's), converted as `--mmproj` converts
# them (F16)
AUDIO_MMPROJ_SKELETONS: dict[str, tuple[str, dict]] = {
    # Qwen2-Audio 7B's Whisper-large encoder (the default)
    "mmproj-qwen2_audio": ("qwen2_audio", {}),
    # Voxtral Mini 3B's (the default)
    "mmproj-voxtral": ("voxtral", {}),
    # Audio Flamingo 3's (the default; libmtmd's projector type is named after Music Flamingo, which shares it)
    "mmproj-audioflamingo3": ("audioflamingo3", {}),
    # Gemma 4 E2B/E4B's audio encoder as transformers' Gemma4AudioConfig defaults it, beside the vision encoder as
    # Gemma4VisionConfig defaults it (the released files hold both)
    "mmproj-gemma4_audio": ("gemma4", {}),
    # Qwen2.5-Omni 7B's (the default): a vision and an audio encoder in one file
    "mmproj-qwen2_5_omni": ("qwen2_5_omni", {}),
}
# Mistral Small 3.1 / 3.2 24B (Mistral-Small-3.1-24B-Instruct-2503, -3.2-24B-Instruct-2506), its params.json as
# Mistral ships it beside consolidated.safetensors
_MISTRAL_SMALL_3_1 = {
    "dim": 5120, "n_layers": 40, "head_dim": 128, "hidden_dim": 32768, "n_heads": 32, "n_kv_heads": 8,
    "rope_theta": 1000000000.0, "norm_eps": 1e-05, "vocab_size": 131072,
    "vision_encoder": {
        "hidden_size": 1024, "num_channels": 3, "max_image_size": 1540, "patch_size": 14, "rope_theta": 10000.0,
        "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16, "adapter_bias": False,
        "mm_projector_id": "patch_merge", "spatial_merge_size": 2, "add_pre_mm_projector_layer_norm": True,
        "image_token_id": 10, "image_break_token_id": 12, "image_end_token_id": 13, "image_size": 1540,
    },
}  # fmt: skip
# Pixtral 12B (Pixtral-12B-2409): Mistral NeMo's text model, a 1024 px ViT of 16 px patches without a patch
# merger, the adapter with biases
_PIXTRAL_12B = {
    "dim": 5120, "n_layers": 40, "head_dim": 128, "hidden_dim": 14336, "n_heads": 32, "n_kv_heads": 8,
    "rope_theta": 1000000000.0, "norm_eps": 1e-05, "vocab_size": 131072,
    "vision_encoder": {
        "hidden_size": 1024, "num_channels": 3, "image_size": 1024, "patch_size": 16, "rope_theta": 10000.0,
        "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16, "image_token_id": 10,
        "image_break_token_id": 12, "image_end_token_id": 13,
    },
}  # fmt: skip
# projector files of checkpoints in Mistral's own layout (params.json, consolidated.safetensors), converted as
# `convert_hf_to_gguf.py --mistral-format --mmproj` converts them: name -> params.json. The reference converter
# drops the [IMG_BREAK] embedding of every transformers-format Mistral 3 checkpoint (`MmprojModel.filter_tensors`
# skips `language_model.` names before the Pixtral converter looks for the token embeddings); only this layout, whose
# embeddings are `tok_embeddings.weight`, keeps it
NATIVE_MMPROJ_SKELETONS: dict[str, dict] = {"mmproj-mistral_small_3_1": _MISTRAL_SMALL_3_1,
                                            "mmproj-pixtral_12b": _PIXTRAL_12B}  # fmt: skip
# embedding models: name -> (the class its checkpoint is saved from, sentence-transformers' pooling mode), the
# pooling written as a released sentence-transformers folder has it (modules.json and 1_Pooling/config.json)
EMBEDDING_MODELS = {"embeddinggemma-300m": ("Gemma3TextModel", "mean")}
# overrides a configuration consumes into others, so it has no attribute of their name (Gemma 4's full-attention
# KV heads go into `per_layer_config`; the converter reads them from there)
CONSUMED = {"num_global_key_value_heads"}
# tensor name prefixes transformers 5 saves differently from the released checkpoints: saved -> released
RELEASED_PREFIXES = {"gemma3": {"vision_tower.": "vision_tower.vision_model."}}
# packed expert tensors transformers 5 saves as (experts, out, in) where the released checkpoints hold (experts, in,
# out), the layout the reference converter reads: model type -> name suffixes
RELEASED_TRANSPOSED = {"qwen3_vl_moe": ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")}
# Mixtral-style releases, which hold each expert's w1 (gate), w3 (up) and w2 (down) apart under
# `block_sparse_moe.`: model type -> (the released checkpoints' class, transformers 5 names in a layer -> released)
RELEASED_EXPERTS = {
    "phimoe": ("PhiMoEForCausalLM", {"mlp.router.weight": "block_sparse_moe.gate.weight"}),
    "minimax_m2": (
        "MiniMaxM2ForCausalLM",
        {
            "mlp.gate.weight": "block_sparse_moe.gate.weight",
            "mlp.e_score_correction_bias": "block_sparse_moe.e_score_correction_bias",
        },
    ),
}


def _hunyuan_config(config: dict) -> dict:
    """Hunyuan's released config.json: the NTK-alpha rope as `rope_scaling` (the converter checks it and takes the
    256k context from it) and, with experts, the per-layer lists transformers 5 folds into one value."""
    released = {key: value for key, value in config.items() if key != "rope_parameters"}
    released |= {"rope_theta": 10000.0, "rope_scaling": {"alpha": 1000.0, "factor": 1.0, "type": "dynamic"}}
    if config.get("num_experts", 1) > 1:
        n_layer = config["num_hidden_layers"]
        released |= {"moe_intermediate_size": [config["intermediate_size"]] * n_layer,
                     "moe_topk": [config["moe_topk"]] * n_layer, "num_shared_expert": [1] * n_layer}  # fmt: skip
    return released


def _deepseek_v32_config(config: dict) -> dict:
    """DeepSeek-V3.2's released config.json: sigmoid routing (`scoring_func`, which llama.cpp requires as
    `expert_gating_func`), one MTP layer, YaRN rope to 163840 from 4096."""
    released = {key: value for key, value in config.items() if key not in ("rope_parameters", "mlp_layer_types",
                                                                           "layer_types")}  # fmt: skip
    rope = {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1,
            "mscale": 1.0, "mscale_all_dim": 1.0}  # fmt: skip
    return released | {"scoring_func": "sigmoid", "topk_method": "noaux_tc", "num_nextn_predict_layers": 1,
                       "rope_theta": 10000, "rope_scaling": rope}  # fmt: skip


def _nemotron_h_config(config: dict) -> dict:
    """Nemotron-H's released config.json: the layer patterns as strings, no MoE keys for a dense model, and an MoE
    model's MTP block and latent size only where it has them."""
    kinds = {kind: c for c, kind in _NEMOTRON_H_TYPES.items()}
    pattern = "".join(kinds[kind] for kind in config["layers_block_type"])
    dropped = ("layers_block_type", "mtp_layers_block_type", *(() if "E" in pattern else _NEMOTRON_H_MOE_KEYS))
    released = {k: v for k, v in config.items() if k not in dropped and v is not None}
    if released.get("num_nextn_predict_layers"):
        released["mtp_hybrid_override_pattern"] = "".join(kinds[kind] for kind in config["mtp_layers_block_type"])
    return released | {"hybrid_override_pattern": pattern, "num_hidden_layers": len(pattern)}


def _kimi_linear_config(config: dict) -> dict:
    """Kimi-Linear's released config.json: the layer order and the KDA shape in `linear_attn_config` (layers
    counted from 1), the dense lead as `first_k_dense_replace`, the router's sigmoid, and its head_dim of 72."""
    kinds = config["layer_types"]
    linear = {"kda_layers": [il + 1 for il, kind in enumerate(kinds) if kind == "linear_attention"],
              "full_attn_layers": [il + 1 for il, kind in enumerate(kinds) if kind == "full_attention"],
              "num_heads": config["linear_num_heads"], "head_dim": config["linear_head_dim"],
              "short_conv_kernel_size": config["linear_conv_kernel_dim"]}  # fmt: skip
    dense_lead = next((il for il, kind in enumerate(config["mlp_layer_types"]) if kind != "dense"), len(kinds))
    dropped = ("layer_types", "mlp_layer_types", "linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim")
    released = {k: v for k, v in config.items() if k not in dropped}
    return released | {"linear_attn_config": linear, "first_k_dense_replace": dense_lead, "head_dim": 72,
                       "moe_router_activation_func": "sigmoid", "moe_layer_freq": 1, "mla_use_nope": True}  # fmt: skip


def _qwen4_exp_config(config: dict) -> dict:
    """Qwen3.8-Flash-Next's released config.json: its indexed layers named `full_attention`, the name the
    converter gives QSA's compress ratio by (transformers 5 reads them as `indexed_attention`)."""
    text = config["text_config"]
    kinds = ["full_attention" if kind == "indexed_attention" else kind for kind in text["layer_types"]]
    return config | {"text_config": text | {"layer_types": kinds}}


# config.json as the released checkpoints write it, from the one transformers 5 saves: model type -> (the rewrite,
# whether the converter is handed that file itself: it reads it so without a transformers that knows the type, and
# with one the defaults transformers adds, such as Nemotron-H's MoE keys, would make the dense 9B an MoE model)
RELEASED_CONFIGS = {
    "hunyuan_v1_moe": (_hunyuan_config, False),
    "hunyuan_v1_dense": (_hunyuan_config, False),
    "nemotron_h": (_nemotron_h_config, True),
    "kimi_linear": (_kimi_linear_config, True),
    "deepseek_v32": (_deepseek_v32_config, False),
    "qwen4_exp": (_qwen4_exp_config, True),
    # Qwen2.5-Omni's releases name the whole model's class, which the converter registers
    "qwen2_5_omni": (lambda config: {**config, "architectures": ["Qwen2_5OmniModel"]}, False),
}

_DTYPE_BYTES = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "BOOL": 1, "U8": 1, "F8_E4M3": 1}
_SAFETENSORS_DTYPES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16", "int64": "I64", "int32": "I32",
                       "bool": "BOOL", "uint8": "U8", "float8_e4m3fn": "F8_E4M3"}  # fmt: skip


def _write_hole(filename, entries: dict[str, tuple[str, list[int]]], metadata: dict | None) -> None:
    """A safetensors file of these tensors (name -> dtype, shape) whose data is a hole (a sparse file)."""
    header: dict = {}
    offset = 0
    for name, (dtype, shape) in entries.items():
        n = _DTYPE_BYTES[dtype] * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    if metadata:
        header["__metadata__"] = metadata
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(filename, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded)
        f.truncate(8 + len(encoded) + offset)


def _save_as_hole(tensors, filename, metadata=None) -> None:
    """safetensors' `save_file`, the data left a hole."""
    entries = {name: (_SAFETENSORS_DTYPES[str(t.dtype).removeprefix("torch.")], list(t.shape))
               for name, t in tensors.items()}  # fmt: skip
    _write_hole(filename, entries, metadata)


def _read_entries(folder: Path) -> dict[str, tuple[str, list[int]]]:
    """Every tensor of the checkpoint in `folder`: name -> (dtype, shape)."""
    entries = {}
    for part in folder.glob("model*.safetensors"):
        with open(part, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        entries.update({name: (h["dtype"], h["shape"]) for name, h in header.items() if name != "__metadata__"})
    return entries


def _add_part(folder: Path, entries: dict[str, tuple[str, list[int]]], name: str) -> None:
    """Tensors the released checkpoints have and a transformers 5 save lacks, in a file of their own."""
    _write_hole(folder / name, entries, {"format": "pt"})
    index = folder / "model.safetensors.index.json"
    if index.exists():
        record = json.loads(index.read_text())
        record["weight_map"].update(dict.fromkeys(entries, name))
        index.write_text(json.dumps(record))


def _add_shared_kv_projections(folder: Path, text) -> None:
    """Gemma 3n's released checkpoints (transformers 4.53) keep K and V projections in the layers that reuse an
    earlier layer's cache, and llama.cpp requires them; transformers 5 leaves them out."""
    entries = _read_entries(folder)
    first_shared = text.num_hidden_layers - text.num_kv_shared_layers
    source = f"layers.{first_shared - 1}.self_attn."
    prefix = next(n for n in entries if source in n).partition(source)[0]
    own = {n.removeprefix(prefix + source): e for n, e in entries.items() if n.startswith(prefix + source)}
    added = {}
    for il in range(first_shared, text.num_hidden_layers):
        layer = f"{prefix}layers.{il}.self_attn."
        added.update({layer + n: e for n, e in own.items() if layer + n not in entries})
    _add_part(folder, added, "model-shared-kv.safetensors")


def _add_mtp(folder: Path, text) -> None:
    """The multi-token-prediction module Qwen's checkpoints carry beside what transformers models: `mtp.fc`, its
    norms and one decoder layer shaped as the model's last full-attention layer."""
    entries = _read_entries(folder)
    last_full = max(il for il, kind in enumerate(text.layer_types) if kind == "full_attention")
    layer = f"layers.{last_full}."
    prefix = next(n for n in entries if layer in n).partition(layer)[0]
    dtype, h = entries[f"{prefix}{layer}input_layernorm.weight"][0], text.hidden_size
    mtp = {
        "mtp.layers.0." + n.removeprefix(prefix + layer): e for n, e in entries.items() if n.startswith(prefix + layer)
    }
    mtp["mtp.fc.weight"] = (dtype, [h, 2 * h])
    for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        mtp[f"mtp.{norm}.weight"] = (dtype, [h])
    _add_part(folder, mtp, "model-mtp.safetensors")


def _add_nemotron_h_mtp(folder: Path, text) -> None:
    """Nemotron-H MoE's MTP block as its checkpoints carry it beside what transformers models: `mtp.layers.0`, the
    input fusion (`enorm`, `hnorm`, `eh_proj`) and an attention layer; `mtp.layers.1`, an MoE layer and the head's
    `final_layernorm`; each layer shaped as the model's last of its kind."""
    entries = _read_entries(folder)
    dtype, h = entries["backbone.embeddings.weight"][0], text.hidden_size
    mtp = {}
    for il, kind in enumerate(text.mtp_layers_block_type):
        last = max(i for i, k in enumerate(text.layers_block_type) if k == kind)
        layer = f"backbone.layers.{last}."
        mtp |= {f"mtp.layers.{il}." + n.removeprefix(layer): e for n, e in entries.items() if n.startswith(layer)}
    mtp |= {f"mtp.layers.0.{norm}.weight": (dtype, [h]) for norm in ("enorm", "hnorm")}
    mtp |= {"mtp.layers.0.eh_proj.weight": (dtype, [h, 2 * h]), "mtp.layers.1.final_layernorm.weight": (dtype, [h])}
    _add_part(folder, mtp, "model-mtp.safetensors")


def _add_deepseek_mtp(folder: Path, text) -> None:
    """DeepSeek-V3's MTP module as its checkpoints hold it: layer `num_hidden_layers`, a decoder layer shaped as the
    last one (its indexer too), with its own embeddings, norms, projection and output head."""
    entries = _read_entries(folder)
    n, h = text.num_hidden_layers, text.hidden_size
    last = f"model.layers.{n - 1}."
    mtp = {f"model.layers.{n}." + k.removeprefix(last): e for k, e in entries.items() if k.startswith(last)}
    dtype = entries[f"{last}input_layernorm.weight"][0]
    mtp |= {f"model.layers.{n}.{name}": (dtype, shape) for name, shape in (
        ("embed_tokens.weight", [text.vocab_size, h]), ("enorm.weight", [h]), ("hnorm.weight", [h]),
        ("eh_proj.weight", [h, 2 * h]), ("shared_head.norm.weight", [h]),
        ("shared_head.head.weight", [text.vocab_size, h]))}  # fmt: skip
    _add_part(folder, mtp, "model-mtp.safetensors")


def _write_ple_constants(folder: Path, model) -> None:
    """Qwen4-Exp's PLE hash constants (each n-gram embedding's multipliers, head offsets and head vocabulary sizes,
    int64 buffers the converter reads as metadata) written into the checkpoint's hole: the values the model derives
    from its configuration, which a model on the `meta` device holds only as shapes."""
    from transformers.models.qwen4_exp import modeling_qwen4_exp

    values = {}
    for name, module in model.named_modules():
        if isinstance(module, modeling_qwen4_exp.Qwen4ExpTextNGramEmbedding):
            layer = name[name.index("layers.") :] + "."
            multipliers = modeling_qwen4_exp._build_layer_multipliers(
                module.unigram_vocab_size, module.ngram_size, module.ple_layer_index, module.seed
            )
            values[layer + "layer_multipliers"] = multipliers.tolist()
            values[layer + "ngram_heads_offsets"] = module.head_offsets
            values[layer + "ngram_heads_vocab_sizes"] = module.head_vocab_sizes
    for part in folder.glob("model*.safetensors"):
        with open(part, "r+b") as f:
            size = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(size))
            for name, entry in header.items():
                key = next((k for k in values if name.endswith(k)), None)
                if key is not None:
                    f.seek(8 + size + entry["data_offsets"][0])
                    f.write(struct.pack(f"<{len(values[key])}q", *values[key]))


def _text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def save_checkpoint(model_type: str, overrides: dict, folder: Path, *, encoder: str | None = None,
                    embedding: tuple[str, str] | None = None) -> int:  # fmt: skip
    """A transformers 5 checkpoint of `model_type` in `folder`, its tensor data a hole; returns the vocabulary
    size. `encoder` ("vision" or "audio"): the overrides are that encoder's configuration's (and for vision the
    image processor's defaults are saved). `embedding`: the model class an embedding model is saved from and its
    pooling mode."""
    import torch
    import transformers
    import transformers.modeling_utils
    from transformers.models.auto import modeling_auto

    default = transformers.AutoConfig.for_model(model_type)
    nested = _text_config(default) is not default
    # built again from the overrides, so what the config derives from them (its layer types) follows
    key = f"{encoder}_config"
    vision = encoder == "vision"
    if encoder and not hasattr(default, key):
        # the Omni models nest their encoders in the thinker's configuration: the overrides are the whole model's
        config = configured = transformers.AutoConfig.for_model(model_type, **overrides)
        vision = True
    elif encoder:
        # Gemma 4's default configuration has no vision or audio part: that configuration's own defaults then
        def defaults(key: str) -> dict:
            return getattr(default, key).to_dict() if getattr(default, key, None) else {}

        encoders = {key: defaults(key) | overrides}
        if encoder == "audio" and hasattr(default, "vision_config"):  # released with a vision encoder beside it
            encoders["vision_config"] = defaults("vision_config")
            vision = True
        config = transformers.AutoConfig.for_model(model_type, **encoders)
        configured = getattr(config, key)
    else:
        config = transformers.AutoConfig.for_model(model_type, **({"text_config": overrides} if nested else overrides))
    if vision:
        _image_processor(model_type).save_pretrained(folder)
    text = _text_config(config)
    configured = configured if encoder else text
    taken = configured.to_dict()  # Gemma 4's per-layer attributes are not plain attributes
    for key, value in overrides.items():
        if key not in CONSUMED and taken.get(key) != value:
            raise SystemExit(f"{model_type}'s configuration did not take {key}={value!r}")
    if model_type in TEXT_ONLY:
        config, model_type = text, text.model_type
    class_name = (modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(model_type)
                  or modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
                  or modeling_auto.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES.get(model_type)
                  or modeling_auto.MODEL_FOR_PRETRAINING_MAPPING_NAMES[model_type])  # fmt: skip
    if embedding:
        class_name = embedding[0]
        _write_pooling(folder, embedding[1])
    with torch.device("meta"):
        model = getattr(transformers, class_name)(config)
    transformers.modeling_utils.safe_save_file = _save_as_hole
    model.save_pretrained(folder, max_shard_size="100TB")
    if model_type in MTP:
        _add_mtp(folder, text)
    if model_type == "nemotron_h" and text.num_nextn_predict_layers:
        _add_nemotron_h_mtp(folder, text)
    if model_type in DEEPSEEK_MTP:
        _add_deepseek_mtp(folder, text)
    if model_type == "qwen4_exp":
        _write_ple_constants(folder, model)
    if model_type == "gemma3n_text":
        _add_shared_kv_projections(folder, text)
    if encoder == "vision" and model_type in RELEASED_PREFIXES:
        _rename(folder, RELEASED_PREFIXES[model_type])
    if model_type in RELEASED_TRANSPOSED:
        _transpose(folder, RELEASED_TRANSPOSED[model_type])
    if model_type in RELEASED_EXPERTS:
        _unpack_experts(folder, *RELEASED_EXPERTS[model_type])
    if model_type == "kimi_linear":  # its dense lead's FFN is `mlp.`, which transformers 5 saves as the experts'
        dense = [il for il, kind in enumerate(text.mlp_layer_types) if kind == "dense"]
        _rename(folder, {f"model.layers.{il}.block_sparse_moe.": f"model.layers.{il}.mlp." for il in dense})
    if model_type in RELEASED_CONFIGS:
        saved = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(RELEASED_CONFIGS[model_type][0](saved), indent=2))
    return int(text.vocab_size)


def save_native_mistral(params: dict, folder: Path) -> int:
    """A checkpoint in Mistral's own layout in `folder`: params.json, and consolidated.safetensors with the names
    and shapes Mistral's releases hold (BF16; the vision encoder with its patch merger and adapter, the text model),
    its data a hole; returns the vocabulary size."""
    (folder / "params.json").write_text(json.dumps(params, indent=2))
    bf16 = "BF16"
    h, heads, kv, d_head, ff = (params[k] for k in ("dim", "n_heads", "n_kv_heads", "head_dim", "hidden_dim"))
    vision = params["vision_encoder"]
    vh, vff, p = vision["hidden_size"], vision["intermediate_size"], vision["patch_size"]

    def layer(prefix: str, width: int, q: int, k: int, inner: int) -> dict:
        shapes = {"attention.wq": [q, width], "attention.wk": [k, width], "attention.wv": [k, width],
                  "attention.wo": [width, q], "attention_norm": [width], "ffn_norm": [width],
                  "feed_forward.w1": [inner, width], "feed_forward.w2": [width, inner],
                  "feed_forward.w3": [inner, width]}  # fmt: skip
        return {f"{prefix}{name}.weight": (bf16, shape) for name, shape in shapes.items()}

    entries = {"tok_embeddings.weight": (bf16, [params["vocab_size"], h]), "norm.weight": (bf16, [h]),
               "output.weight": (bf16, [params["vocab_size"], h])}  # fmt: skip
    for il in range(params["n_layers"]):
        entries |= layer(f"layers.{il}.", h, heads * d_head, kv * d_head, ff)
    entries |= {"vision_encoder.patch_conv.weight": (bf16, [vh, vision["num_channels"], p, p]),
                "vision_encoder.ln_pre.weight": (bf16, [vh])}  # fmt: skip
    for il in range(vision["num_hidden_layers"]):
        entries |= layer(f"vision_encoder.transformer.layers.{il}.", vh, vh, vh, vff)
    merge = vision.get("spatial_merge_size", 1)
    if vision.get("mm_projector_id") == "patch_merge":
        entries["patch_merger.merging_layer.weight"] = (bf16, [vh, vh * merge * merge])
    if vision.get("add_pre_mm_projector_layer_norm"):
        entries["pre_mm_projector_norm.weight"] = (bf16, [vh])
    for name, shape in (("w_in", [h, vh]), ("w_out", [h, h])):
        entries[f"vision_language_adapter.{name}.weight"] = (bf16, shape)
        if vision.get("adapter_bias", True):  # the default of Mistral's VisionEncoderArgs
            entries[f"vision_language_adapter.{name}.bias"] = (bf16, shape[:1])
    _write_hole(folder / "consolidated.safetensors", entries, None)
    return int(params["vocab_size"])


def _write_pooling(folder: Path, mode: str) -> None:
    """sentence-transformers' modules.json and pooling configuration, from which the converter takes the pooling."""
    kinds = "sentence_transformers.models."
    modules = [{"idx": 0, "name": "0", "path": "", "type": kinds + "Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": kinds + "Pooling"}]  # fmt: skip
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({f"pooling_mode_{mode}_tokens": True}))


def _rename(folder: Path, prefixes: dict[str, str]) -> None:
    """The checkpoint's tensors under the names the released checkpoints give them (`prefixes`: saved ->
    released)."""
    entries = {}
    for name, entry in _read_entries(folder).items():
        old = next((p for p in prefixes if name.startswith(p)), None)
        entries[prefixes[old] + name.removeprefix(old) if old else name] = entry
    for part in folder.glob("model*.safetensors"):
        part.unlink()
    (folder / "model.safetensors.index.json").unlink(missing_ok=True)
    _write_hole(folder / "model.safetensors", entries, {"format": "pt"})


def _transpose(folder: Path, suffixes: tuple[str, ...]) -> None:
    """The checkpoint's tensors ending in `suffixes` with their last two dimensions swapped."""
    entries = {}
    for name, (dtype, shape) in _read_entries(folder).items():
        entries[name] = (dtype, [*shape[:-2], shape[-1], shape[-2]] if name.endswith(suffixes) else shape)
    for part in folder.glob("model*.safetensors"):
        part.unlink()
    (folder / "model.safetensors.index.json").unlink(missing_ok=True)
    _write_hole(folder / "model.safetensors", entries, {"format": "pt"})


def _unpack_experts(folder: Path, hf_class: str, renames: dict[str, str]) -> None:
    """The checkpoint as a Mixtral-style release holds it: packed experts (`mlp.experts.gate_up_proj`, experts x
    2 ff x hidden; `down_proj`, experts x hidden x ff) one tensor per expert and projection, `renames` applied, and
    config.json naming the released class."""
    entries = {}
    for name, (dtype, shape) in _read_entries(folder).items():
        layer, _, rest = name.rpartition("mlp.experts.")
        if rest in ("gate_up_proj", "down_proj"):
            n_expert, rows, cols = shape
            parts = (
                {"w1": [rows // 2, cols], "w3": [rows // 2, cols]} if rest == "gate_up_proj" else {"w2": [rows, cols]}
            )
            for e in range(n_expert):
                for w, part in parts.items():
                    entries[f"{layer}block_sparse_moe.experts.{e}.{w}.weight"] = (dtype, part)
            continue
        old = next((o for o in renames if name.endswith(o)), None)
        entries[name.removesuffix(old) + renames[old] if old else name] = (dtype, shape)
    for part in folder.glob("model*.safetensors"):
        part.unlink()
    (folder / "model.safetensors.index.json").unlink(missing_ok=True)
    _write_hole(folder / "model.safetensors", entries, {"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": [hf_class]}))


def _image_processor(model_type: str):
    """The model type's image processor with its defaults (what a checkpoint's preprocessor_config.json holds)."""
    import transformers
    from transformers.models.auto import image_processing_auto

    names = image_processing_auto.IMAGE_PROCESSOR_MAPPING_NAMES[model_type]  # backend -> class name
    return getattr(transformers, names["pil"])()


def convert(folder: Path, name: str, n_vocab: int, llama_cpp: Path, *, mmproj: bool = False,
            handed: bool = False, mistral_format: bool = False) -> dict:  # fmt: skip
    """What the reference converter writes for the checkpoint in `folder`, as the record's JSON (`mmproj`: its
    projector file, F16, as `--mmproj` writes it; `handed`: the converter given config.json as it is;
    `mistral_format`: a checkpoint in Mistral's own layout, converted as `--mistral-format` does)."""
    sys.path[:0] = [str(llama_cpp / "gguf-py"), str(llama_cpp)]
    import gguf
    import torch
    from conversion import ModelBase, ModelType, get_model_architecture, get_model_class
    from tokenizers import Tokenizer, models

    # some converters read the vocabulary's size from tokenizer.json themselves
    Tokenizer(models.BPE({f"<t{i}>": i for i in range(n_vocab)}, [])).save(str(folder / "tokenizer.json"))
    model_type = ModelType.MMPROJ if mmproj else ModelType.TEXT
    file_type = gguf.LlamaFileType.MOSTLY_F16 if mmproj else gguf.LlamaFileType.MOSTLY_Q8_0
    with torch.inference_mode():
        raw = {"hparams": json.loads((folder / "config.json").read_text())} if handed else {}
        if mistral_format:  # as convert_hf_to_gguf.py's main picks the class for --mistral-format --mmproj
            from conversion.pixtral import PixtralModel

            hf_class, model_class = "", PixtralModel
        else:
            hf_class = get_model_architecture(ModelBase.load_hparams(folder, False), model_type)
            model_class = get_model_class(hf_class, mmproj=mmproj)
        model = model_class(folder, file_type, folder / "model.gguf", model_name=name, **raw)
        model = getattr(model, "impl", model)  # Mistral3Model converts through the class of its text model
        writer = model.gguf_writer

        def synthetic_vocab() -> None:
            writer.add_tokenizer_model("none")
            writer.add_vocab_size(n_vocab)

        model.set_vocab = synthetic_vocab
        model.prepare_tensors()
        model.prepare_metadata(vocab_only=False)
    metadata = {}
    for key, v in writer.kv_data[0].items():
        value = v.value.tolist() if hasattr(v.value, "tolist") else v.value
        value = int(value) if type(value).__name__ == "LlamaFileType" else value
        element = v.sub_type
        if v.type == gguf.GGUFValueType.ARRAY and element is None:  # typed when written, by the first element
            element = gguf.GGUFValueType.get_type(value[0])
        metadata[key] = [v.type.name, value] + ([element.name] if element else [])
    tensors = [[name, list(map(int, info.shape)), info.dtype.name] for name, info in writer.tensors[0].items()]
    return {"hf_class": hf_class, "converter": type(model).__name__, "metadata": metadata, "tensors": tensors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp's source (the sdist's vendor/)")
    every = {**SKELETONS, **MMPROJ_SKELETONS, **AUDIO_MMPROJ_SKELETONS, **NATIVE_MMPROJ_SKELETONS}
    parser.add_argument("names", nargs="*", help=f"of {', '.join(every)}; all without")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    import transformers

    OUT.mkdir(exist_ok=True)
    for name in args.names or every:
        with tempfile.TemporaryDirectory() as tmp:
            if name in NATIVE_MMPROJ_SKELETONS:
                params = NATIVE_MMPROJ_SKELETONS[name]
                n_vocab = save_native_mistral(params, Path(tmp))
                converted = convert(Path(tmp), name, n_vocab, args.llama_cpp.resolve(), mmproj=True,
                                    mistral_format=True)  # fmt: skip
                record = {"params": params, **converted}
            else:
                encoder = "vision" if name in MMPROJ_SKELETONS else "audio" if name in AUDIO_MMPROJ_SKELETONS else None
                model_type, overrides = every[name]
                n_vocab = save_checkpoint(model_type, overrides, Path(tmp), encoder=encoder,
                                          embedding=EMBEDDING_MODELS.get(name))  # fmt: skip
                handed = RELEASED_CONFIGS.get(model_type, (None, False))[1]
                converted = convert(Path(tmp), name, n_vocab, args.llama_cpp.resolve(), mmproj=encoder is not None,
                                    handed=handed)  # fmt: skip
                record = {"model_type": model_type, "overrides": overrides, "transformers": transformers.__version__,
                          **converted}  # fmt: skip
        (OUT / f"{name}.json").write_text(json.dumps(record, separators=(",", ":")) + "\n")
        print(name, record["metadata"]["general.architecture"][1], len(record["tensors"]), "tensors", flush=True)


if __name__ == "__main__":
    main()
