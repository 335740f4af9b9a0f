"""Skeleton LoRA adapters (tensor infos and a data hole, as tests/data/memory_models.py's models) for the
real-size skeleton models, so that libllama's graph with an adapter applied can be recorded where a tiny model's
cannot show it (tests/data/make_lora_compute.py) and weightkit's compared with it (tests/convert/test_lora.py).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import weightkit
from weightkit.gguf import GGUFValueType, Value, plan_tensor, write_gguf_skeleton

#: (skeleton model of memory_models.py, the weights adapted, rank, n_ctx, flash attention); llama-server's other
#: defaults (4 sequences in one unified cache)
GRAPHS = [
    ("llama-3.1-8b", ("attn_q", "attn_v", "ffn_gate", "ffn_up", "ffn_down", "output"), 64, 256, "on"),
    ("llama-3.1-8b", ("token_embd", "attn_k", "attn_output"), 16, 4096, "off"),
    ("qwen3-30b-a3b", ("attn_q", "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"), 16, 256, "on"),
    ("gemma-3-12b", ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"), 32, 1024, "on"),
    ("gpt-oss-20b", ("attn_q", "attn_output", "ffn_gate_exps", "ffn_down_exps", "output"), 8, 256, "on"),
    ("granite-4.0-h-tiny", ("attn_q", "ssm_in", "ssm_out", "ffn_up_shexp", "ffn_down_exps"), 8, 256, "on"),
    ("glm-4.5-air", ("attn_q", "attn_v", "ffn_up_exps", "ffn_gate_shexp", "ffn_down"), 8, 512, "off"),
]


def adapter_name(case: tuple) -> str:
    model, targets, rank, _, _ = case
    return f"{model}-{'+'.join(targets)}-r{rank}"


def write_adapter(model_path: Path, targets: tuple[str, ...], rank: int, path: Path) -> Path:
    """A skeleton LoRA adapter of `model_path` adapting every `<target>.weight` (of each layer) at `rank`, F16:
    A (rank x in) and B (out x rank), an expert matrix's per expert, the token embeddings' flipped (as
    convert_lora_to_gguf.py writes them)."""
    with weightkit.open(model_path) as model:
        arch = model.metadata["general.architecture"]
        shapes = {name: info.shape for name, info in model.tensors.items()}
    planned = []
    for name, shape in shapes.items():
        if name.rpartition(".")[0].rpartition(".")[2] not in targets or len(shape) < 2:
            continue
        *experts, n_out, n_in = shape
        if name == "token_embd.weight":
            a, b = (n_out, rank), (n_in, rank)
        else:
            a, b = (*experts, rank, n_in), (*experts, n_out, rank)
        planned += [plan_tensor(f"{name}.lora_a", a, "F16"), plan_tensor(f"{name}.lora_b", b, "F16")]
    text = GGUFValueType.STRING
    metadata = {"general.architecture": Value(arch, text), "general.type": Value("adapter", text),
                "adapter.type": Value("lora", text),
                "adapter.lora.alpha": Value(16.0, GGUFValueType.FLOAT32)}  # fmt: skip
    write_gguf_skeleton(path, metadata, planned)
    return path


def graph_digest(nodes: list[tuple[str, tuple[int, ...]]]) -> str:
    """A graph's nodes in order, each its op (a unary op's family) and shape, as one SHA-256."""
    return hashlib.sha256(json.dumps([[op, list(ne)] for op, ne in nodes]).encode()).hexdigest()
