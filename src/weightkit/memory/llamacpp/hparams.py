"""A model's hyperparameters as llama.cpp reads them from GGUF metadata (`llama_model_base::load_hparams` and each
architecture's `load_arch_hparams` in `src/models/`), read once: per-layer head counts and sizes, which layers
slide (SWA) or are recurrent, MLA, experts, state sizes.

An architecture weightkit has no graph for is not guessed at: `ARCHITECTURES` lists the ones it knows, and
`read_hparams` says which it got.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import FormatError, UnsupportedError
from ...model import ModelFile

SWA_NONE, SWA_STANDARD, SWA_CHUNKED = "none", "standard", "chunked"
MAX_LAYERS = 512  # LLAMA_MAX_LAYERS


@dataclass(frozen=True)
class HParams:
    """What the caches and graphs read (`llama_hparams`). Per-layer tuples run over every block, NextN included."""

    arch: str
    n_layer_all: int
    n_embd: int
    n_vocab: int
    n_ctx_train: int
    n_head: tuple[int, ...]
    n_head_kv: tuple[int, ...]
    n_ff: tuple[int, ...]
    head_k_full: int
    head_v_full: int
    head_k_swa: int
    head_v_swa: int
    n_rot: int
    n_layer_nextn: int = 0
    n_embd_out_impl: int = 0
    causal: bool = True
    pooling: int = -1
    swa_type: str = SWA_NONE
    n_swa: int = 0
    is_swa: tuple[bool, ...] = ()
    is_recurrent: tuple[bool, ...] = ()
    n_layer_kv_from_start: int = -1
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    n_expert_shared: int = 0
    n_layer_dense_lead: int = 0
    n_lora_q: int = 0
    n_lora_kv: int = 0
    head_k_mla: int = 0
    head_v_mla: int = 0
    ssm_d_conv: int = 0
    ssm_d_inner: int = 0
    ssm_d_state: int = 0
    ssm_dt_rank: int = 0
    ssm_n_group: int = 0
    wkv_head_size: int = 0  # RWKV
    token_shift_count: int = 2
    tied_output: bool = True
    flags: Mapping[str, Any] = field(default_factory=dict)  # architecture switches the graphs read

    @property
    def n_layer(self) -> int:
        """Blocks without the NextN (multi-token prediction) ones."""
        return self.n_layer_all - self.n_layer_nextn

    @property
    def n_embd_out(self) -> int:
        return self.n_embd_out_impl or self.n_embd

    @property
    def is_mla(self) -> bool:
        return self.head_k_mla != 0 and self.head_v_mla != 0

    def head_k(self, il: int) -> int:
        return self.head_k_swa if self.is_swa[il] else self.head_k_full

    def head_v(self, il: int) -> int:
        return self.head_v_swa if self.is_swa[il] else self.head_v_full

    def n_embd_k_gqa(self, il: int) -> int:
        return self.head_k(il) * self.n_head_kv[il]

    def n_embd_v_gqa(self, il: int) -> int:
        return self.head_v(il) * self.n_head_kv[il]

    @property
    def n_embd_v_gqa_max(self) -> int:
        return max(self.n_embd_v_gqa(il) for il in range(self.n_layer_all))

    def has_kv(self, il: int) -> bool:
        return self.n_layer_kv_from_start < 0 or il < self.n_layer_kv_from_start

    def rescaled(self, il: int) -> bool:
        """Whether the layer halves its output (RWKV-6's `rescale_every_n_layers`)."""
        every = int(self.flags.get("rescale_every_n_layers", 0))
        return every > 0 and (il + 1) % every == 0

    @property
    def n_embd_r(self) -> int:
        """Per-sequence rolling state of a recurrent layer (`llama_hparams::n_embd_r`): RWKV's token shifts, or
        Mamba's convolution state."""
        if self.wkv_head_size:
            return self.token_shift_count * self.n_embd
        conv = self.ssm_d_conv - 1 if self.ssm_d_conv > 0 else 0
        return conv * (self.ssm_d_inner + 2 * self.ssm_n_group * self.ssm_d_state)

    @property
    def n_embd_s(self) -> int:
        """Per-sequence state of a recurrent layer (`n_embd_s`): RWKV's WKV state, or Mamba's SSM state."""
        if self.wkv_head_size:
            return self.n_embd * self.wkv_head_size
        return self.ssm_d_state * self.ssm_d_inner


class _Keys:
    """Metadata access as llama_model_loader's get_key / get_key_or_arr / get_arr, naming the key on failure."""

    def __init__(self, model: ModelFile, arch: str) -> None:
        self.metadata, self.arch, self.path = model.metadata, arch, getattr(model, "path", None)

    def name(self, key: str) -> str:
        return key if key.startswith(("general.", "tokenizer.")) else f"{self.arch}.{key}"

    def error(self, reason: str) -> FormatError:
        return FormatError(self.path, None, reason)

    def get(self, key: str, default: Any = None, *, required: bool = False) -> Any:
        full = self.name(key)
        if full not in self.metadata:
            if required:
                raise self.error(f"{full} is missing: llama.cpp needs it to load a {self.arch} model")
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
class _Swa:
    """How an architecture marks sliding-window layers (`load_swa_pattern(n_pattern, dense_first)`)."""

    pattern: int
    dense_first: bool = False
    type: str = SWA_STANDARD
    default_window: int | None = None  # gemma2's 4096; None: the key decides (absent or 0: no SWA)
    window_required: bool = False


@dataclass(frozen=True)
class Architecture:
    """What of an architecture's `load_arch_hparams` bears on memory."""

    swa: _Swa | None = None
    experts: bool = False  # reads expert_feed_forward_length and friends
    mla: bool = False
    recurrent: str | None = None  # "all" (Mamba, RWKV), "no_kv_heads" (a layer is recurrent iff it has 0 KV heads)
    wkv: bool = False  # RWKV: the state is sized by wkv.head_size and token_shift_count, not by the ssm keys
    required: tuple[str, ...] = ()  # keys llama.cpp insists on that shape only weights (LoRA ranks, ...)
    causal: bool = True
    tied_output: bool = True  # without output.weight the token embeddings serve as the output matrix
    flags: Mapping[str, str] = field(default_factory=dict)  # flag name -> metadata key (float, 0 if absent)


_FLAG_DEFAULTS = {"rope": 1.0}  # granite hybrids rope unless rope.scaling.finetuned says false

ARCHITECTURES: dict[str, Architecture] = {
    "llama": Architecture(experts=True),
    "qwen2": Architecture(),
    "qwen3": Architecture(),
    "qwen3moe": Architecture(experts=True),
    "gemma2": Architecture(
        swa=_Swa(2, default_window=4096),
        flags={"attn_softcap": "attn_logit_softcapping", "final_softcap": "final_logit_softcapping"},
    ),
    "gemma3": Architecture(swa=_Swa(6), flags={"final_softcap": "final_logit_softcapping"}),
    "gpt-oss": Architecture(swa=_Swa(2, window_required=True), experts=True),
    "phi3": Architecture(),
    "deepseek2": Architecture(
        experts=True,
        mla=True,
        flags={
            "expert_gating_func": "expert_gating_func",
            "expert_weights_norm": "expert_weights_norm",
            "expert_weights_scale": "expert_weights_scale",
        },
    ),
    "granitehybrid": Architecture(
        recurrent="no_kv_heads",
        experts=True,
        flags={
            "embedding_scale": "embedding_scale",
            "residual_scale": "residual_scale",
            "logit_scale": "logit_scale",
            "rope": "rope.scaling.finetuned",
        },
    ),
    "mamba": Architecture(recurrent="all", flags={"ssm_dt_b_c_rms": "ssm.dt_b_c_rms"}),
    "mamba2": Architecture(recurrent="all"),
    "rwkv6": Architecture(
        recurrent="all",
        wkv=True,
        required=("time_mix_extra_dim", "time_decay_extra_dim"),
        flags={"rescale_every_n_layers": "rescale_every_n_layers"},
    ),
    "rwkv7": Architecture(
        recurrent="all",
        wkv=True,
        required=(
            "attention.decay_lora_rank",
            "attention.iclr_lora_rank",
            "attention.value_residual_mix_lora_rank",
        ),
    ),
    "bert": Architecture(causal=False, tied_output=False),
}


def read_hparams(model: ModelFile) -> HParams:
    """The hyperparameters llama.cpp loads for `model`; a FormatError names a missing or malformed key, an
    UnsupportedError an architecture weightkit has no graph for."""
    metadata = model.metadata
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise FormatError(getattr(model, "path", None), None, "general.architecture is missing or not a string")
    spec = ARCHITECTURES.get(arch)
    if spec is None:
        known = ", ".join(sorted(ARCHITECTURES))
        raise UnsupportedError(f"no llama.cpp memory model for the architecture {arch!r} yet (known: {known})")
    keys = _Keys(model, arch)
    n_layer_all = keys.number("block_count", required=True)
    if not 0 < n_layer_all <= MAX_LAYERS:
        raise keys.error(f"{keys.name('block_count')} is {n_layer_all}; llama.cpp takes 1 to {MAX_LAYERS}")
    n_nextn = keys.number("nextn_predict_layers")
    n_head = keys.per_layer("attention.head_count", n_layer_all, (0,) * n_layer_all)
    n_head_kv = keys.per_layer("attention.head_count_kv", n_layer_all, n_head)
    n_ff = keys.per_layer("feed_forward_length", n_layer_all, (0,) * n_layer_all)
    n_embd = keys.number("embedding_length", required=True)
    head_k = head_v = n_rot = 0
    if n_head[0] > 0:
        head_k = keys.number("attention.key_length", n_embd // n_head[0])
        head_v = keys.number("attention.value_length", n_embd // n_head[0])
        n_rot = keys.number("rope.dimension_count", head_k)
    values: dict[str, Any] = dict(
        arch=arch,
        n_layer_all=n_layer_all,
        n_layer_nextn=n_nextn,
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
        causal=bool(keys.get("attention.causal", spec.causal)),
        tied_output=spec.tied_output,
        pooling=int(keys.get("pooling_type", -1)),
        n_expert=keys.number("expert_count"),
        n_expert_used=keys.number("expert_used_count"),
        is_swa=(False,) * n_layer_all,
        is_recurrent=(spec.recurrent == "all",) * n_layer_all,
        flags={name: float(keys.get(key, _FLAG_DEFAULTS.get(name, 0.0))) for name, key in spec.flags.items()},
    )
    if spec.swa is not None:
        values.update(_swa(keys, spec.swa, n_layer_all, n_layer_all - n_nextn))
    if spec.experts:
        values["n_ff_exp"] = keys.number("expert_feed_forward_length")
        values["n_ff_shexp"] = keys.number("expert_shared_feed_forward_length")
        values["n_expert_shared"] = keys.number("expert_shared_count")
        values["n_layer_dense_lead"] = keys.number("leading_dense_block_count")
    if spec.mla:
        values["n_lora_q"] = keys.number("attention.q_lora_rank")
        values["n_lora_kv"] = keys.number("attention.kv_lora_rank", required=True)
        values["head_k_mla"] = keys.number("attention.key_length_mla")
        values["head_v_mla"] = keys.number("attention.value_length_mla")
    for key in spec.required:
        keys.number(key, required=True)
    if spec.wkv:
        values.update(_wkv(keys))
    elif spec.recurrent is not None:
        for name, key in (("ssm_d_conv", "ssm.conv_kernel"), ("ssm_d_inner", "ssm.inner_size"),
                          ("ssm_d_state", "ssm.state_size"), ("ssm_dt_rank", "ssm.time_step_rank"),
                          ("ssm_n_group", "ssm.group_count")):  # fmt: skip
            values[name] = keys.number(key, required=name != "ssm_n_group")
    if spec.recurrent == "no_kv_heads":
        n_layer = n_layer_all - n_nextn
        values["is_recurrent"] = tuple(il < n_layer and n_head_kv[il] == 0 for il in range(n_layer_all))
    hp = HParams(**values)
    _check_shapes(keys, hp, model.tensors)
    return hp


def _check_shapes(keys: _Keys, hp: HParams, tensors: Mapping[str, Any]) -> None:
    """llama.cpp refuses a model whose tensors have other shapes than its metadata makes (`check_tensor_dims`);
    these are the ones the memory rests on: the token embeddings and each attention layer's Q, K and V."""
    expected = {"token_embd.weight": ((hp.n_vocab, hp.n_embd), ("tokenizer.ggml.tokens", "embedding_length"))}
    for il in range(hp.n_layer):
        if hp.is_recurrent[il] or hp.is_mla:
            continue
        q, k, v = (
            ("attention.head_count", "attention.key_length"),
            ("attention.head_count_kv",),
            ("attention.value_length",),
        )
        expected[f"blk.{il}.attn_q.weight"] = ((hp.n_head[il] * hp.head_k(il), hp.n_embd), q)
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
    tokens = keys.metadata.get("tokenizer.ggml.tokens")
    if tokens is None:
        raise keys.error("tokenizer.ggml.tokens is missing: llama.cpp sizes its logits by the vocabulary")
    return len(tokens)


def _swa(keys: _Keys, swa: _Swa, n_layer_all: int, n_layer: int) -> dict[str, Any]:
    window = keys.get("attention.sliding_window")
    if window is None:
        if swa.window_required:
            raise keys.error(f"{keys.name('attention.sliding_window')} is missing")
        window = swa.default_window
    if not window:
        return {}
    pattern = keys.array("attention.sliding_window_pattern")
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
