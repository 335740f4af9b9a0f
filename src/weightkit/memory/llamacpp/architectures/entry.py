"""One architecture as the llama.cpp engine knows it (`LlamaCppArchitecture`): the function that builds its graph
and what of its `load_arch_hparams` (`src/models/<arch>.cpp`) bears on memory; and the reading every entry
shares, `llama_model_base::load_hparams` run with the entry's switches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ....errors import FormatError
from ....gguf.values import array_length
from ....model import ModelFile
from ..ggml import Graph
from ..graph_builder import GraphBuilder
from ..hparams import SWA_STANDARD, LlamaCppHParams

MAX_LAYERS = 512  # LLAMA_MAX_LAYERS
UNPREFIXED = ("general.", "tokenizer.", "xielu.")  # keys llama.cpp names without the architecture's prefix
#: which layers are recurrent: every one (Mamba, RWKV), those with no KV heads (hybrids), or those
#: `attention.recurrent_layers` marks, else all but every `full_attention_interval`-th (gated delta-net hybrids);
#: or every one with attention beside it in every layer too (Falcon-H1's parallel mixers); or those with neither KV
#: heads nor an FFN, the layers with no FFN and KV heads attending (Nemotron-H's Mamba-2, attention and FFN layers)
RECURRENT = ("all", "no_kv_heads", "interval", "parallel", "no_kv_heads_or_ffn")


class _Keys:
    """Metadata access as llama_model_loader's get_key / get_key_or_arr / get_arr, naming the key on failure."""

    def __init__(self, model: ModelFile, arch: str) -> None:
        self.metadata, self.arch, self.path = model.metadata, arch, getattr(model, "path", None)

    def name(self, key: str) -> str:
        return key if key.startswith(UNPREFIXED) else f"{self.arch}.{key}"

    def error(self, reason: str) -> FormatError:
        return FormatError(self.path, None, reason)

    def require(self, key: str) -> None:
        """A key llama.cpp insists on (`get_key`, `get_key_or_arr` without `required = false`)."""
        if self.name(key) not in self.metadata:
            raise self.error(f"{self.name(key)} is missing: llama.cpp needs it to load a {self.arch} model")

    def get(self, key: str, default: Any = None, *, required: bool = False) -> Any:
        full = self.name(key)
        if full not in self.metadata:
            if required:
                self.require(key)
            return default
        value = self.metadata[full]
        if isinstance(value, np.ndarray) or (isinstance(value, list) and not isinstance(default, list)):
            raise self.error(f"{full} is an array; llama.cpp reads a single value there")
        return value

    def number(self, key: str, default: int = 0, *, required: bool = False) -> int:
        value = self.get(key, default, required=required)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise self.error(f"{self.name(key)} is {value!r}, not a count")
        return int(value)

    def per_layer(self, key: str, n: int, default: tuple[int, ...]) -> tuple[int, ...]:
        """`get_key_or_arr`: a number for every layer, or an array of exactly one per layer."""
        full = self.name(key)
        if full not in self.metadata:
            return default
        value = self.metadata[full]
        if isinstance(value, (np.ndarray, list)):
            if len(value) != n:
                raise self.error(f"{full} has {len(value)} entries; the model has {n} layers")
            return tuple(int(v) for v in value)
        return (self.number(key),) * n

    def array(self, key: str) -> list | None:
        full = self.name(key)
        value = self.metadata.get(full)
        return None if value is None else list(value)


@dataclass(frozen=True)
class SlidingWindow:
    """How an architecture marks sliding-window layers (`load_swa_pattern(n_pattern, dense_first)`)."""

    pattern: int
    dense_first: bool = False
    type: str = SWA_STANDARD
    default_window: int | None = None  # gemma2's 4096; None: the key decides (absent or 0: no SWA)
    fixed_window: bool = False  # llama4: the window is default_window whatever the key says, unless it says 0
    window_required: bool = False
    pattern_required: bool = False  # the per-layer array must be there (gemma4's `get_arr`)
    only_n_layer: int | None = None  # no sliding window unless the model has this many layers (EXAONE 4's 64)


@dataclass(frozen=True)
class LlamaCppArchitecture:
    """An architecture's one entry: its graph (`graph`, as `llama_model_<arch>::graph` builds it) and the
    switches of its `load_arch_hparams` that bear on memory, refusals included."""

    graph: Callable[[GraphBuilder], Graph]
    swa: SlidingWindow | None = None
    experts: bool = False  # reads expert_feed_forward_length and friends
    mla: bool = False
    # DeepSeek sparse attention (an indexer cache beside MLA's), its indexers in every layer ("every") or as GLM-DSA
    # marks them ("glm": `attention.indexer.types`, else every layer, or GLM-5.2's pattern past 2**20 tokens)
    dsa: str | None = None
    recurrent: str | None = None  # one of RECURRENT, or None: no layer is
    wkv: bool = False  # RWKV: the state is sized by wkv.head_size and token_shift_count, not by the ssm keys
    shortconv: bool = False  # LFM2: the state is a short convolution's (shortconv.l_cache), not the ssm keys'
    kda: bool = False  # Kimi's KDA: the state is sized by kda.head_dim and ssm.conv_kernel, not the other ssm keys
    qsa: bool = False  # Qwen4-Exp: hyper-connections, QSA's indexer and compress ratios, PLE n-gram embeddings
    required: tuple[str, ...] = ()  # keys llama.cpp insists on that shape only weights (LoRA ranks, ...)
    required_values: tuple[str, ...] = ()  # those of `required` that are not counts (floats, per-layer arrays)
    kv_layers: int | None = None  # only this many first layers have a KV cache, the rest reuse one (gemma3n: 20)
    shared_kv: bool = False  # attention.shared_kv_layers last layers reuse an earlier one's KV cache (gemma4)
    per_layer_input: bool = False  # per-layer embedding inputs of embedding_length_per_layer_input (gemma4)
    gated_q: bool = False  # the attention layers' Q projection carries an output gate as wide (attn_q doubled)
    mrope: bool = False  # M-RoPE: four positions per token, by the sections llama.cpp requires
    deepstack: bool = False  # reads n_deepstack_layers (Qwen3-VL's wider input embedding)
    causal: bool = True
    tied_output: bool = True  # without output.weight the token embeddings serve as the output matrix
    output_norm_embd: bool = False  # the final norm is `token_embd_norm` (`LLM_TENSOR_OUTPUT_NORM_LFM2`)
    rope_freqs_full_attention: bool = False  # only full-attention layers load `rope_freqs` (Gemma 4)
    nextn_loaded: tuple[str, ...] = ()  # NextN layers' tensors the loader creates without the skip flag
    flags: Mapping[str, str] = field(default_factory=dict)  # flag name -> metadata key (a float)
    flag_defaults: Mapping[str, float] = field(default_factory=dict)  # a flag's value without its key (else 0)

    def read_hparams(self, model: ModelFile, arch: str) -> LlamaCppHParams:
        """The hyperparameters llama.cpp loads for `model` of this architecture (`arch`, its name); a FormatError
        names a missing or malformed key."""
        keys = _Keys(model, arch)
        values = _common_hparams(keys)
        values.update(self._own_hparams(keys, values["n_layer_all"], values["n_layer_nextn"], values["n_head_kv"]))
        hp = LlamaCppHParams(**values)
        _check_shapes(keys, hp, model.tensors, 2 if self.gated_q else 1)
        return hp

    def _own_hparams(self, keys: _Keys, n_layer_all: int, n_nextn: int, n_head_kv: tuple[int, ...]) -> dict[str, Any]:
        """What this architecture's `load_arch_hparams` reads, by the entry's switches."""
        values: dict[str, Any] = dict(
            causal=bool(keys.get("attention.causal", self.causal)),
            tied_output=self.tied_output,
            output_norm_embd=self.output_norm_embd,
            rope_freqs_full_attention=self.rope_freqs_full_attention,
            nextn_loaded=self.nextn_loaded,
            is_swa=(False,) * n_layer_all,
            is_recurrent=(self.recurrent == "all",) * n_layer_all,
            flags={name: float(keys.get(key, self.flag_defaults.get(name, 0.0))) for name, key in self.flags.items()},
        )
        if self.swa is not None and self.swa.only_n_layer in (None, n_layer_all - n_nextn):
            values.update(_swa(keys, self.swa, n_layer_all, n_layer_all - n_nextn))
        if self.kv_layers is not None:
            values["n_layer_kv_from_start"] = self.kv_layers
        if self.shared_kv:
            values["n_layer_kv_from_start"] = n_layer_all - keys.number("attention.shared_kv_layers")
        if self.per_layer_input:
            values["n_embd_per_layer"] = keys.number("embedding_length_per_layer_input", required=True)
        if self.experts:
            values["n_ff_exp"] = keys.number("expert_feed_forward_length")
            values["n_ff_shexp"] = keys.number("expert_shared_feed_forward_length")
            values["n_expert_shared"] = keys.number("expert_shared_count")
            values["n_layer_dense_lead"] = keys.number("leading_dense_block_count")
        if self.mla:
            values["n_lora_q"] = keys.number("attention.q_lora_rank")
            values["n_lora_kv"] = keys.number("attention.kv_lora_rank", required=True)
            values["head_k_mla"] = keys.number("attention.key_length_mla")
            values["head_v_mla"] = keys.number("attention.value_length_mla")
        if self.dsa is not None:
            values.update(_dsa(keys, self.dsa, n_layer_all, n_layer_all - n_nextn))
        for key in self.required:
            if key in self.required_values:
                keys.require(key)
            else:
                keys.number(key, required=True)
        if self.mrope:
            if keys.array("rope.dimension_sections") is None:
                raise keys.error(f"{keys.name('rope.dimension_sections')} is missing: llama.cpp needs it for M-RoPE")
            values["n_pos_per_embd"] = 4  # GGML_MROPE_SECTIONS
        if self.deepstack:
            values["n_deepstack_layers"] = keys.number("n_deepstack_layers")
        if self.wkv:
            values.update(_wkv(keys))
        elif self.shortconv:
            values["n_shortconv_l_cache"] = keys.number("shortconv.l_cache", required=True)
        elif self.kda:
            values["n_embd_head_kda"] = keys.number("kda.head_dim", required=True)
            values["ssm_d_conv"] = keys.number("ssm.conv_kernel", required=True)
        elif self.recurrent is not None:
            for name, key in (("ssm_d_conv", "ssm.conv_kernel"), ("ssm_d_inner", "ssm.inner_size"),
                              ("ssm_d_state", "ssm.state_size"), ("ssm_dt_rank", "ssm.time_step_rank"),
                              ("ssm_n_group", "ssm.group_count")):  # fmt: skip
                values[name] = keys.number(
                    key, required=name != "ssm_n_group" or self.recurrent in ("interval", "no_kv_heads_or_ffn")
                )
        if self.recurrent == "no_kv_heads":
            n_layer = n_layer_all - n_nextn
            values["is_recurrent"] = tuple(il < n_layer and n_head_kv[il] == 0 for il in range(n_layer_all))
        if self.recurrent == "parallel":
            values["is_recurrent"] = values["is_attention"] = (True,) * n_layer_all
        if self.recurrent == "no_kv_heads_or_ffn":
            n_layer, n_ff = (
                n_layer_all - n_nextn,
                keys.per_layer("feed_forward_length", n_layer_all, (0,) * n_layer_all),
            )
            recurrent = tuple(il < n_layer and n_head_kv[il] == 0 and n_ff[il] == 0 for il in range(n_layer_all))
            values["is_recurrent"] = recurrent
            values["is_attention"] = tuple(not r and f == 0 for r, f in zip(recurrent, n_ff, strict=True))
        if self.recurrent == "interval":
            values["is_recurrent"] = _recurrent_layers(keys, n_layer_all, n_layer_all - n_nextn)
        if self.qsa:
            values.update(_qsa(keys, values, n_layer_all))
        return values


def _common_hparams(keys: _Keys) -> dict[str, Any]:
    """What `llama_model_base::load_hparams` reads for every architecture."""
    n_layer_all = keys.number("block_count", required=True)
    if not 0 < n_layer_all <= MAX_LAYERS:
        raise keys.error(f"{keys.name('block_count')} is {n_layer_all}; llama.cpp takes 1 to {MAX_LAYERS}")
    n_head = keys.per_layer("attention.head_count", n_layer_all, (0,) * n_layer_all)
    n_head_kv = keys.per_layer("attention.head_count_kv", n_layer_all, n_head)
    n_ff = keys.per_layer("feed_forward_length", n_layer_all, (0,) * n_layer_all)
    n_embd = keys.number("embedding_length", required=True)
    head_k = head_v = n_rot = 0
    if n_head[0] > 0:
        head_k = keys.number("attention.key_length", n_embd // n_head[0])
        head_v = keys.number("attention.value_length", n_embd // n_head[0])
        n_rot = keys.number("rope.dimension_count", head_k)
    return dict(
        arch=keys.arch,
        n_layer_all=n_layer_all,
        n_layer_nextn=keys.number("nextn_predict_layers"),
        n_embd=n_embd,
        n_embd_out_impl=keys.number("embedding_length_out"),
        n_vocab=_vocab_size(keys),
        n_ctx_train=keys.number("context_length", required=True),
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        head_k_full=head_k,
        head_v_full=head_v,
        head_k_swa=keys.number("attention.key_length_swa", head_k),
        head_v_swa=keys.number("attention.value_length_swa", head_v),
        n_rot=n_rot,
        pooling=int(keys.get("pooling_type", -1)),
        n_expert=keys.number("expert_count"),
        n_expert_used=keys.number("expert_used_count"),
        n_expert_groups=keys.number("expert_group_count"),
        n_group_used=keys.number("expert_group_used_count"),
    )


def _check_shapes(keys: _Keys, hp: LlamaCppHParams, tensors: Mapping[str, Any], q_factor: int) -> None:
    """llama.cpp refuses a model whose tensors have other shapes than its metadata makes (`check_tensor_dims`);
    these are the ones the memory rests on: the token embeddings and each attention layer's Q (`q_factor` times
    the heads: a gate beside the queries), K and V."""
    expected = {"token_embd.weight": ((hp.n_vocab, hp.n_embd), ("tokenizer.ggml.tokens", "embedding_length"))}
    for il in range(hp.n_layer):
        if hp.is_recurrent[il] or hp.is_mla:
            continue
        q, k, v = (
            ("attention.head_count", "attention.key_length"),
            ("attention.head_count_kv",),
            ("attention.value_length",),
        )
        expected[f"blk.{il}.attn_q.weight"] = ((q_factor * hp.n_head[il] * hp.head_k(il), hp.n_embd), q)
        expected[f"blk.{il}.attn_k.weight"] = ((hp.n_embd_k_gqa(il), hp.n_embd), (*k, q[1]))
        expected[f"blk.{il}.attn_v.weight"] = ((hp.n_embd_v_gqa(il), hp.n_embd), (*k, *v))
    for name, (shape, source) in expected.items():
        info = tensors.get(name)
        if info is not None and tuple(info.shape) != shape:
            raise keys.error(
                f"tensor {name!r} has shape {list(info.shape)}; {' and '.join(map(keys.name, source))} make it "
                f"{list(shape)}"
                " (llama.cpp refuses the model: wrong shape)"
            )


def _recurrent_layers(keys: _Keys, n_layer_all: int, n_layer: int) -> tuple[bool, ...]:
    """The gated delta-net hybrids' recurrent layers: `attention.recurrent_layers` (one flag per block), else every
    layer but each `full_attention_interval`-th (4 by default); NextN blocks never."""
    if keys.name("attention.recurrent_layers") in keys.metadata:
        return tuple(bool(v) for v in keys.per_layer("attention.recurrent_layers", n_layer_all, ()))
    interval = keys.number("full_attention_interval", 4)
    if interval == 0:
        raise keys.error(f"{keys.name('full_attention_interval')} is 0; llama.cpp divides by it")
    return tuple(il < n_layer and (il + 1) % interval != 0 for il in range(n_layer_all))


#: how the sparse-attention indexers are laid out over the layers (`LlamaCppArchitecture.dsa`)
DSA = ("every", "glm")
#: GLM-5.2's indexers without `attention.indexer.types`: full in layers 0, 1 and every fourth from 2 to 74, the others
#: reusing the last full one's choice (llama.cpp's GLM_5_2_DEFAULT_INDEXER_TYPES)
_GLM_5_2_INDEXERS = (True, True, *((il % 4 == 2) for il in range(2, 78)), *(False,) * (MAX_LAYERS - 78))


def _dsa(keys: _Keys, indexers: str, n_layer_all: int, n_layer: int) -> dict[str, Any]:
    """The lightning indexer's heads, head size and top k, which llama.cpp requires; which layers index for
    themselves (`indexers`: "every" layer, or "glm": `attention.indexer.types`, else every layer, but GLM-5.2's
    pattern for a model trained on 2**20 tokens)."""
    values = {
        "indexer_n_head": keys.number("attention.indexer.head_count", required=True),
        "indexer_head_size": keys.number("attention.indexer.key_length", required=True),
        "indexer_top_k": keys.number("attention.indexer.top_k", required=True),
    }
    full = (True,) * n_layer_all
    if indexers == "glm":
        if keys.number("context_length") >= 1048576:  # GLM 5 and 5.1 (shorter) index in every layer
            full = _GLM_5_2_INDEXERS[:n_layer_all]
        types = keys.per_layer("attention.indexer.types", n_layer, ())
        if types:
            full = tuple(bool(t) for t in types) + full[n_layer:]
    return values | {"is_indexer_full": full}


LLAMA_MAX_PLE_NGRAM, LLAMA_MAX_PLE_HEADS = 8, 64


def _qsa(keys: _Keys, values: dict[str, Any], n_layer_all: int) -> dict[str, Any]:
    """Qwen4-Exp's `load_arch_hparams` beyond Qwen3.5's: its delta net's keys and the hyper-connections' count
    (more than one) and rank, QSA's indexer and per-layer compress ratios, and the PLE layer (one, a linear-attention
    layer) with its n-gram size and heads, convolution and hash tables; llama.cpp refuses a file without them, or
    with zeros where it divides or sizes by them, naming the key."""

    def nonzero(key: str, value: int) -> int:
        if value == 0:
            raise keys.error(f"{keys.name(key)} must be greater than zero, got 0 (llama.cpp refuses the model)")
        return value

    for name, key in (("ssm_d_conv", "ssm.conv_kernel"), ("ssm_d_inner", "ssm.inner_size"),
                      ("ssm_d_state", "ssm.state_size"), ("ssm_dt_rank", "ssm.time_step_rank"),
                      ("ssm_n_group", "ssm.group_count")):  # fmt: skip
        nonzero(key, values[name])
    hc = keys.number("hyper_connection.count", required=True)
    if hc <= 1:
        raise keys.error(f"{keys.name('hyper_connection.count')} must be greater than one, got {hc}")
    nonzero("hyper_connection.low_rank", keys.number("hyper_connection.low_rank", required=True))
    out: dict[str, Any] = {"hc_mult": hc, "n_embd_out_impl": hc * keys.number("embedding_length")}
    for name, key in (("indexer_n_head", "attention.indexer.head_count"),
                      ("indexer_head_size", "attention.indexer.key_length"),
                      ("indexer_top_k", "attention.indexer.top_k")):  # fmt: skip
        out[name] = nonzero(key, keys.number(key, required=True))
    out["compress_ratios"] = keys.per_layer("attention.compress_ratios", n_layer_all, (0,) * n_layer_all)
    layers = keys.array("ple.layers") or []
    if not layers:
        return out
    if len(layers) != 1:
        raise keys.error(f"{keys.name('ple.layers')} lists {len(layers)} layers, but only one PLE layer is supported")
    (il,) = (int(v) for v in layers)
    if il >= n_layer_all or not values["is_recurrent"][il]:
        raise keys.error(f"PLE layer {il} is out of range or not a linear attention layer (llama.cpp refuses it)")
    ngram = keys.number("ple.ngram_size", required=True)
    n_heads = (ngram - 1) * keys.number("ple.heads_per_ngram", required=True)
    keys.number("ple.eos_token_id", required=True)
    if not 2 <= ngram <= LLAMA_MAX_PLE_NGRAM or not 0 < n_heads <= LLAMA_MAX_PLE_HEADS:
        raise keys.error(f"PLE n-gram size {ngram} or head count {n_heads} is out of range (llama.cpp refuses it)")
    for key, n in (("ple.layer_multipliers", ngram), ("ple.head_offsets", n_heads), ("ple.head_vocab_sizes", n_heads)):
        if len(keys.array(key) or []) < n:
            raise keys.error(f"{keys.name(key)} has fewer than the {n} entries llama.cpp requires")
    kernel, width = (nonzero(key, keys.number(key, required=True))
                     for key in ("ple.conv_kernel", "embedding_length_per_layer_input"))  # fmt: skip
    return out | {
        "is_ple": tuple(i == il for i in range(n_layer_all)),
        "ple_n_heads": n_heads,
        "ple_ngram_size": ngram,
        "ple_conv_kernel": kernel,
        "n_embd_per_layer": width,
    }


def _wkv(keys: _Keys) -> dict[str, int]:
    """RWKV's head size and token shifts; llama.cpp's rwkv6 and rwkv7 graphs assert two shifts (attention's and
    the channel mix's) and abort on any other count."""
    shifts = keys.number("token_shift_count", 2)
    if shifts != 2:
        raise keys.error(f"{keys.name('token_shift_count')} is {shifts}; llama.cpp's {keys.arch} graph takes 2")
    return {"wkv_head_size": keys.number("wkv.head_size", required=True), "token_shift_count": shifts}


def _vocab_size(keys: _Keys) -> int:
    """`llama_vocab::n_tokens`: the token list's length; a model without a vocabulary ("none") takes
    `<arch>.vocab_size`."""
    tokenizer = keys.get("tokenizer.ggml.model")
    if tokenizer in ("none", "no_vocab"):
        return keys.number("vocab_size")
    if "tokenizer.ggml.tokens" not in keys.metadata:
        raise keys.error("tokenizer.ggml.tokens is missing: llama.cpp sizes its logits by the vocabulary")
    return array_length(keys.metadata, "tokenizer.ggml.tokens")  # a GGUF file's tokens counted, not decoded


def _swa(keys: _Keys, swa: SlidingWindow, n_layer_all: int, n_layer: int) -> dict[str, Any]:
    window = keys.get("attention.sliding_window")
    if window is None:
        if swa.window_required:
            raise keys.error(f"{keys.name('attention.sliding_window')} is missing")
        window = swa.default_window
    elif window and swa.fixed_window:
        window = swa.default_window
    if not window:
        return {}
    pattern = keys.array("attention.sliding_window_pattern")
    if pattern is None and swa.pattern_required:
        raise keys.error(f"{keys.name('attention.sliding_window_pattern')} is missing")
    if pattern is not None:
        flags = [bool(v) for v in pattern] + [False] * (n_layer_all - len(pattern))
    else:
        n = keys.number("attention.sliding_window_pattern", swa.pattern)
        if swa.dense_first:
            flags = [n == 0 or il % n != 0 for il in range(n_layer)]
        else:
            flags = [n == 0 or il % n < n - 1 for il in range(n_layer)]
        flags += [False] * (n_layer_all - n_layer)
    return {"swa_type": swa.type, "n_swa": int(window), "is_swa": tuple(flags[:n_layer_all])}
