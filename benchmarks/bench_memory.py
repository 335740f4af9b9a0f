"""Memory estimates: weightkit's llama.cpp engine against llama.cpp's own no_alloc load, in one run, as ratios.

    python benchmarks/bench_memory.py [--repeat N]

What llama-server's --fit does for each setting it tries is load the model and make a context without
allocating (libllama's `no_alloc`): that is the peer. weightkit answers the same question from the file's
metadata (open, read the hyperparameters, build and allocate the graph on paper). Both sides get the same
skeleton GGUFs (real shapes, no weights: tests/data/memory_models.py) at llama-server's defaults with
-c 32768, and the real Gemma 3 270M file; the peer needs llama-cpp-python 0.3.36 (tools/llama_oracle.py).
Every pair of answers is checked equal (KV cache and compute buffer bytes) before it is timed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
import weightkit
from _common import best_of, gemma_path
from weightkit.memory import LlamaCppSettings, estimate

MODELS = [
    "llama-128-layers-262k-vocab",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "qwen3-30b-a3b",
    "gemma-3-12b",
    "gpt-oss-20b",
    "granite-4.0-h-tiny",
    # the 2026 architectures (skeletons the reference converter wrote from transformers' defaults)
    "gemma4-default",
    "gemma4-26b-a4b",
    "gemma4-48-layers",
    "gemma3n-default",
    "qwen3_5-default",
    "qwen3_5_moe-default",
    "qwen3_next-default",
    "qwen3_next-24-layers",
    "glm-4.5-air",
    "llama4-default",
    "mistral3-default",
    "mistral4-default",
    "nemotron_h-3-nano-30b-a3b",
    "kimi_linear-48b-a3b",
    "deepseek_v32-default",
    "glm_moe_dsa-default",
    "qwen3.8-flash-next",
]
SETTINGS = LlamaCppSettings(ctx_size=32768)


def test_data_script(name: str):
    """A script of tests/data, loaded as a module."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / f"tests/data/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def skeletons(folder: Path) -> dict[str, Path]:
    module = test_data_script("memory_models")
    return {name: module.write_model(name, folder) for name in MODELS}


def weightkit_estimate(path: Path) -> tuple[int, int]:
    """Open the file and estimate: what a user of `weightkit estimate` waits for."""
    with weightkit.open(path) as m:
        return estimate_opened(m)


def estimate_opened(model) -> tuple[int, int]:
    cpu = estimate(model, SETTINGS).devices[-1]
    return cpu.kv, cpu.compute


def _context_fields() -> dict:
    params = SETTINGS.context_params()
    return {"n_ctx": params.n_ctx, "n_batch": params.n_batch, "n_ubatch": params.n_ubatch,
            "n_seq_max": params.n_seq_max, "kv_unified": params.kv_unified, "swa_full": params.swa_full,
            "n_outputs_max": params.n_outputs_max}  # fmt: skip


def llama_cpp_load(oracle, path: Path) -> None:
    """What fit pays for each setting it tries: load the model and make the context (which reserves the graphs)."""
    oracle.load(path, **_context_fields()).close()


def llama_cpp_answer(oracle, path: Path) -> tuple[int, int]:
    """llama.cpp's KV cache (and recurrent state) bytes, and its compute buffer, for the equality check."""
    with oracle.load(path, **_context_fields()) as ctx:
        batch = ctx.reserve_batch()
        names = ("cache_", *(f"{name}-" for name in test_data_script("make_llama_memory").RENAMED_STATES))
        caches = sum(t.nbytes for t in ctx.graph(*batch).leafs if t.name.startswith(names))
        return caches, sum(ctx.compute_bytes(*batch))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="best of N runs")
    args = ap.parse_args()
    try:
        from llama_oracle import LlamaOracle
    except ImportError:
        sys.exit("needs llama-cpp-python 0.3.36 as the peer: pip install llama-cpp-python==0.3.36")
    oracle = LlamaOracle()
    print("estimate at llama-server's defaults, -c 32768 (ratio: weightkit's speed relative to llama.cpp's)")
    print(f"  {'model':<28} {'llama.cpp no_alloc':>18} {'weightkit':>11} {'ratio':>7} {'opened file':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        paths = {**skeletons(Path(tmp)), "gemma-3-270m (real)": gemma_path()}
        for name, path in paths.items():
            ours = weightkit_estimate(path)
            theirs = llama_cpp_answer(oracle, path)
            if ours != theirs:
                sys.exit(f"{name}: weightkit says KV, compute = {ours}, llama.cpp {theirs}")
            peer, _ = best_of(lambda path=path: llama_cpp_load(oracle, path), args.repeat)
            mine, _ = best_of(lambda path=path: weightkit_estimate(path), args.repeat)
            with weightkit.open(path) as m:
                opened, _ = best_of(lambda m=m: estimate_opened(m), args.repeat)
            print(f"  {name:<28} {peer * 1000:15.1f} ms {mine * 1000:8.1f} ms {peer / mine:6.1f}x "
                  f"{opened * 1000:9.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
