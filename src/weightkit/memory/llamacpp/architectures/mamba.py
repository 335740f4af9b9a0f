"""Mamba-1 and Mamba-2's graphs, and the Mamba-2 layer the hybrids share."""

from __future__ import annotations

from collections.abc import Callable

from .. import ggml as g
from ..ggml import Graph, Tensor
from ..graph_builder import GraphBuilder
from .decoder import logits, output_rows


def mamba_layer(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    """`llm_build_mamba_base::build_mamba_layer` (Mamba-1): the input projection split into x and z, the causal
    convolution over the stored conv state, x projected to dt, B and C (RMS-normed where the model says so), the
    selective scan over the stored SSM state (one state per channel and per state dimension), the gate."""
    hp = b.hp
    d_conv, d_inner, d_state, dt_rank = hp.ssm_d_conv, hp.ssm_d_inner, hp.ssm_d_state, hp.ssm_dt_rank
    n_seqs = b.n_seqs
    per_seq = b.n_tokens // n_seqs
    conv_states, ssm_states = b.rs_state(il, "r"), b.rs_state(il, "s")
    conv = g.reshape(b.build_rs(conv_states, hp.n_embd_r), d_conv - 1, d_inner, n_seqs)
    xz = b.mm(b.w("ssm_in.weight", il), g.reshape(cur, cur.ne[0], per_seq, n_seqs))
    x = g.view(xz, (d_inner, per_seq, n_seqs), xz.nb[1:3])
    z = g.view(xz, (d_inner, per_seq, n_seqs), xz.nb[1:3])
    conv_x = g.concat(conv, g.transpose(x), 0)
    last = g.view(conv_x, (d_conv - 1, d_inner, n_seqs), conv_x.nb[1:3])
    b.expand(g.cpy(last, g.view(conv_states, ((d_conv - 1) * d_inner * n_seqs,))))
    x = g.unary(g.add(g.ssm_conv(conv_x, b.w("ssm_conv1d.weight", il)), b.w("ssm_conv1d.bias", il)), "silu")
    x_db = b.mm(b.w("ssm_x.weight", il), x)
    nb = x_db.nb
    dt = g.view(x_db, (dt_rank, per_seq, n_seqs), nb[1:3])
    b_ssm = g.view(x_db, (d_state, 1, per_seq, n_seqs), (d_state * nb[0], nb[1], nb[2]))
    c_ssm = g.view(x_db, (d_state, 1, per_seq, n_seqs), (d_state * nb[0], nb[1], nb[2]))
    if hp.flags.get("ssm_dt_b_c_rms"):
        dt, b_ssm, c_ssm = b.norm(dt, None), b.norm(b_ssm, None), b.norm(c_ssm, None)
    else:
        dt = g.cont(dt)
    dt = g.add(b.mm(b.w("ssm_dt.weight", il), dt), b.w("ssm_dt.bias", il))
    heads = g.reshape(x, 1, d_inner, per_seq, n_seqs)

    def scan(states: Tensor, ids: Tensor) -> Tensor:
        ssm = g.reshape(states, d_state, 1, d_inner, ssm_states.ne[1])
        return g.ssm_scan(ssm, heads, dt, b.w("ssm_a", il), b_ssm, c_ssm, ids)

    y_ssm = b.build_rs(ssm_states, hp.n_embd_s, scan)
    size = d_state * d_inner * n_seqs
    b.expand(g.cpy(g.view(y_ssm, (size,)), g.view(ssm_states, (size,))))
    y = g.view(y_ssm, (d_inner, per_seq, n_seqs), heads.nb[2:4])
    y = g.glu_split(g.cont(z), g.add(y, g.mul(x, b.w("ssm_d", il))))
    cur = b.mm(b.w("ssm_out.weight", il), y)
    return g.reshape(cur, cur.ne[0], per_seq * n_seqs)


def mamba2_layer(b: GraphBuilder, il: int, cur: Tensor) -> Tensor:
    """`llm_build_mamba_base::build_mamba2_layer`: the input projection split into z, xBC and dt, the causal
    convolution over the stored conv state, the selective scan over the stored SSM state, the gated RMS norm."""
    hp = b.hp
    d_conv, d_inner, d_state, n_group = hp.ssm_d_conv, hp.ssm_d_inner, hp.ssm_d_state, hp.ssm_n_group
    n_head = hp.ssm_dt_rank
    head_dim = d_inner // n_head
    n_seqs = b.n_seqs
    per_seq = b.n_tokens // n_seqs
    channels = d_inner + 2 * n_group * d_state
    conv_states, ssm_states = b.rs_state(il, "r"), b.rs_state(il, "s")
    conv = g.reshape(b.build_rs(conv_states, hp.n_embd_r), d_conv - 1, channels, n_seqs)
    zxbcdt = b.mm(b.w("ssm_in.weight", il), cur)
    zxbcdt = g.reshape(zxbcdt, zxbcdt.ne[0], per_seq, n_seqs)
    nb = zxbcdt.nb
    z = g.view(zxbcdt, (head_dim, n_head, per_seq, n_seqs), (head_dim * nb[0], nb[1], nb[2]))
    xbc = g.view(zxbcdt, (channels, per_seq, n_seqs), (nb[1], nb[2]))
    dt = g.view(zxbcdt, (n_head, per_seq, n_seqs), (nb[1], nb[2]))
    conv_x = g.concat(conv, g.transpose(xbc), 0)
    last = g.view(conv_x, (d_conv - 1, channels, n_seqs), (conv_x.nb[1], conv_x.nb[2]))
    b.expand(g.cpy(last, g.view(conv_states, ((d_conv - 1) * channels, n_seqs), (conv_states.nb[1],))))
    xbc = g.unary(g.add(g.ssm_conv(conv_x, b.w("ssm_conv1d.weight", il)), b.w("ssm_conv1d.bias", il)), "silu")
    nb = xbc.nb
    x = g.view(xbc, (head_dim, n_head, per_seq, n_seqs), (head_dim * nb[0], nb[1], nb[2]))
    b_ssm = g.view(xbc, (d_state, n_group, per_seq, n_seqs), (d_state * nb[0], nb[1], nb[2]))
    c_ssm = g.view(xbc, (d_state, n_group, per_seq, n_seqs), (d_state * nb[0], nb[1], nb[2]))
    dt = g.add(g.cont(dt), b.w("ssm_dt.bias", il))
    slots = ssm_states.ne[1]

    def scan(states: Tensor, ids: Tensor) -> Tensor:
        ssm = g.reshape(states, d_state, head_dim, n_head, slots)
        return g.ssm_scan(ssm, x, dt, b.w("ssm_a", il), b_ssm, c_ssm, ids)

    y_ssm = b.build_rs(ssm_states, hp.n_embd_s, scan)
    size = d_state * d_inner
    row = g.row_size(y_ssm.type, size)
    b.expand(g.cpy(g.view(y_ssm, (size, n_seqs, 1), (row, row * n_seqs)),
                   g.view(ssm_states, (size, n_seqs, 1), (ssm_states.nb[1], ssm_states.nb[1] * slots))))  # fmt: skip
    xnb = x.nb[1]
    y = g.view(y_ssm, (head_dim, n_head, per_seq, n_seqs), (xnb, n_head * xnb, per_seq * n_head * xnb))
    y = g.add(y, g.mul(x, b.w("ssm_d", il)))
    y = g.glu_split(g.cont(z), y)
    if (norm := b.w("ssm_norm.weight", il)) is not None:
        y = b.norm(g.reshape(y, d_inner // n_group, n_group, per_seq, n_seqs), norm)
    return b.mm(b.w("ssm_out.weight", il), g.reshape(y, d_inner, per_seq * n_seqs))


def _mamba(b: GraphBuilder, layer: Callable[[GraphBuilder, int, Tensor], Tensor]) -> Graph:
    """Every layer recurrent, each built by `layer`."""
    inp = b.inp_embd(b.w("token_embd.weight"))
    b.rs_inp()
    out_ids = b.inp_out_ids()
    for il in b.each_layer():
        cur = layer(b, il, b.norm(inp, b.w("attn_norm.weight", il)))
        cur, inp = output_rows(b, il, out_ids, cur, inp)
        inp = g.add(cur, inp)
    return logits(b, b.norm(inp, b.w("output_norm.weight")))


def mamba(b: GraphBuilder) -> Graph:
    """`llama_model_mamba::graph` for Mamba-1."""
    return _mamba(b, mamba_layer)


def mamba2(b: GraphBuilder) -> Graph:
    """`llama_model_mamba::graph` for Mamba-2."""
    return _mamba(b, mamba2_layer)
