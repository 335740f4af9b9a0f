"""Granite 3 (dense), Granite's mixture of experts and Granite 4.0-H: `GraniteModel`, `GraniteMoeModel` and
`GraniteHybridModel` of llama.cpp's converter. Granite 3 is Llama's conversion under the `granite` and `granitemoe`
architectures, with config.json's `head_dim` ignored and Granite's four multipliers written as scales; the experts'
fused gate and up projections (`block_sparse_moe.input_linear`, JetMoE's layout) are split in two.

Granite 4.0-H (`granitehybrid`) is Granite MoE whose layers are Mamba2 mixers (`mamba.*`) but for the attention
layers `layer_types` names, with a shared MLP (gate and up fused) beside the experts, or in their place in the
dense models; its config.json is read as written (`Mamba2Model` bypasses `AutoConfig`), its vocabulary padded to a
multiple of 8, and it has no rope. transformers 5.x saves `layer_types` as "linear_attention"/"full_attention",
which the reference reads as all Mamba2 (a file llama.cpp cannot use); weightkit reads them as the
"mamba"/"attention" of the released checkpoints."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ...errors import FormatError, UnsupportedError
from ..hf.config import CONFIG_NAME, ConfigClass, HFConfig
from ..hf.experts import Tensors, derived_tensor, gate_and_up
from ..hf.kv import KV
from ..hf.parameters import LAYERS, write_text_parameters
from ..hf.tokenizer import SPM_MODEL, write_bpe_vocab, write_sentencepiece_vocab
from ..hf.tokenizer.fast import TOKENIZER_JSON
from . import llama
from .decoder import (
    A_FROM_A_LOG,
    DECODER_NAMES,
    DECODER_REQUIRED,
    DENSE_FFN,
    FF,
    H,
    dt_bias_as_bias,
    kv_heads_default_to_heads,
    moe_required,
    number,
    rope_parameters_of_5x,
    squeeze_conv,
)
from .family import Conversion, Family

#: config.json's multiplier -> the GGUF key after "{arch}." it is written to (when given and not zero)
_SCALES = (("attention_multiplier", "attention.scale"), ("embedding_multiplier", "embedding_scale"),
           ("residual_multiplier", "residual_scale"), ("logits_scaling", "logit_scale"))  # fmt: skip


def _without_head_dim(h: HFConfig) -> HFConfig:
    return HFConfig({k: v for k, v in h.items() if k != "head_dim"})


def _text_parameters(kv: KV, arch: str, h: HFConfig, rope: dict[str, Any], file_type: int) -> None:
    """`GraniteModel.set_gguf_parameters` pops `head_dim` first: no key/value length is written."""
    write_text_parameters(kv, arch, _without_head_dim(h), rope, file_type)


def _granite_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """Llama's vocabulary size and rope dimension (from the hidden size: `head_dim` is ignored), then the
    multipliers."""
    kv.u32(f"{arch}.vocab_size", h["vocab_size"])
    kv.u32(f"{arch}.rope.dimension_count", h["hidden_size"] // h["num_attention_heads"])
    for key, gguf in _SCALES:
        if h.get(key):
            kv.f32(f"{arch}.{gguf}", number(h, key))


_GRANITE: Conversion = replace(
    llama.FAMILY.conversions["LlamaForCausalLM"],
    gguf="granite",
    text_parameters=_text_parameters,
    parameters=(_granite_parameters,),
)

_MOE_NAMES = {
    "model.layers.{bid}.block_sparse_moe.router.layer": "blk.{bid}.ffn_gate_inp",
    "model.layers.{bid}.block_sparse_moe.output_linear": "blk.{bid}.ffn_down_exps",
    # the halves of `input_linear` (`_split_input_linear`)
    "model.layers.{bid}.block_sparse_moe.input_linear.gate": "blk.{bid}.ffn_gate_exps",
    "model.layers.{bid}.block_sparse_moe.input_linear.up": "blk.{bid}.ffn_up_exps",
}


def _split_input_linear(tensors: Tensors, h: HFConfig) -> Tensors:
    """`GraniteMoeModel.modify_tensors`: the experts' `input_linear` [experts, 2 * ff, hidden] is their gate and
    up projections, written as such where it was."""
    out: Tensors = []
    for name, t in tensors:
        if name.endswith("block_sparse_moe.input_linear.weight"):
            base = name.removesuffix(".weight")
            out.extend(gate_and_up(t, base + ".gate.weight", base + ".up.weight"))
        else:
            out.append((name, t))
    return out


def _shared_expert_length(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`GraniteMoeModel.set_gguf_parameters`'s addition: the shared expert's size, where it has one."""
    if size := h.get("shared_intermediate_size"):
        kv.u32(f"{arch}.expert_shared_feed_forward_length", size)


_GRANITE_MOE: Conversion = replace(
    _GRANITE,
    gguf="granitemoe",
    tensor_names={k: v for k, v in _GRANITE.tensor_names.items() if ".mlp." not in k} | _MOE_NAMES,
    required={k: v for k, v in DECODER_REQUIRED.items() if k not in DENSE_FFN} | moe_required("num_local_experts", FF),
    parameters=(_granite_parameters, _shared_expert_length),
    rewrites=(_split_input_linear,),
)

# --- Granite 4.0-H ---------------------------------------------------------------------------------------------


def _find(h: HFConfig, *keys: str) -> Any:
    """`GraniteHybridModel.find_hparam`: the first of `keys`, then of the same keys prefixed with `mamba_`."""
    keys = (*keys, *(f"mamba_{k}" for k in keys))
    value = h.find(keys, None)
    if value is None:
        raise FormatError(CONFIG_NAME, None, f"none of {', '.join(keys)} is given")
    return value


#: `layer_types` entries of an attention layer: the released checkpoints' (transformers 4.x), and what 5.x saves
_ATTENTION_KINDS = ("attention", "full_attention")


def _attention_layers(h: HFConfig) -> list[int]:
    """`GraniteHybridModel.get_attn_layers`: by `layer_types`, else `attn_layer_indices`, else every
    `attn_layer_period`-th layer from `attn_layer_offset`."""
    if kinds := h.get("layer_types"):
        return [i for i, kind in enumerate(kinds) if kind in _ATTENTION_KINDS]
    if indices := h.get("attn_layer_indices"):
        return list(indices)
    period, offset = h.get("attn_layer_period"), h.get("attn_layer_offset")
    if not period or offset is None:
        raise FormatError(CONFIG_NAME, None, "no layer_types, attn_layer_indices or attn_layer_period and "
                                             "attn_layer_offset: which layers are attention is not said")  # fmt: skip
    return [i for i in range(h.find(LAYERS)) if i % period == offset]


def _check_hybrid(folder: Path, h: HFConfig) -> None:
    """A Granite 4 whose every layer is attention the reference writes as Granite 3 (`granite`/`granitemoe`)."""
    if len(_attention_layers(h)) >= h.find(LAYERS):
        raise UnsupportedError(f"{folder / CONFIG_NAME}: every layer is attention; llama.cpp's converter writes such "
                               "a checkpoint as Granite 3, which weightkit does not do for this class")  # fmt: skip
    if h.get("hidden_act") not in (None, "silu"):
        raise UnsupportedError(f"{folder / CONFIG_NAME}: hidden_act {h.get('hidden_act')!r}: only silu is supported")


def _inner_size(h: HFConfig) -> int:
    """The Mamba2 mixer's inner size: its expansion times the model's width."""
    return _find(h, "expand", "num_heads") * _find(h, "mamba_head_dim", "hidden_size", "d_model")


def _hybrid_parameters(kv: KV, arch: str, folder: Path, h: HFConfig) -> None:
    """`GraniteHybridModel.set_gguf_parameters` after Granite MoE's: the Mamba2 sizes, the KV heads of each layer
    (none in Mamba2 layers), and no rope: rope scaling not fine-tuned and the context length unbounded."""
    inner = _inner_size(h)
    if inner % (head := h.find(("d_head", "mamba_d_head"), None) or 64):
        raise FormatError(folder / CONFIG_NAME, None, f"the Mamba2 inner size {inner} is not a multiple of {head}")
    kv.u32(f"{arch}.ssm.conv_kernel", _find(h, "conv_kernel", "d_conv"))
    kv.u32(f"{arch}.ssm.state_size", _find(h, "state_size", "d_state", "state_dim", "ssm_state_size"))
    kv.u32(f"{arch}.ssm.group_count", _find(h, "n_groups", "num_groups"))
    kv.u32(f"{arch}.ssm.inner_size", inner)
    kv.u32(f"{arch}.ssm.time_step_rank", _find(h, "n_heads", "num_heads"))
    attention = set(_attention_layers(h))
    kv_heads = _find(h, "num_key_value_heads", "n_head_kv")
    heads = [kv_heads if i in attention else 0 for i in range(h.find(LAYERS))]
    if rope_dim := h.get("attn_rotary_emb"):
        kv.u32(f"{arch}.rope.dimension_count", rope_dim)
    kv.array(f"{arch}.attention.head_count_kv", heads, CONFIG_NAME)
    kv.bool(f"{arch}.rope.scaling.finetuned", False)
    kv.u32(f"{arch}.context_length", 2**20)


def _hybrid_vocab(kv: KV, folder: Path, h: HFConfig) -> None:
    """`Mamba2Model.set_vocab` (Granite 4.0-H pads to a multiple of 8): SentencePiece or GPT-2 BPE, over the
    padded vocabulary size."""
    padded = HFConfig({**h, "vocab_size": -(h["vocab_size"] // -8) * 8})
    if (folder / SPM_MODEL).is_file():
        write_sentencepiece_vocab(kv, folder, padded)
    elif (folder / TOKENIZER_JSON).is_file():
        write_bpe_vocab(kv, folder, padded)
    else:
        raise UnsupportedError(f"{folder}: no tokenizer.model or tokenizer.json (llama.cpp's converter would write "
                               "GPT-NeoX's built-in vocabulary, which weightkit does not have)")  # fmt: skip


def _split_shared_mlp(tensors: Tensors, h: HFConfig) -> Tensors:
    """`GraniteMoeModel.modify_tensors`: the shared MLP's fused `input_linear` is its gate and up projections;
    with experts it is their shared expert, without them the layer's feed-forward network."""
    experts = bool(h.get("num_local_experts"))
    out: Tensors = []
    for name, t in tensors:
        if name.endswith("shared_mlp.input_linear.weight"):
            prefix = name.removesuffix("shared_mlp.input_linear.weight")
            halves = ("shared_mlp.gate", "shared_mlp.up") if experts else ("mlp.gate_proj", "mlp.up_proj")
            out.extend(gate_and_up(t, *(f"{prefix}{half}.weight" for half in halves)))
        elif name.endswith("shared_mlp.output_linear.weight") and not experts:
            out.append((name.replace("shared_mlp.output_linear", "mlp.down_proj"), t))
        else:
            out.append((name, t))
    return out


def _mamba2_shapes(tensors: Tensors, h: HFConfig) -> Tensors:
    """`Mamba2Model.modify_tensors`: A and D get a trailing axis of one; the grouped norm is [groups, inner /
    groups]."""
    groups = _find(h, "n_groups", "num_groups")
    out: Tensors = []
    for name, t in tensors:
        shape = None
        if name.endswith((".mamba.A_log", ".mamba.D")):
            shape = (*t.shape, 1)
        elif name.endswith(".mamba.norm.weight"):
            shape = (groups, _inner_size(h) // groups)
        if shape is not None:
            t = derived_tensor(t, name, shape, lambda t=t, shape=shape: t.read().reshape(shape))
        out.append((name, t))
    return out


_M = "model.layers.{bid}.mamba."
_HYBRID_NAMES = {
    _M + "in_proj": "blk.{bid}.ssm_in",
    _M + "conv1d": "blk.{bid}.ssm_conv1d",
    _M + "dt_proj": "blk.{bid}.ssm_dt",
    _M + "A_log": "blk.{bid}.ssm_a",
    _M + "D": "blk.{bid}.ssm_d",
    _M + "norm": "blk.{bid}.ssm_norm",
    _M + "out_proj": "blk.{bid}.ssm_out",
    "model.layers.{bid}.shared_mlp.gate": "blk.{bid}.ffn_gate_shexp",
    "model.layers.{bid}.shared_mlp.up": "blk.{bid}.ffn_up_shexp",
    "model.layers.{bid}.shared_mlp.output_linear": "blk.{bid}.ffn_down_shexp",
}
_GRANITE_HYBRID: Conversion = replace(
    _GRANITE_MOE,
    gguf="granitehybrid",
    tensor_names=_GRANITE_MOE.tensor_names | {k: v for k, v in DECODER_NAMES.items() if ".mlp." in k} | _HYBRID_NAMES,
    required={"token_embd.weight": (None, H), "output_norm.weight": (H,), "blk.{bid}.attn_norm.weight": (H,),
              "blk.{bid}.ffn_norm.weight": (H,)},
    vocab=_hybrid_vocab,
    filters=(*_GRANITE_MOE.filters, dt_bias_as_bias),
    transforms=(*_GRANITE_MOE.transforms, A_FROM_A_LOG),
    parameters=(*_GRANITE_MOE.parameters, _hybrid_parameters),
    checks=(*_GRANITE_MOE.checks, _check_hybrid),
    rewrites=(_split_input_linear, _split_shared_mlp, squeeze_conv("mamba.conv1d"), _mamba2_shapes),
)  # fmt: skip

#: What GraniteConfig and GraniteMoeConfig (transformers 5.25) default alike.
_DEFAULTS = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu",
             "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "pad_token_id": None, "bos_token_id": 1,
             "eos_token_id": 2, "tie_word_embeddings": False, "attention_bias": False, "embedding_multiplier": 1.0,
             "logits_scaling": 1.0, "residual_multiplier": 1.0, "attention_multiplier": 1.0}  # fmt: skip

FAMILY = Family(
    name="granite",
    configs={
        # transformers 5.25's
        "granite": ConfigClass(
            "GraniteConfig",
            _DEFAULTS | {"mlp_bias": False},
            (kv_heads_default_to_heads, rope_parameters_of_5x(10000.0)),
            transformers=5,
        ),
        "granitemoe": ConfigClass(
            "GraniteMoeConfig",
            _DEFAULTS | {"num_local_experts": 8, "num_experts_per_tok": 2},
            (kv_heads_default_to_heads, rope_parameters_of_5x(10000.0)),
            transformers=5,
        ),
        # transformers 4.57.6's and 5.25's read as written: `Mamba2Model` reads config.json itself
        "granitemoehybrid": ConfigClass("GraniteMoeHybridConfig", {}),
    },
    conversions={"GraniteForCausalLM": _GRANITE, "GraniteMoeForCausalLM": _GRANITE_MOE,
                 "GraniteMoeHybridForCausalLM": _GRANITE_HYBRID},
)  # fmt: skip
