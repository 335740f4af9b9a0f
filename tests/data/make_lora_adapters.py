"""Tiny PEFT LoRA adapters of the tiny checkpoints of make_hf_checkpoints.py, for the `convert --lora` tests.

Each adapter is written as peft saves one: adapter_config.json, adapter_model.safetensors (lora_A (r, in) and
lora_B (out, r) per targeted linear module, lora_embedding_A (r, vocab) and lora_embedding_B (hidden, r) per
targeted embedding, under `base_model.model.`; a targeted embedding or lm_head also whole, as `base_layer.weight`;
DoRA adds each module's lora_magnitude_vector) and README.md.
The tensors are made here from numpy (fixed seeds, so deterministic); the two text files are the ones peft
0.21.2 wrote for the same adapter, recorded by make_lora_golden.py into lora_golden.json, so that the tests
need no peft. make_lora_golden.py checks that peft saves exactly these tensors.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import make_hf_checkpoints
import numpy as np

from weightkit.convert.hf import convert_hf, convert_lora
from weightkit.safetensors import write_safetensors

PREFIX = "base_model.model."
LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
EMBEDDINGS = ("embed_tokens",)
#: targeted layers peft saves whole beside their pair (`save_embedding_layers="auto"`), as `base_layer.weight`
SAVED_WHOLE = ("embed_tokens", "lm_head")


@dataclass(frozen=True)
class Adapter:
    """One test adapter: its base checkpoint (of make_hf_checkpoints.CHECKPOINTS) and its LoraConfig."""

    base: str
    r: int
    lora_alpha: float
    target_modules: tuple[str, ...]
    use_dora: bool = False
    alora_invocation_tokens: tuple[int, ...] = ()  # an activated LoRA's
    # parameters (not modules) adapted: experts' fused 3-D weights as transformers 5 holds them (peft's
    # ParamWrapper); such an adapter is made with transformers 5 (make_lora_golden.py's --python-tf5)
    target_parameters: tuple[str, ...] = ()

    def lora_config(self) -> dict[str, Any]:
        """The LoraConfig arguments peft is given for it (besides task_type)."""
        config = {"r": self.r, "lora_alpha": self.lora_alpha, "target_modules": list(self.target_modules),
                  "use_dora": self.use_dora}  # fmt: skip
        if self.alora_invocation_tokens:
            config["alora_invocation_tokens"] = list(self.alora_invocation_tokens)
        if self.target_parameters:
            config["target_parameters"] = list(self.target_parameters)
        return config


ADAPTERS: dict[str, Adapter] = {
    # attention and MLP projections, Q/K/V biases in the base (not adapted)
    "lora-qwen2": Adapter("tiny-qwen2", 4, 8, ("q_proj", "v_proj", "down_proj")),
    # every linear module, rank 8, fractional alpha; Q/K norms in the base
    "lora-qwen3": Adapter("tiny-qwen3", 8, 4.5, LINEAR),
    # Q and K: the converter's rope permutation applies to lora_B's rows
    "lora-llama-2": Adapter("tiny-llama-2-chat", 2, 16, ("q_proj", "k_proj", "o_proj", "up_proj")),
    # embeddings: lora_embedding_A/B (token_embd's lora_a is transposed)
    "lora-llama-2-embed": Adapter("tiny-llama-2-chat", 4, 4, ("embed_tokens", "q_proj")),
    # an lm_head the base keeps
    "lora-llama-2-lm-head": Adapter("tiny-llama-2-chat", 4, 8, ("lm_head", "v_proj")),
    # Gemma 3's text model
    "lora-gemma-3": Adapter("tiny-gemma-3", 4, 8, ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj")),
    # Mistral: the Q/K rope permutation with fewer K/V heads
    "lora-mistral": Adapter("tiny-mistral-v0.1", 4, 8, ("q_proj", "k_proj", "v_proj")),
    # Phi-3: the fused Q/K/V and gate/up projections, written fused
    "lora-phi-3": Adapter("tiny-phi-3-mini", 4, 16, ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")),
    # a mixture of experts' attention (its experts not adapted)
    "lora-qwen3moe-attention": Adapter("tiny-qwen3moe", 2, 2, ("q_proj", "k_proj", "v_proj", "o_proj")),
    # an activated LoRA: its invocation tokens in the metadata
    "lora-qwen2-alora": Adapter("tiny-qwen2", 4, 8, ("q_proj", "v_proj"), alora_invocation_tokens=(151644, 77091)),
    # refused: DoRA's magnitude vectors are neither lora_A nor lora_B
    "lora-qwen2-dora": Adapter("tiny-qwen2", 4, 8, ("q_proj", "v_proj"), use_dora=True),
    # a mixture of experts' experts, each expert's projections adapted (transformers 4's per-expert modules): the
    # converter stacks the layer's lora_A and lora_B as it stacks the experts
    "lora-qwen3moe-experts": Adapter("tiny-qwen3moe", 2, 4, ("gate_proj", "up_proj", "down_proj")),
    # refused: the experts' fused 3-D weights adapted (transformers 5's, peft's target_parameters): the pairs
    # are named after the experts module, which the converter's expert stacking never completes
    "lora-qwen3moe-expert-params": Adapter(
        "tiny-qwen3moe", 2, 4, (), target_parameters=("mlp.experts.gate_up_proj", "mlp.experts.down_proj")
    ),
    # Mixtral's experts (w1, w2, w3 of each, as transformers 4 loads the checkpoint), stacked the same way
    "lora-mixtral-experts": Adapter("tiny-mixtral", 2, 4, ("w1", "w2", "w3")),
    # refused: its fused gate_up_proj (transformers 5), a pair under a name the converter cannot map
    "lora-mixtral-expert-params": Adapter("tiny-mixtral", 2, 4, (), target_parameters=("mlp.experts.gate_up_proj",)),
}
#: the fused expert weights transformers 5 holds ([experts, out, in]) by parameter, from the base's config.json
#: (Qwen3-MoE's expert count and size, else Mixtral's)
FUSED_EXPERTS = {
    "mlp.experts.gate_up_proj": lambda c: (_experts(c), 2 * _expert_size(c), c["hidden_size"]),
    "mlp.experts.down_proj": lambda c: (_experts(c), c["hidden_size"], _expert_size(c)),
}


def _experts(config: dict[str, Any]) -> int:
    return config.get("num_experts") or config["num_local_experts"]


def _expert_size(config: dict[str, Any]) -> int:
    return config.get("moe_intermediate_size") or config["intermediate_size"]


def base_shapes(base: str) -> dict[str, tuple[int, ...]]:
    """The base checkpoint's tensor shapes, from make_hf_checkpoints' declaration (no weights made)."""
    config, _, shapes, *_ = make_hf_checkpoints.CHECKPOINTS[base]
    return {name: tuple(shape) for name, shape in shapes(config).items()}


def parameter_shapes(adapter: Adapter) -> dict[str, tuple[int, ...]]:
    """The pairs peft saves for `adapter`'s target_parameters: each parameter wraps the experts module again, so
    the first one's pair sits deepest (`experts.base_layer.lora_A.weight`); lora_A is (r * experts, in) and lora_B
    (out, r * experts)."""
    config = make_hf_checkpoints.CHECKPOINTS[adapter.base][0]
    out: dict[str, tuple[int, ...]] = {}
    for bid in range(config["num_hidden_layers"]):
        for i, param in enumerate(adapter.target_parameters):
            module, _, _ = param.rpartition(".")
            wrapped = f"{PREFIX}model.layers.{bid}.{module}" + ".base_layer" * (len(adapter.target_parameters) - 1 - i)
            experts, rows, cols = FUSED_EXPERTS[param](config)
            out |= {f"{wrapped}.lora_A.weight": (adapter.r * experts, cols),
                    f"{wrapped}.lora_B.weight": (rows, adapter.r * experts)}  # fmt: skip
    return out


def adapter_shapes(adapter: Adapter) -> dict[str, tuple[int, ...]]:
    """Every tensor peft saves for `adapter`, with its shape."""
    out: dict[str, tuple[int, ...]] = parameter_shapes(adapter) if adapter.target_parameters else {}
    for name, shape in base_shapes(adapter.base).items():
        module, _, kind = name.rpartition(".")
        if kind != "weight" or module.rpartition(".")[2] not in adapter.target_modules:
            continue
        rows, cols = shape
        if module.rpartition(".")[2] in SAVED_WHOLE:
            out[f"{PREFIX}{module}.base_layer.weight"] = (rows, cols)  # peft saves the layer it adapts too
        if module.rpartition(".")[2] in EMBEDDINGS:
            out |= {f"{PREFIX}{module}.lora_embedding_A": (adapter.r, rows),
                    f"{PREFIX}{module}.lora_embedding_B": (cols, adapter.r)}  # fmt: skip
            continue
        out |= {f"{PREFIX}{module}.lora_A.weight": (adapter.r, cols),
                f"{PREFIX}{module}.lora_B.weight": (rows, adapter.r)}  # fmt: skip
        if adapter.use_dora:
            out[f"{PREFIX}{module}.lora_magnitude_vector"] = (rows,)
    return out


def adapter_tensors(name: str) -> dict[str, np.ndarray]:
    """Adapter `name`'s tensors: N(0, 0.05^2) float32 values (peft keeps adapters in float32), one seed per adapter;
    a layer saved whole is the base checkpoint's (in its dtype)."""
    adapter = ADAPTERS[name]
    rng = np.random.default_rng(sum(name.encode()))
    out: dict[str, np.ndarray] = {}
    base: dict[str, np.ndarray] | None = None
    for key, shape in sorted(adapter_shapes(adapter).items()):
        if key.endswith(".base_layer.weight"):
            if base is None:
                config, dtype, shapes, *_ = make_hf_checkpoints.CHECKPOINTS[adapter.base]
                base = make_hf_checkpoints._weights(shapes(config), dtype, sum(adapter.base.encode()))
            out[key] = base[key.removeprefix(PREFIX).replace(".base_layer", "")]
        else:
            out[key] = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.05)
    return out


def build(name: str, root: Path, files: dict[str, str]) -> Path:
    """Write adapter `name` into root/name (replacing it) with peft's text `files` (name -> text) and return it."""
    folder = root / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    write_safetensors(folder / "adapter_model.safetensors", adapter_tensors(name), {"format": "pt"})
    for rel, text in files.items():
        (folder / rel).write_text(text, encoding="utf-8")
    return folder


def recorded_files(golden: dict[str, Any], name: str) -> dict[str, str]:
    """The text files peft wrote for adapter `name`, as make_lora_golden.py recorded them."""
    return golden["adapters"][name]["files"]


def converted(root: Path, name: str, outtype: str) -> tuple[Path, Path]:
    """The GGUFs of tiny adapter `name` (converted by weightkit at `outtype`, the bytes lora_golden.json records as
    the reference's) and of its base (f16), made once in `root`."""
    golden = json.loads((Path(__file__).parent / "lora_golden.json").read_text())
    base = ADAPTERS[name].base
    folder = make_hf_checkpoints.build(base, root / "bases")
    model = root / f"{base}.gguf"
    if not model.exists():
        convert_hf(folder, model, "f16")
    adapter = build(name, root / "adapters", recorded_files(golden, name))
    path = root / f"{name}-{outtype}.gguf"
    if not path.exists():
        convert_lora(adapter, path, folder, outtype)
    return model, path
