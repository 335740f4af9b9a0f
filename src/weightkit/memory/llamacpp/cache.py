"""The context memory llama.cpp allocates besides the compute buffer: its KV caches (`src/llama-kv-cache.cpp`,
`llama-kv-cache-iswa.cpp`), the recurrent state of Mamba-style layers (`llama-memory-recurrent.cpp`), which
memory an architecture gets (`llama_model::create_memory`), and the output buffer (`output_reserve`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .context import Context, pad
from .ggml import F32, row_size
from .hparams import SWA_NONE, LlamaCppHParams
from .known_architectures import NO_MEMORY


@dataclass(frozen=True)
class KVCache:
    """One `llama_kv_cache`: `cells` per stream, K and V tensors for each of its layers."""

    name: str  # "" (a plain cache), "non-SWA" or "SWA" (the pair of an iSWA cache), "lid" / "idx" (DSA's / QSA's
    # indexer keys)
    cells: int
    n_stream: int
    layers: tuple[int, ...]
    k_rows: tuple[int, ...]  # elements per cell of each layer's K
    v_rows: tuple[int, ...]  # ... and V (0: an MLA cache keeps no V)
    type_k: int
    type_v: int
    v_trans: bool  # V stored transposed (flash attention off)

    def k_bytes(self, i: int) -> int:
        return row_size(self.type_k, self.k_rows[i]) * self.cells * self.n_stream

    def v_bytes(self, i: int) -> int:
        return row_size(self.type_v, self.v_rows[i]) * self.cells * self.n_stream

    def layer_bytes(self, i: int) -> int:
        return self.k_bytes(i) + self.v_bytes(i)

    @property
    def bytes(self) -> int:
        return sum(self.layer_bytes(i) for i in range(len(self.layers)))


@dataclass(frozen=True)
class RecurrentState:
    """`llama_memory_recurrent`: an F32 conv state (r) and SSM state (s) per sequence in each recurrent layer, and
    in a PLE layer (Qwen4-Exp) its convolution's history (p) beside them."""

    layers: tuple[int, ...]
    rows: int  # sequences
    n_embd_r: int
    n_embd_s: int
    ple_layers: tuple[int, ...] = ()
    n_embd_p: int = 0

    def layer_bytes(self, il: int) -> int:
        """The state of layer `il`."""
        p = self.n_embd_p if il in self.ple_layers else 0
        return sum(row_size(F32, n) * self.rows for n in (self.n_embd_r, self.n_embd_s, p))

    @property
    def bytes(self) -> int:
        return sum(self.layer_bytes(il) for il in self.layers)


@dataclass(frozen=True)
class Memory:
    """What `create_memory` gives a context: KV caches (none, one, or an iSWA pair) and recurrent state."""

    caches: tuple[KVCache, ...] = ()
    recurrent: RecurrentState | None = None

    def cache_of(self, il: int) -> KVCache | None:
        return next((c for c in self.caches if il in c.layers), None)

    @property
    def kv_bytes(self) -> int:
        return sum(c.bytes for c in self.caches)

    @property
    def recurrent_bytes(self) -> int:
        return self.recurrent.bytes if self.recurrent else 0


def make_memory(hp: LlamaCppHParams, ctx: Context) -> Memory:
    """The caches llama.cpp creates for this model and context."""
    if hp.arch in NO_MEMORY:
        return Memory()
    layers = [il for il in range(hp.n_layer_all) if il < hp.n_layer or hp.n_layer_nextn == 0]
    recurrent_layers = tuple(il for il in range(hp.n_layer) if hp.is_recurrent[il])
    recurrent = None
    if recurrent_layers:
        rows = max(1, ctx.n_seq_max)
        ple_layers = tuple(il for il in recurrent_layers if hp.is_ple and hp.is_ple[il])
        recurrent = RecurrentState(recurrent_layers, rows, hp.n_embd_r, hp.n_embd_s, ple_layers, hp.n_embd_p)
    attends = hp.is_attention or tuple(not r for r in hp.is_recurrent)
    attention = [il for il in layers if attends[il] and hp.has_kv(il)]
    if not any(hp.is_attention) and len(recurrent_layers) == hp.n_layer and all(hp.is_recurrent):
        return Memory((), recurrent)
    if hp.is_dsa and hp.is_mla:
        indexed = [il for il in attention if hp.is_indexer_full[il]]
        return Memory((_cache(hp, ctx, "", ctx.n_ctx_seq, attention), _indexer_cache(hp, ctx, "lid", indexed)))
    if hp.is_dsa:  # QSA: `llama_memory_hybrid_idx`, the indexer's keys in every attention layer
        return Memory((_cache(hp, ctx, "", ctx.n_ctx_seq, attention), _indexer_cache(hp, ctx, "idx", attention)),
                      recurrent)  # fmt: skip
    if hp.swa_type == SWA_NONE:
        return Memory((_cache(hp, ctx, "", ctx.n_ctx_seq, attention),), recurrent)
    n_swa_cells = ctx.n_ctx_seq
    if not ctx.swa_full:
        sequences = ctx.n_seq_max if ctx.kv_unified else 1
        n_swa_cells = pad(min(ctx.n_ctx_seq, hp.n_swa * sequences + ctx.n_ubatch), 256)
    base = _cache(hp, ctx, "non-SWA", ctx.n_ctx_seq, [il for il in attention if not hp.is_swa[il]])
    swa = _cache(hp, ctx, "SWA", n_swa_cells, [il for il in attention if hp.is_swa[il]])
    return Memory((base, swa), recurrent)


def _cache(hp: LlamaCppHParams, ctx: Context, name: str, cells: int, layers: list[int]) -> KVCache:
    v_trans = not ctx.flash_attn
    k_rows = tuple(hp.n_embd_k_gqa(il) for il in layers)
    if hp.is_mla:
        v_rows = (0,) * len(layers)
    elif v_trans:
        v_rows = (hp.n_embd_v_gqa_max,) * len(layers)
    else:
        v_rows = tuple(hp.n_embd_v_gqa(il) for il in layers)
    return KVCache(name, cells, ctx.n_stream, tuple(layers), k_rows, v_rows, ctx.type_k, ctx.type_v, v_trans)


def _indexer_cache(hp: LlamaCppHParams, ctx: Context, name: str, layers: list[int]) -> KVCache:
    """The indexer cache (`llama_kv_cache_dsa`'s second, `llama_memory_hybrid_idx`'s third): one key head of the
    indexer's size per cell in every layer with an indexer of its own, no V (made as an MLA cache), the K cache's
    type."""
    k_rows = (hp.indexer_head_size,) * len(layers)
    v_rows = (0,) * len(layers)
    return KVCache(name, ctx.n_ctx_seq, ctx.n_stream, tuple(layers), k_rows, v_rows, ctx.type_k, ctx.type_v,
                   not ctx.flash_attn)  # fmt: skip


def output_bytes(hp: LlamaCppHParams, ctx: Context, requested_seqs: int) -> int:
    """The output buffer made at construction (`output_reserve(n_seq_max)`): float logits for every sequence,
    and embeddings too when asked for. `requested_seqs` is the n_seq_max asked for, before its floor of 1."""
    outputs = max(requested_seqs, ctx.n_seq_max)
    return 4 * (hp.n_vocab + (hp.n_embd_out if ctx.embeddings else 0)) * outputs
