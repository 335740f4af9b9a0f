"""llama.cpp's worst-case graph for a batch, built on the shape-only ggml: `GraphBuilder` holds what
`llm_graph_context` (`src/llama-graph.cpp`) holds and has its building blocks (inputs, norms, attention with its
KV-cache writes and reads, feed-forward and mixture-of-experts blocks), each adding the same nodes in the same
order as llama.cpp's. Each architecture's graph (`architectures/`) is written with them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from ...dtypes import ggml_type
from ...errors import UnsupportedError
from ...model import TensorInfo
from . import ggml as g
from .cache import KVCache, Memory
from .context import POOLING_CLS, POOLING_LAST, POOLING_MEAN, Context
from .ggml import F16, F32, I32, I64, Tensor
from .hparams import SWA_NONE, LlamaCppHParams
from .placement import Placement, tensor_device

Weights = dict[tuple[str, int | None], Tensor]  # the weights' tensors made so far, by name and layer


def _unfit_pair(weight: Tensor, a: Tensor, cur: Tensor) -> str:
    """Why an adapter's pair for `weight` cannot multiply `cur` (llama.cpp aborts on it)."""
    tied = "; the output is the tied token embeddings" if weight.name == "token_embd.weight" else ""
    return (f"LoRA adapter: {a.name} {list(reversed(a.ne))} does not fit the product with {weight.name} (its input"
            f" rows are {cur.ne[0]} wide{tied}): llama.cpp aborts there (GGML_ASSERT ggml_can_mul_mat)")  # fmt: skip


class GraphBuilder:
    """One graph being built: `n_tokens` tokens in `n_seqs` sequences, `n_outputs` of them output."""

    def __init__(self, hp: LlamaCppHParams, ctx: Context, memory: Memory, tensors: Mapping[str, TensorInfo],
                 n_tokens: int, n_seqs: int, n_outputs: int, placement: Placement | None = None,
                 layers: Sequence[int] | None = None, pin_norms: bool = True,
                 weights: Weights | None = None) -> None:  # fmt: skip
        self.hp, self.ctx, self.memory, self.tensors = hp, ctx, memory, tensors
        self.placement = placement  # None: everything on the CPU
        self.layers = range(hp.n_layer) if layers is None else layers  # a subset stands for the whole (compute.py)
        self.layer_starts: list[int] = []  # graph nodes expanded before each layer was built
        self.leaf_starts: list[int] = []  # and graph leaves
        self.n_tokens, self.n_seqs, self.n_outputs = n_tokens, n_seqs, n_outputs
        self.n_stream = 1 if ctx.kv_unified else n_seqs
        self.graph = g.Graph()
        self.outputs: list[Tensor] = []
        self.t_inp_embd: Tensor | None = None  # the input embedding before any scaling (`res->t_inp_embd`)
        self._weights = {} if weights is None else weights  # the weights' tensors (graphs alike may share them)
        self.absent: list[str] = []  # the tensors asked for that the model has none of, in order
        self._cache_tensors: dict[tuple[int, str], Tensor] = {}
        self._attn_inputs: dict[str, dict[str, Tensor | None]] = {}
        self._rs: tuple[Tensor, Tensor] | None = None
        self._layer: int | None = None  # the layer being built
        self.flash_attn_nodes: list[tuple[Tensor, int]] = []  # each flash attention and its layer (fused nodes)
        full_offload = placement is not None and placement.offloaded == hp.n_layer_all + 1
        self._pin_norms = pin_norms and placement is not None and (n_tokens < 32 or full_offload)

    # ------------------------------------------------------------------------------------------ weights

    def w(self, name: str, il: int | None = None) -> Tensor | None:
        """The model's tensor `name` (`blk.{il}.name` for a layer), or None where the file has none."""
        t = self._weights.get((name, il))  # (by the pair: spelling the name out costs more than the look-up)
        if t is None:
            full = f"blk.{il}.{name}" if il is not None else name
            info = self.tensors.get(full)
            if info is None:
                self.absent.append(full)
                return None
            device = -1 if self.placement is None else tensor_device(full, self.placement)
            t = g.external(int(info.dtype), tuple(reversed(info.shape)), full, device=device, weight=True)
            self._weights[name, il] = t
        return t

    def output_weight(self) -> Tensor:
        """`output.weight`, or the token embeddings when the output is tied to them (as a copy on the output
        layer's device: `TENSOR_DUPLICATED`, named `token_embd.weight` as the original, so that an adapter's
        token-embeddings pair is found for it)."""
        if (output := self.w("output.weight")) is not None:
            return output
        embd = self.w("token_embd.weight")
        device = -1 if self.placement is None else self.placement.output
        return g.external(embd.type, embd.ne, embd.name, device=device, weight=True)

    def layer_device(self, il: int) -> int:
        """Where a layer's KV cache and recurrent state live."""
        if self.placement is None or not self.ctx.offload_kqv:
            return -1
        return self.placement.device_of(il)

    def expand(self, t: Tensor) -> Tensor:
        self.graph.expand(t)
        return t

    def each_layer(self) -> Iterator[int]:
        """The layers to build, in order, noting where each begins in the graph."""
        for il in self.layers:
            self.layer_starts.append(len(self.graph.nodes))
            self.leaf_starts.append(len(self.graph.leafs))
            self._layer = il
            yield il
        self._layer = None

    # ------------------------------------------------------------------------------------------ inputs

    def inp_embd(self, tok_embd: Tensor) -> Tensor:
        """`build_inp_embd`: token rows (plus each adapter's delta for them), with the vector-embeddings input
        beside them (both in the graph), scaled where the model says so (`f_embedding_scale`). With deepstack
        layers the input is wider (`n_embd_inp`) and the model's embedding its first `n_embd` rows
        (`t_inp_embd`)."""
        n_embd, n_embd_inp = self.hp.n_embd, self.hp.n_embd_inp
        tokens = g.graph_input(I32, (self.n_tokens,), "inp_tokens")
        embd = g.graph_input(F32, (n_embd_inp, self.n_tokens), "inp_embd")
        cur = g.get_rows(tok_embd, tokens)
        for a, b in self.lora_pairs(tok_embd):  # A's rows of the tokens (its shape flipped), through B
            cur = g.add(cur, g.scale(g.mul_mat(b, g.get_rows(a, tokens))))
        if n_embd_inp != n_embd:
            cur = g.pad(cur, n_embd_inp - n_embd)
        self.expand(cur)
        self.expand(embd)  # ggml_build_forward_select keeps both branches
        if n_embd_inp != n_embd:
            cur = g.view(cur, (n_embd, self.n_tokens), (cur.nb[1],))
        self.t_inp_embd = cur
        if self.hp.flags.get("embedding_scale"):
            cur = g.scale(cur)
        return self.expand(cur)

    def inp_pos(self) -> Tensor:
        """`build_inp_pos`: a position per token, or four with M-RoPE."""
        return g.graph_input(I32, (self.n_tokens * self.hp.n_pos_per_embd,), "inp_pos")

    def inp_attn_scale(self) -> Tensor:
        """`build_inp_attn_scale`: a query scale per token (Llama 4's attention temperature)."""
        return g.graph_input(F32, (1, 1, self.n_tokens), "inp_attn_scale")

    def inp_out_ids(self) -> Tensor:
        return g.graph_input(I32, (self.n_outputs,), "out_ids")

    def decoder_inputs(self) -> tuple[Tensor, Tensor, Tensor]:
        """An attention decoder's inputs in llama.cpp's order: the token embeddings, the positions, the KV
        cache's inputs, the output rows."""
        inp = self.inp_embd(self.w("token_embd.weight"))
        pos = self.inp_pos()
        self.attn_inp_kv()
        return inp, pos, self.inp_out_ids()

    def _mask(self, cache: KVCache, half: bool | None = None) -> Tensor:
        """The KQ mask over a cache's cells: F16 for flash attention (or where `half` says so), else F32."""
        mask_type = F16 if (self.ctx.flash_attn if half is None else half) else F32
        shape = (cache.cells, self.n_tokens // self.n_stream, 1, self.n_stream)
        return g.graph_input(mask_type, shape, "attn_inp_kq_mask")

    def _rot(self, cache: KVCache, quantized_type: int, head: int, k: bool) -> Tensor | None:
        """The Hadamard rotation input for a quantized cache (`build_input_k_rot` / `_v_rot`)."""
        heads = {self.hp.head_k(il) if k else self.hp.head_v(il) for il in cache.layers}
        if not cache.layers or len(heads) != 1 or not ggml_type(quantized_type).quantized or head % 64:
            return None
        n = 64
        if k:
            (size,) = heads
            while size % (n * 2) == 0:
                n *= 2
        return g.graph_input(F32, (n, n), "attn_inp_k_rot" if k else "attn_inp_v_rot")

    def attn_inp_kv(self) -> None:
        """`build_attn_inp_kv` (one cache) or `build_attn_inp_kv_iswa` (a base and an SWA cache); QSA's indexer cache
        takes write indices alone (`build_input_k_idxs`)."""
        attended = [cache for cache in self.memory.caches if cache.name != "idx"]
        for cache in self.memory.caches:
            if cache.name == "idx":
                self._attn_inputs[cache.name] = {"k_idxs": g.graph_input(I64, (self.n_tokens,), "attn_inp_k_idxs")}
                continue
            v_rows = self.n_tokens * self.hp.n_embd_v_gqa_max if cache.v_trans else self.n_tokens
            self._attn_inputs[cache.name] = {
                "k_idxs": g.graph_input(I64, (self.n_tokens,), "attn_inp_k_idxs"),
                "v_idxs": g.graph_input(I64, (v_rows,), "attn_inp_v_idxs"),
                "mask": self._mask(cache),
            }
        for cache in attended:
            inputs = self._attn_inputs[cache.name]
            inputs["k_rot"] = self._rot(cache, self.ctx.type_k, self.hp.head_k_full, True)
            inputs["v_rot"] = self._rot(cache, self.ctx.type_v, self.hp.head_v_full, False)

    def attn_inp_k_dsa(self) -> None:
        """`build_attn_inp_k_dsa`: the MLA cache's write indices and mask; the indexer cache's, its mask F16 for
        the fused lightning indexer (`fused_lid`, always on), and its Hadamard rotation, which the indexer always
        applies (the largest power of two from 64 dividing the indexer's head size)."""
        mla, lid = self.memory.caches
        for cache, half in ((mla, None), (lid, True)):
            self._attn_inputs[cache.name] = {"k_idxs": g.graph_input(I64, (self.n_tokens,), "attn_inp_k_idxs"),
                                             "mask": self._mask(cache, half)}  # fmt: skip
        n = 64
        while self.hp.indexer_head_size % (n * 2) == 0:
            n *= 2
        self._attn_inputs[lid.name]["k_rot"] = g.graph_input(F32, (n, n), "attn_inp_k_rot")

    def indexer_rotation(self) -> Tensor:
        return self._attn_inputs["lid"]["k_rot"]

    def indexer_store(self, il: int, k: Tensor) -> None:
        """The indexer's key of each token written to its cache."""
        lid = self.memory.caches[1]
        self.expand(self._cpy_k(lid, il, k, self._attn_inputs[lid.name]["k_idxs"]))

    def indexer_keys(self, il: int) -> Tensor:
        """The indexer cache of a layer as one key head per cell, [head, 1, cells, streams]."""
        lid = self.memory.caches[1]
        k = self._cache_tensor(lid, il, "k")
        rows, rs = k.ne[0], g.row_size
        return g.view(k, (rows, 1, lid.cells, self.n_stream),
                      (rs(k.type, rows), rs(k.type, rows), rs(k.type, rows * lid.cells)))  # fmt: skip

    def indexer_mask(self) -> Tensor:
        """DSA's indexer cache's mask."""
        return self._attn_inputs["lid"]["mask"]

    def attn_mask(self, il: int) -> Tensor:
        """The KQ mask of the cache layer `il` attends over."""
        return self._attn_inputs[self.memory.cache_of(self.hp.kv_layer(il)).name]["mask"]

    def top_k_mask(self, mask: Tensor, top_k: Tensor) -> Tensor:
        """The sparse attentions' mask (the MLA sparse path of `build_attn`, copied by QSA): a copy of `mask` filled
        with -inf, zeros written at the cells each token's `top_k` indices name, `mask` added."""
        masked = g.fill(mask)
        masked = g.view(masked, (1, mask.ne[0], mask.ne[1], mask.ne[3]), masked.nb[:3])
        cells = g.view(top_k, (top_k.ne[0], top_k.ne[1], top_k.ne[3], 1),
                       (top_k.nb[1], top_k.nb[2], top_k.ne[3] * top_k.nb[3]))  # fmt: skip
        zeros = g.fill(g.new_tensor(F32, (1, *cells.ne[:3])))
        chosen = g.set_rows(masked, zeros, cells)
        nb = chosen.nb
        chosen = g.view(chosen, (chosen.ne[1], chosen.ne[2], 1, chosen.ne[3]), (nb[2], nb[3], nb[3]))
        return g.add(chosen, mask)

    def attn_dsa(self, il: int, q: Tensor, k: Tensor, v: Tensor, wo: Tensor, v_mla: Tensor, top_k: Tensor) -> Tensor:
        """`build_attn` with DSA's input: MLA over a K-only cache, each token attending only to the cells of its
        `top_k` indices (a copy of the mask filled with -inf, zeros written at those cells, the mask added)."""
        cache = self.memory.caches[0]
        inputs = self._attn_inputs[cache.name]
        for t in (q, v, k):
            self.expand(t)
        self.expand(self._cpy_k(cache, il, k, inputs["k_idxs"]))
        chosen = self.top_k_mask(inputs["mask"], top_k)
        kc = self._get_k(cache, il)
        vc = g.view(kc, (v.ne[0], kc.ne[1], kc.ne[2], kc.ne[3]), kc.nb[1:])
        return self.mm(wo, self.attn_mha(q, kc, vc, chosen, None, v_mla))

    def rs_inp(self) -> None:
        """`build_rs_inp`: which state rows each sequence copies (the whole state reserved: `n_rs` rows)."""
        n_rs = self.memory.recurrent.rows
        s_copy = g.graph_input(I32, (n_rs,), "rs_s_copy")
        self._rs = (g.view(s_copy, (self.n_seqs,)), g.view(s_copy, (n_rs - self.n_seqs,)))

    def rs_state(self, il: int, kind: str) -> Tensor:
        """A recurrent layer's conv (`r`), SSM (`s`) or PLE convolution (`p`) state: F32, a row per sequence."""
        state = self.memory.recurrent
        key = (il, kind)
        if key not in self._cache_tensors:
            width = {"r": state.n_embd_r, "s": state.n_embd_s, "p": state.n_embd_p}[kind]
            self._cache_tensors[key] = g.external(F32, (width, state.rows), f"cache_{kind}_l{il}",
                                                  device=self.layer_device(il))  # fmt: skip
        return self._cache_tensors[key]

    def build_rs(self, s: Tensor, state_size: int, get_rows=g.get_rows) -> Tensor:
        """`build_rs`: the states of this batch's sequences (through `get_rows`), the others copied on."""
        main, extra = self._rs
        states = g.reshape(s, state_size, s.ne[1])
        self.expand(g.scale_inplace(g.view(states, (state_size,))))  # clears the state to reuse
        out = self.expand(get_rows(states, main))
        rest = g.get_rows(states, extra)
        self.expand(g.cpy(rest, g.view(s, (state_size, extra.ne[0]), (s.nb[1],))))
        return out

    def token_shift_load(self, il: int) -> Tensor:
        """`build_rwkv_token_shift_load`: each sequence's last normed inputs to the time and channel mixes
        (`n_embd` x `token_shift_count` per sequence)."""
        shift = self.build_rs(self.rs_state(il, "r"), self.hp.n_embd_r)
        return g.reshape(shift, self.hp.n_embd, self.hp.token_shift_count, self.n_seqs)

    def token_shift_store(self, shift: Tensor, il: int) -> Tensor:
        """`build_rwkv_token_shift_store`: the batch's last normed inputs written back to the state."""
        state = self.rs_state(il, "r")
        return g.cpy(g.view(shift, (shift.n_elements,)), g.view(state, (self.hp.n_embd_r * self.n_seqs,)))

    # ------------------------------------------------------------------------------------------ blocks

    def norm(self, cur: Tensor, weight: Tensor | None, bias: Tensor | None = None, rms: bool = True,
             il: int | None = None) -> Tensor:  # fmt: skip
        """`build_norm`. Inside a layer (or given one, `il`; -1: none, as llama.cpp passes for some), the
        normalization (named "norm") is pinned to the layer's device when the batch is under 32 tokens or the whole
        model is offloaded (`graph_get_cb`), so that the scheduler does not run it where the previous layer ran."""
        cur = g.rms_norm(cur) if rms else g.norm(cur)
        il = self._layer if il is None else il
        if (weight is not None or bias is not None) and il is not None and il >= 0 and self._pin_norms:
            cur.pinned = self.placement.device_of(il)
        if weight is not None:
            cur = g.mul(cur, weight)
        if bias is not None:
            cur = g.add(cur, bias)
        return cur

    def mm(self, weight: Tensor, cur: Tensor) -> Tensor:
        """`build_lora_mm`: the weight's product, plus B (A cur), scaled, for each applied adapter that adapts it.
        A pair that does not fit the product (the token embeddings' flipped pair, found by a tied output, which
        is named `token_embd.weight`) is refused: there ggml_mul_mat's GGML_ASSERT aborts llama.cpp."""
        res = g.mul_mat(weight, cur)
        if self.ctx.loras:  # (the estimates without adapters, most, skip the look-up)
            for a, b in self.lora_pairs(weight):
                if a.ne[0] != cur.ne[0] or b.ne[0] != a.ne[1]:
                    raise UnsupportedError(_unfit_pair(weight, a, cur))
                res = g.add(res, g.scale(g.mul_mat(b, g.mul_mat(a, cur))))
        return res

    def lora_pairs(self, weight: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Each applied adapter's (A, B) for `weight`, in `Context.loras`'s order, on the weight's device (the
        adapter's buffer is of the weight's buffer type) but not weights to the scheduler: llama.cpp leaves the
        adapter's buffer's usage unset, so their products are scheduled by their neighbours, as over a cache, and a
        product scheduled on another device copies them there (the token embeddings' pair, on the CPU, onto the
        first GPU)."""
        pairs = []
        for tensors in self.ctx.loras:
            if (a := tensors.get(f"{weight.name}.lora_a")) is not None:
                b = tensors[f"{weight.name}.lora_b"]
                made = (
                    g.external(int(t.dtype), tuple(reversed(t.shape)), t.name, device=weight.device) for t in (a, b)
                )
                pairs.append(tuple(made))
        return pairs

    def qkv(self, il: int, cur: Tensor, head_dim: int, n_head: int, n_head_kv: int,
            reshape: bool = True) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
        """`build_qkv`: separate Q, K, V projections (biases where the file has them), or one fused matrix;
        `reshape` False: each a matrix of whole rows (`build_qkv(..., false)`), not split into heads."""
        wqkv = self.w("attn_qkv.weight", il)
        if wqkv is not None:
            qkv = self.mm(wqkv, cur)
            bias = self.w("attn_qkv.bias", il)
            if bias is not None:
                qkv = g.add(qkv, bias)
            if not reshape:
                widths = (head_dim * n_head, head_dim * n_head_kv, head_dim * n_head_kv)
                q, k, v = (g.cont(g.view(qkv, (n, self.n_tokens), (qkv.nb[1],))) for n in widths)
                return q, k, v
            size = g.row_size(qkv.type, 1)
            q = g.view(qkv, (head_dim, n_head, self.n_tokens), (size * head_dim, qkv.nb[1]))
            k = g.view(qkv, (head_dim, n_head_kv, self.n_tokens), (size * head_dim, qkv.nb[1]))
            v = g.view(qkv, (head_dim, n_head_kv, self.n_tokens), (size * head_dim, qkv.nb[1]))
            return q, k, v  # views at their offsets into qkv; offsets never change what is allocated
        out = []
        for name in "qkv":
            t = self.mm(self.w(f"attn_{name}.weight", il), cur)
            bias = self.w(f"attn_{name}.bias", il)
            if bias is not None:
                t = g.add(t, bias)
            out.append(t)
        q, k, v = out
        if not reshape:
            return q, k, v
        return (g.reshape(q, head_dim, n_head, self.n_tokens), g.reshape(k, head_dim, n_head_kv, self.n_tokens),
                g.reshape(v, head_dim, n_head_kv, self.n_tokens))  # fmt: skip

    def _hadamard(self, cur: Tensor, rot: Tensor) -> Tensor:
        """`llama_mul_mat_hadamard`."""
        n = rot.ne[0]
        contiguous = cur.nb == g.Tensor(cur.type, cur.ne).nb
        res = g.reshape(cur, n, cur.n_elements // n) if contiguous else g.cont(cur, n, cur.n_elements // n)
        return g.reshape(g.mul_mat(rot, res), *cur.ne)

    def _cache_tensor(self, cache: KVCache, il: int, kind: str) -> Tensor:
        """Layer `il`'s K or V cache tensor: its own, or the one of the layer it reuses (`hp.kv_layer`)."""
        il = self.hp.kv_layer(il)
        key = (il, kind, cache.name)
        t = self._cache_tensors.get(key)
        if t is None:
            i = cache.layers.index(il)
            rows = cache.k_rows[i] if kind == "k" else cache.v_rows[i]
            t = g.external(cache.type_k if kind == "k" else cache.type_v, (rows, cache.cells, cache.n_stream),
                           f"cache_{kind}_l{il}", device=self.layer_device(il))  # fmt: skip
            self._cache_tensors[key] = t
        return t

    def attn(self, il: int, q: Tensor, k: Tensor | None, v: Tensor | None, wo: Tensor | None, wo_b: Tensor | None,
             sinks: Tensor | None = None, top_k: Tensor | None = None) -> Tensor:  # fmt: skip
        """`build_attn` with a KV cache: store K and V, attend over the whole cache, project. Without K and V (a
        layer that reuses another's cache) nothing is stored. `top_k`: each token attends only to the cells it
        names (QSA's `build_attn_qsa`)."""
        cache = self.memory.cache_of(self.hp.kv_layer(il))
        inputs = self._attn_inputs[cache.name]
        swa_pair = len(self.memory.caches) > 1
        if inputs["k_rot"] is not None:
            q = self._hadamard(q, inputs["k_rot"])
            k = k if k is None else self._hadamard(k, inputs["k_rot"])
        if inputs["v_rot"] is not None and v is not None:
            v = self._hadamard(v, inputs["v_rot"])
        order = (q, k, v) if swa_pair else (q, v, k)  # llama_kv_cache_iswa's build_attn expands K before V
        for t in order:
            if t is not None:
                self.expand(t)
        if k is not None:
            self.expand(self._cpy_k(cache, il, k, inputs["k_idxs"]))
        if v is not None:
            self.expand(self._cpy_v(cache, il, v, inputs["v_idxs"]))
        mask = inputs["mask"] if top_k is None else self.top_k_mask(inputs["mask"], top_k)
        cur = self.attn_mha(q, self._get_k(cache, il), self._get_v(cache, il), mask, sinks)
        if inputs["v_rot"] is not None:
            cur = self._hadamard(cur, inputs["v_rot"])
        if wo is not None:
            cur = self.mm(wo, cur)
        if wo_b is not None:
            cur = g.add(cur, wo_b)
        return cur

    def attn_k_only(self, il: int, q: Tensor, k: Tensor, v: Tensor, wo: Tensor, v_mla: Tensor) -> Tensor:
        """`build_attn` over a K-only cache (MLA): the cached K doubles as V."""
        cache = self.memory.cache_of(il)
        inputs = self._attn_inputs[cache.name]
        for t in (q, v, k):
            self.expand(t)
        self.expand(self._cpy_k(cache, il, k, inputs["k_idxs"]))
        kc = self._get_k(cache, il)
        vc = g.view(kc, (v.ne[0], kc.ne[1], kc.ne[2], kc.ne[3]), kc.nb[1:])
        return self.mm(wo, self.attn_mha(q, kc, vc, inputs["mask"], None, v_mla))

    def attn_inp_no_cache(self) -> tuple[Tensor, Tensor | None]:
        """`build_attn_inp_no_cache`: the mask of a batch attending to itself (encoders), and a second one for the
        sliding-window layers where the model has them (None where not)."""
        mask_type = F16 if self.ctx.flash_attn else F32
        shape = (self.n_tokens, self.n_tokens, 1, 1)
        mask = g.graph_input(mask_type, shape, "self_kq_mask")
        swa = g.graph_input(mask_type, shape, "self_kq_mask_swa") if self.hp.swa_type != SWA_NONE else None
        return mask, swa

    def _cpy_k(self, cache: KVCache, il: int, k: Tensor, idxs: Tensor) -> Tensor:
        dst = self._cache_tensor(cache, il, "k")
        rows = k.ne[0] * k.ne[1]
        cur = g.view(k, (rows, k.ne[2]), (k.nb[2],))
        if cache.n_stream > 1:
            dst = g.reshape(dst, rows, cache.cells * cache.n_stream)
        return g.set_rows(dst, cur, idxs)

    def _cpy_v(self, cache: KVCache, il: int, v: Tensor, idxs: Tensor) -> Tensor:
        dst = self._cache_tensor(cache, il, "v")
        rows, n_tokens = v.ne[0] * v.ne[1], v.ne[2]
        if not cache.v_trans:
            cur = g.view(v, (rows, n_tokens), (v.nb[2],))
            if cache.n_stream > 1:
                dst = g.reshape(dst, rows, cache.cells * cache.n_stream)
            return g.set_rows(dst, cur, idxs)
        mergeable = g.row_size(v.type, rows) == v.nb[2]
        cur = g.reshape(v, rows, n_tokens) if mergeable else g.cont(v, rows, n_tokens)
        if rows < dst.ne[0]:
            cur = g.pad(cur, dst.ne[0] - rows)
        view = g.reshape(dst, 1, dst.n_elements)
        cur = g.reshape(cur, 1, cur.n_elements)
        return g.set_rows(view, cur, idxs)

    def _get_k(self, cache: KVCache, il: int) -> Tensor:
        k = self._cache_tensor(cache, il, "k")
        head, rows = self.hp.head_k(il), k.ne[0]
        rs = g.row_size
        return g.view(k, (head, self.hp.n_head_kv[il], cache.cells, self.n_stream),
                      (rs(k.type, head), rs(k.type, rows), rs(k.type, rows * cache.cells)))  # fmt: skip

    def _get_v(self, cache: KVCache, il: int) -> Tensor:
        v = self._cache_tensor(cache, il, "v")
        head, rows, rs = self.hp.head_v(il), v.ne[0], g.row_size
        if not cache.v_trans:
            return g.view(v, (head, self.hp.n_head_kv[il], cache.cells, self.n_stream),
                          (rs(v.type, head), rs(v.type, rows), rs(v.type, rows * cache.cells)))  # fmt: skip
        cells = cache.cells
        return g.view(v, (cells, self.hp.n_head_kv[il], head, self.n_stream),
                      (rs(v.type, cells * head), rs(v.type, cells), rs(v.type, cells * rows)))  # fmt: skip

    def attn_mha(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, sinks: Tensor | None = None,
                 v_mla: Tensor | None = None) -> Tensor:  # fmt: skip
        """`build_attn_mha`: flash attention, or KQ, softmax and KQV (`v_mla` decompresses MLA's values)."""
        v_trans = v.nb[1] > v.nb[2]
        n_stream = k.ne[3]
        per = q.ne[2] // n_stream
        q = g.view(q, (q.ne[0], q.ne[1], per, n_stream), (q.nb[1], q.nb[2], q.nb[2] * per))
        q, k, v = g.permute(q, 0, 2, 1, 3), g.permute(k, 0, 2, 1, 3), g.permute(v, 0, 2, 1, 3)
        if self.ctx.flash_attn:
            if v_trans:
                v = g.transpose(v)
            if k.type == F32:
                k = g.cast(k, F16)
            if v.type == F32:
                v = g.cast(v, F16)
            cur = g.flash_attn_ext(q, k, v, mask, sinks)
            self.flash_attn_nodes.append((cur, self._layer))
            if v_mla is not None:
                cur = g.cont(g.permute(g.mul_mat(v_mla, g.permute(cur, 0, 2, 1, 3)), 0, 2, 1, 3))
            cur = g.reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        else:
            kq = g.mul_mat(k, q)
            if self.hp.flags.get("attn_softcap"):
                kq = g.scale(g.unary(g.scale(kq), "tanh"))
            kq = g.soft_max(kq, mask, sinks)
            if not v_trans:
                v = g.cont(g.transpose(v))
            kqv = g.mul_mat(v, kq)
            if v_mla is not None:
                kqv = g.mul_mat(v_mla, kqv)
            cur = g.permute(kqv, 0, 2, 1, 3)
            cur = g.cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        return self.expand(cur)

    def ffn(self, cur: Tensor, il: int, *, biases: bool = True, suffix: str = "", act: str = "gelu") -> Tensor:
        """`build_ffn` over the layer's ffn_up / ffn_gate / ffn_down (`suffix` "_shexp": the shared expert):
        with a gate, the gated unit (`ggml_swiglu_split` / `ggml_geglu_split`); without, the activation `act`
        alone ("swiglu": the gated unit over the two halves of the up projection, `LLM_FFN_SWIGLU`; "relu_sqr": a
        ReLU then its square, two nodes). `biases`: whether the architecture passes the layer's biases in."""

        def weight(name: str, kind: str = "weight") -> Tensor | None:
            if kind == "bias" and not biases:
                return None
            return self.w(f"ffn_{name}{suffix}.{kind}", il)

        up, gate, down = weight("up"), weight("gate"), weight("down")
        tmp = self.mm(up, cur) if up is not None else cur
        if (bias := weight("up", "bias")) is not None:
            tmp = g.add(tmp, bias)
        if gate is not None:
            cur = self.mm(gate, cur)
            if (bias := weight("gate", "bias")) is not None:
                cur = g.add(cur, bias)
            cur = g.glu_split(cur, tmp)
        elif act == "relu_sqr":
            cur = g.sqr(g.unary(tmp, "relu"))
        else:
            cur = g.glu(tmp) if act == "swiglu" else g.unary(tmp, act)
        if down is not None:
            cur = self.mm(down, cur)
        if (bias := weight("down", "bias")) is not None:
            cur = g.add(cur, bias)
        return cur

    def mm_id(self, name: str, il: int, cur: Tensor, ids: Tensor) -> Tensor:
        """`build_lora_mm_id` over the experts' matrix `name` (`ffn_down_exps`, ...): each token through its chosen
        experts, times each expert's scale where the file has one (`<name>.scale`, which llama.cpp loads for every
        architecture)."""
        weight = self.w(f"{name}.weight", il)
        res = g.mul_mat_id(weight, cur, ids)
        if f"blk.{il}.{name}.scale" in self.tensors:
            scale = self.w(f"{name}.scale", il)
            scale = g.repeat(g.reshape(scale, 1, scale.ne[0], 1), 1, scale.ne[0], cur.ne[2], 1)
            res = g.mul(res, g.get_rows(scale, ids))
        return self.lora_id(res, weight, cur, ids)

    def lora_id(self, res: Tensor, weight: Tensor, cur: Tensor, ids: Tensor) -> Tensor:
        """`build_lora_mm_id`'s adapters: `res` (the experts' product) plus B (A cur) through the same experts,
        scaled, for each applied adapter that adapts the experts' matrix `weight`."""
        for a, b in self.lora_pairs(weight):
            res = g.add(res, g.scale(g.mul_mat_id(b, g.mul_mat_id(a, cur, ids), ids)))
        return res

    def moe_ffn(self, cur: Tensor, il: int, n_expert: int, n_used: int, *, gating: str = "softmax",
                norm_w: bool = True, w_scale: float = 0.0, exp_probs_b: Tensor | None = None,
                biases: bool = False, weights_first: bool = False, logits: Tensor | None = None,
                act: str = "silu") -> Tensor:  # fmt: skip
        """`build_moe_ffn`: route each token to its top experts, run them, and sum their weighted outputs.
        `weights_first` (Llama 4): the experts are chosen by the raw logits, and each token's input is weighted
        before its experts run instead of their outputs after. Experts with one fused gate-and-up matrix
        (`ffn_gate_up_exps`) run it once and split the result. `logits`: the router's, where the architecture
        computes them itself (`probs_in`, Gemma 4). `act`: gateless experts' activation, "silu" or "relu_sqr"."""
        n_embd, n_tokens = cur.ne[0], cur.ne[1]
        if logits is None:
            logits = self.mm(self.w("ffn_gate_inp.weight", il), cur)
        if biases and (b := self.w("ffn_gate_inp.bias", il)) is not None:
            logits = g.add(logits, b)
        if gating == "softmax":
            probs = g.soft_max(logits)
        elif gating == "sigmoid":
            probs = g.unary(logits, "sigmoid")
        else:  # softmax_weight: the weights are soft-maxed after the choice
            probs = logits
        selection = g.add(probs, exp_probs_b) if exp_probs_b is not None else probs
        if weights_first:
            selection = logits
        if self.hp.n_expert_groups > 1 and n_tokens > 0:
            selection = self._expert_groups(selection, n_expert, n_tokens)
        selected = g.argsort_top_k(selection, n_used)
        probs = g.reshape(probs, 1, n_expert, n_tokens)
        weights = g.get_rows(probs, selected)
        if gating == "softmax_weight":
            weights = g.reshape(g.soft_max(g.reshape(weights, n_used, n_tokens)), 1, n_used, n_tokens)
        if norm_w:
            weights = g.reshape(weights, n_used, n_tokens)
            total = g.clamp(g.sum_rows(weights))
            weights = g.reshape(g.div(weights, total), 1, n_used, n_tokens)
        if w_scale not in (0.0, 1.0):
            weights = g.scale(weights)
        self.expand(weights)
        cur = g.reshape(cur, n_embd, 1, n_tokens)
        if weights_first:
            cur = g.mul(g.repeat(cur, n_embd, n_used, n_tokens, 1), weights)
        if (gate_up := self.w("ffn_gate_up_exps.weight", il)) is not None:
            fused = self.lora_id(g.mul_mat_id(gate_up, cur, selected), gate_up, cur, selected)
            n_ff = fused.ne[0] // 2
            gated, up = (g.view(fused, (n_ff, *fused.ne[1:3]), fused.nb[1:3]) for _ in range(2))
        else:
            up = self.mm_id("ffn_up_exps", il, cur, selected)
            if biases and (b := self.w("ffn_up_exps.bias", il)) is not None:
                up = g.add_id(up, b, selected)
            gate_w = self.w("ffn_gate_exps.weight", il)
            gated = self.mm_id("ffn_gate_exps", il, cur, selected) if gate_w is not None else up
            if biases and (b := self.w("ffn_gate_exps.bias", il)) is not None:
                gated = g.add_id(gated, b, selected)
        if gated is not up:
            hidden = g.glu_split(gated, up)
        else:
            hidden = g.sqr(g.unary(gated, "relu")) if act == "relu_sqr" else g.unary(gated, "silu")
        experts = self.mm_id("ffn_down_exps", il, hidden, selected)
        if biases and (b := self.w("ffn_down_exps.bias", il)) is not None:
            experts = g.add_id(experts, b, selected)
        if not weights_first:
            experts = g.mul(experts, weights)
        self.expand(experts)
        views = [self.expand(g.view(experts, (n_embd, n_tokens), (experts.nb[2],))) for _ in range(n_used)]
        out = views[0]
        for view in views[1:]:
            out = self.expand(g.add(out, view))
        return g.cont(out) if n_used == 1 else out

    def _expert_groups(self, selection: Tensor, n_expert: int, n_tokens: int) -> Tensor:
        """DeepSeek-V3's routing: the experts of the `n_group_used` groups with the best two scores each, the
        others' scores set to -inf."""
        n_groups = self.hp.n_expert_groups
        groups = g.reshape(selection, n_expert // n_groups, n_groups, n_tokens)
        scores = g.get_rows(g.reshape(groups, 1, *groups.ne[:3]), g.argsort_top_k(groups, 2))
        scores = g.sum_rows(g.reshape(scores, *scores.ne[1:]))
        chosen = g.argsort_top_k(g.reshape(scores, scores.ne[1], scores.ne[2]), self.hp.n_group_used)
        kept = g.set_rows(g.fill(groups), g.get_rows(groups, chosen), chosen)
        return g.reshape(kept, n_expert, n_tokens)

    # ------------------------------------------------------------------------------------------ the end

    def finish(self, embd: Tensor, logits: Tensor | None, hidden: Tensor | None = None) -> g.Graph:
        """Expand the last tensor, add the pooling of embeddings (`build_pooling`) and mark the outputs
        (`set_outputs`): logits, embeddings, pooled embeddings, and the last hidden state `hidden` where the
        architecture keeps it for multi-token prediction (`t_h_nextn`)."""
        self.expand(logits if logits is not None else embd)
        pooled = self._pooling(embd) if self.ctx.embeddings else None
        for t in (logits, embd, pooled, hidden):
            if t is not None:
                t.flags |= g.OUTPUT
        return self.graph

    def _pooling(self, embd: Tensor) -> Tensor | None:
        pooling = self.ctx.pooling
        if pooling == POOLING_MEAN:
            mean = g.graph_input(F32, (self.n_tokens, self.n_seqs), "mean")
            return self.expand(g.mul_mat(g.cont(g.transpose(embd)), mean))
        if pooling in (POOLING_CLS, POOLING_LAST):
            cls = g.graph_input(I32, (self.n_seqs,), "cls")
            return self.expand(g.get_rows(embd, cls))
        return None
