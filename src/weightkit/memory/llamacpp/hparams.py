"""A model's hyperparameters as llama.cpp holds them (`llama_hparams`): per-layer head counts and sizes, which
layers slide (SWA) or are recurrent, MLA, experts, state sizes. `architectures` reads them from a GGUF's
metadata, each architecture by its own entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SWA_NONE, SWA_STANDARD, SWA_CHUNKED, SWA_SYMMETRIC = "none", "standard", "chunked", "symmetric"


@dataclass(frozen=True)
class LlamaCppHParams:
    """What llama.cpp's caches and graphs read (`llama_hparams`). Per-layer tuples run over every block, NextN
    included."""

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
    # the layers with a KV cache where that is not every layer but the recurrent ones (`create_memory`'s filter_attn;
    # Falcon-H1's: all of them, beside their Mamba-2 mixer; Nemotron-H's: the attention layers, not the FFN ones)
    is_attention: tuple[bool, ...] = ()
    n_layer_kv_from_start: int = -1  # >= 0: only the first this many layers have a KV cache (Gemma 3n, Gemma 4)
    n_embd_per_layer: int = 0  # Gemma 4's per-layer embedding inputs
    n_pos_per_embd: int = 1  # positions per token: 4 with M-RoPE (`n_pos_per_embd`)
    n_deepstack_layers: int = 0  # Qwen3-VL: the first layers add a slice of a wider input embedding
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    n_expert_shared: int = 0
    n_expert_groups: int = 0  # experts chosen within the best `n_group_used` of these groups (DeepSeek-V3's routing)
    n_group_used: int = 0
    n_layer_dense_lead: int = 0
    n_lora_q: int = 0
    n_lora_kv: int = 0
    head_k_mla: int = 0
    head_v_mla: int = 0
    # DeepSeek sparse attention (DSA): the lightning indexer's heads, head size and how many cells each token attends
    indexer_n_head: int = 0
    indexer_head_size: int = 0
    indexer_top_k: int = 0
    is_indexer_full: tuple[bool, ...] = ()  # layers with an indexer of their own (the others reuse the last one's)
    # Qwen4-Exp's QSA (sparse attention over blocks of `compress_ratios[il]` cached indexer keys, 0: dense), its
    # hyper-connections (`hc_mult` residual streams in place of the norms) and PLE n-gram embeddings (the layers
    # `is_ple` marks: `ple_n_heads` rows of n_embd_per_layer per token, a dilated convolution over their history)
    compress_ratios: tuple[int, ...] = ()
    hc_mult: int = 0
    is_ple: tuple[bool, ...] = ()
    ple_n_heads: int = 0
    ple_ngram_size: int = 0
    ple_conv_kernel: int = 0
    ssm_d_conv: int = 0
    ssm_d_inner: int = 0
    ssm_d_state: int = 0
    ssm_dt_rank: int = 0
    ssm_n_group: int = 0
    wkv_head_size: int = 0  # RWKV
    n_shortconv_l_cache: int = 0  # LFM2's short convolution: its kernel length (the state keeps one less)
    n_embd_head_kda: int = 0  # Kimi's KDA (delta attention) head size: Q, K and V convolved, a state matrix per head
    token_shift_count: int = 2
    tied_output: bool = True
    # where the loader departs from the common layout: the final norm named `token_embd_norm`, on the output layer
    # (LFM2); rope frequencies loaded by the full-attention layers alone (Gemma 4); NextN tensors loaded all the same
    output_norm_embd: bool = False
    rope_freqs_full_attention: bool = False
    nextn_loaded: tuple[str, ...] = ()
    flags: Mapping[str, Any] = field(default_factory=dict)  # architecture switches the graphs read

    @property
    def n_layer(self) -> int:
        """Blocks without the NextN (multi-token prediction) ones."""
        return self.n_layer_all - self.n_layer_nextn

    @property
    def n_embd_out(self) -> int:
        return self.n_embd_out_impl or self.n_embd

    @property
    def n_embd_inp(self) -> int:
        """The input embedding's width (`n_embd_inp`): the model's, and one more for each deepstack layer."""
        return self.n_embd * (1 + self.n_deepstack_layers)

    @property
    def is_mla(self) -> bool:
        return self.head_k_mla != 0 and self.head_v_mla != 0

    @property
    def is_dsa(self) -> bool:
        """Sparse attention over an indexer cache beside the attention one: DeepSeek's beside MLA
        (`llama_kv_cache_dsa`), or Qwen4-Exp's QSA in a hybrid (`llama_memory_hybrid_idx`)."""
        return self.indexer_head_size > 0

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

    def kv_layer(self, il: int) -> int:
        """The layer whose KV cache `il` attends over: its own, or for a layer without one the second-last layer with
        one if `il` slides, else the last (`create_memory`'s `reuse` for Gemma 3n and Gemma 4)."""
        if self.has_kv(il):
            return il
        return self.n_layer_kv_from_start - (2 if self.is_swa[il] else 1)

    def rescaled(self, il: int) -> bool:
        """Whether the layer halves its output (RWKV-6's `rescale_every_n_layers`)."""
        every = int(self.flags.get("rescale_every_n_layers", 0))
        return every > 0 and (il + 1) % every == 0

    @property
    def n_embd_r(self) -> int:
        """Per-sequence rolling state of a recurrent layer (`llama_hparams::n_embd_r`): RWKV's token shifts, LFM2's
        short convolution's last inputs, KDA's three convolutions' (Q, K, V), or Mamba's convolution state."""
        if self.wkv_head_size:
            return self.token_shift_count * self.n_embd
        if self.n_shortconv_l_cache:
            return self.n_embd * (self.n_shortconv_l_cache - 1)
        if self.n_embd_head_kda:
            return 3 * (self.ssm_d_conv - 1 if self.ssm_d_conv > 0 else 3) * self.n_head[0] * self.n_embd_head_kda
        conv = self.ssm_d_conv - 1 if self.ssm_d_conv > 0 else 0
        return conv * (self.ssm_d_inner + 2 * self.ssm_n_group * self.ssm_d_state)

    @property
    def n_embd_p(self) -> int:
        """Per-sequence history of a PLE layer's dilated convolution (`ple_conv_state`), a recurrent row of its own."""
        if not self.ple_n_heads or not self.ple_conv_kernel:
            return 0
        return (self.ple_conv_kernel - 1) * self.ple_ngram_size * self.hc_mult * self.n_embd

    @property
    def n_embd_s(self) -> int:
        """Per-sequence state of a recurrent layer (`n_embd_s`): RWKV's WKV state, KDA's state matrix per head, or
        Mamba's SSM state."""
        if self.wkv_head_size:
            return self.n_embd * self.wkv_head_size
        if self.n_embd_head_kda:
            return self.n_embd_head_kda * self.n_embd_head_kda * self.n_head[0]
        return self.ssm_d_state * self.ssm_d_inner
