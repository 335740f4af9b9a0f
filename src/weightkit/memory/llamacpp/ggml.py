"""A shape-only ggml: tensors with ggml's types, shapes, strides and views, the ops llama.cpp's graphs use, and
ggml's graph expansion order. Nothing is computed; what matters is what `ggml.c` gives each result (type,
`ne`, `nb`, whether it is a view of another tensor) and the order `ggml_build_forward_expand` puts the nodes
and leaves in, since ggml's allocator (`alloc.py`) works from exactly that.

Weights and cache tensors are `external` leaves: they have buffers of their own, so the allocator skips
them; only their shapes matter. Graph inputs are leaves flagged INPUT; every op result is a node, views
included. Each op follows the function of the same name in `ggml/src/ggml.c` of the llama.cpp that
llama-cpp-python 0.3.36 bundles. A shape's entries may be `Pair`s: one build then makes two graphs' shapes, the
prompt graph's and the token-generation graph's, wherever their code goes the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from operator import attrgetter

from ...dtypes import GGMLType, ggml_type

F32, F16, I32, I64 = GGMLType.F32, GGMLType.F16, GGMLType.I32, GGMLType.I64
INPUT, OUTPUT = 1, 2

_SIZES = {t: (ggml_type(t).type_size, ggml_type(t).block_size) for t in GGMLType if not ggml_type(t).removed}


_PADDING = ((1, 1, 1, 1), (1, 1, 1), (1, 1), (1,))  # what makes a shape of fewer dimensions four long


def row_size(type: int, n: int) -> int:
    """`ggml_row_size`: bytes of `n` elements of `type`."""
    size, block = _SIZES[type]
    return size * n // block


class PairDiverged(Exception):
    """A `Pair` used where the two graphs it stands for would go different ways (or where that cannot be seen)."""


def _diverged(*_: object) -> None:
    raise PairDiverged


class Pair:
    """A count with one value in the prompt graph (`prompt`) and another in the token-generation graph (`token`),
    so that one build makes both graphs' shapes (`compute.py`). Arithmetic with ints and pairs gives pairs (or an
    int where the two agree); a comparison or truth test gives the answer both agree on. Anything that would take
    one of the two alone raises `PairDiverged` instead: a comparison they answer differently, hashing (a cache
    keyed by a shape), and every use as an int (`range`, an index, a repetition count: not an int subclass, so
    Python asks `__index__`), so that the caller builds the two graphs apart."""

    __slots__ = ("prompt", "token")

    def __repr__(self) -> str:
        return f"Pair({self.prompt}, {self.token})"

    def _both(self, other: object) -> tuple[int, int, int, int]:
        if other.__class__ is int:
            return self.prompt, self.token, other, other
        if other.__class__ is Pair:
            return self.prompt, self.token, other.prompt, other.token
        raise PairDiverged

    def __add__(self, other: object) -> Pair | int:
        if other.__class__ is int:  # (the common case, inline)
            return pair(self.prompt + other, self.token + other)
        a, b, c, d = self._both(other)
        return pair(a + c, b + d)

    def __sub__(self, other: object) -> Pair | int:
        if other.__class__ is int:  # (the common case, inline)
            return pair(self.prompt - other, self.token - other)
        a, b, c, d = self._both(other)
        return pair(a - c, b - d)

    def __rsub__(self, other: object) -> Pair | int:
        a, b, c, d = self._both(other)
        return pair(c - a, d - b)

    def __mul__(self, other: object) -> Pair | int:
        if other.__class__ is int:  # (the common case, inline)
            return pair(self.prompt * other, self.token * other)
        a, b, c, d = self._both(other)
        return pair(a * c, b * d)

    def __floordiv__(self, other: object) -> Pair | int:
        if other.__class__ is int:  # (the common case, inline)
            return pair(self.prompt // other, self.token // other)
        a, b, c, d = self._both(other)
        return pair(a // c, b // d)

    def __rfloordiv__(self, other: object) -> Pair | int:
        a, b, c, d = self._both(other)
        return pair(c // a, d // b)

    def __mod__(self, other: object) -> Pair | int:
        if other.__class__ is int:  # (the common case, inline)
            return pair(self.prompt % other, self.token % other)
        a, b, c, d = self._both(other)
        return pair(a % c, b % d)

    def __neg__(self) -> Pair | int:
        return pair(-self.prompt, -self.token)

    def _agreed(self, first: bool, second: bool) -> bool:
        if first is not second:
            raise PairDiverged
        return first

    def __eq__(self, other: object) -> bool:
        if other.__class__ is Pair:
            return self._agreed(self.prompt == other.prompt, self.token == other.token)
        return self._agreed(self.prompt == other, self.token == other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __lt__(self, other: object) -> bool:
        a, b, c, d = self._both(other)
        return self._agreed(a < c, b < d)

    def __le__(self, other: object) -> bool:
        a, b, c, d = self._both(other)
        return self._agreed(a <= c, b <= d)

    def __gt__(self, other: object) -> bool:
        a, b, c, d = self._both(other)
        return self._agreed(a > c, b > d)

    def __ge__(self, other: object) -> bool:
        a, b, c, d = self._both(other)
        return self._agreed(a >= c, b >= d)

    def __bool__(self) -> bool:
        return self._agreed(bool(self.prompt), bool(self.token))

    __radd__, __rmul__ = __add__, __mul__
    __hash__ = __index__ = __int__ = __float__ = __str__ = __format__ = _diverged  # type: ignore[assignment]
    __truediv__ = __rtruediv__ = __rmod__ = __divmod__ = __rdivmod__ = __pow__ = __rpow__ = _diverged
    __lshift__ = __rlshift__ = __rshift__ = __rrshift__ = __and__ = __rand__ = __or__ = __ror__ = _diverged
    __xor__ = __rxor__ = __pos__ = __abs__ = __invert__ = __round__ = __trunc__ = __floor__ = __ceil__ = _diverged


def pair(prompt: int, token: int) -> Pair | int:
    """The count `prompt` in the prompt graph and `token` in the token-generation graph (an int where alike)."""
    if prompt == token:
        return prompt
    made = object.__new__(Pair)
    made.prompt, made.token = prompt, token
    return made


def unpair(tensors: Iterable[Tensor]) -> dict[Tensor, int]:
    """Each tensor's `ggml_nbytes` in the token-generation graph, each tensor's `nbytes` left the prompt graph's
    (its shape and strides keep both, for the allocator's in-place checks to agree on)."""
    token_bytes = {}
    for t in tensors:
        n = t.nbytes
        if n.__class__ is Pair:
            t.nbytes, token_bytes[t] = n.prompt, n.token
        else:
            token_bytes[t] = n
    return token_bytes


def _strides(type: int, ne: tuple[int, int, int, int]) -> tuple[tuple[int, int, int, int], int]:
    """The strides and `ggml_nbytes` of a contiguous tensor (no element beyond the last row's end)."""
    size, block = _SIZES[type]
    nb1 = size * (ne[0] // block)
    nb2 = nb1 * ne[1]
    nb3 = nb2 * ne[2]
    return (size, nb1, nb2, nb3), nb3 * ne[3]


_contiguous = lru_cache(maxsize=4096)(_strides)  # (kept for the shapes seen last: a graph makes most of its
# shapes many times over)


def _contiguous_paired(type: int, ne: tuple) -> tuple[tuple, Pair | int]:
    """`_contiguous` of a shape holding `Pair`s (which cannot be hashed), kept by both values of each."""
    a, b, c, d = ne
    return _contiguous_by_values(type, a if a.__class__ is not Pair else (a.prompt, a.token),
                                 b if b.__class__ is not Pair else (b.prompt, b.token),
                                 c if c.__class__ is not Pair else (c.prompt, c.token),
                                 d if d.__class__ is not Pair else (d.prompt, d.token))  # fmt: skip


@lru_cache(maxsize=1024)
def _contiguous_by_values(type: int, *values: int | tuple[int, int]) -> tuple[tuple, Pair | int]:
    return _strides(type, tuple(pair(*n) if n.__class__ is tuple else n for n in values))


class Tensor:
    """What the allocator and the next op need of a ggml tensor (`nbytes`: `ggml_nbytes`, worked out once)."""

    __slots__ = ("device", "external", "flags", "name", "nb", "nbytes", "ne", "op", "pinned", "src", "type",
                 "view_src", "weight")  # fmt: skip

    def __init__(self, type: int, ne: Sequence[int], op: str = "NONE", src: Sequence[Tensor | None] = (),
                 view_src: Tensor | None = None, nb: Sequence[int] | None = None) -> None:  # fmt: skip
        ne = tuple(ne)
        if len(ne) != 4:
            ne += _PADDING[len(ne)]
        self.type = type
        self.ne = ne
        self.op = op
        self.src = tuple(src)
        if view_src is not None and view_src.view_src is not None:
            view_src = view_src.view_src  # views always point at the tensor that owns the memory
        self.view_src = view_src
        if nb is None:
            if ne[1].__class__ is Pair or ne[2].__class__ is Pair:  # (a token count's usual places)
                self.nb, self.nbytes = _contiguous_paired(type, ne)
            else:
                try:
                    self.nb, self.nbytes = _contiguous(type, ne)
                except PairDiverged:  # (a `Pair` elsewhere in the shape)
                    self.nb, self.nbytes = _contiguous_paired(type, ne)
        else:
            size, block = _SIZES[type]
            self.nb = nb = tuple(nb)
            ne0, ne1, ne2, ne3 = ne
            if ne0 <= 0 or ne1 <= 0 or ne2 <= 0 or ne3 <= 0:
                self.nbytes = 0
            else:
                rest = (ne1 - 1) * nb[1] + (ne2 - 1) * nb[2] + (ne3 - 1) * nb[3]
                self.nbytes = (size + (ne0 - 1) * nb[0] if block == 1 else ne0 * nb[0] // block) + rest
        self.flags = 0
        self.external = False  # memory of its own: a weight or a cache tensor
        self.weight = False  # a model weight (its buffer's usage is WEIGHTS)
        self.device = -1  # where an external tensor lives: a GPU's index, or -1 for the CPU
        self.pinned: int | None = None  # the device it must run on (`ggml_backend_sched_set_tensor_backend`)
        self.name = ""

    @property
    def n_elements(self) -> int:
        ne = self.ne
        return ne[0] * ne[1] * ne[2] * ne[3]

    def __repr__(self) -> str:
        return f"{self.op}({self.name or '?'} {ggml_type(self.type).name} {list(self.ne)})"


_flags = attrgetter("flags")


def any_input(tensors: Iterable[Tensor]) -> bool:
    """Whether any of `tensors` is flagged INPUT (their flags gathered at C speed: a graph's nodes number thousands)."""
    return any(flags & INPUT for flags in set(map(_flags, tensors)))


def external(type: int, ne: Sequence[int], name: str = "", *, device: int = -1, weight: bool = False) -> Tensor:
    """A weight or cache tensor on `device`: memory of its own, never the allocator's."""
    t = Tensor(type, ne)
    t.external, t.name, t.device, t.weight = True, name, device, weight
    return t


def graph_input(type: int, ne: Sequence[int], name: str) -> Tensor:
    """A leaf the allocator places before any node (`ggml_set_input`)."""
    t = Tensor(type, ne)
    t.flags, t.name = INPUT, name
    return t


def new_tensor(type: int, ne: Sequence[int]) -> Tensor:
    """`ggml_new_tensor` left as a leaf, neither input nor weight: the allocator places it with the inputs, before
    any node, and frees it after its last reader."""
    return Tensor(type, ne)


def _view(a: Tensor, op: str, ne: Sequence[int], nb: Sequence[int], *src: Tensor | None) -> Tensor:
    return Tensor(a.type, ne, op, src or (a,), a, nb)


# ---------------------------------------------------------------------------------------------- views


def view_tensor(a: Tensor, op: str, *src: Tensor | None) -> Tensor:
    """`ggml_view_tensor`: a's shape and strides, given an op (the in-place ops and SET_ROWS use it)."""
    return _view(a, op, a.ne, a.nb, *src)


def reshape(a: Tensor, *ne: int) -> Tensor:
    return Tensor(a.type, ne, "RESHAPE", (a,), a)


def view(a: Tensor, ne: Sequence[int], nb: Sequence[int] = ()) -> Tensor:
    """`ggml_view_1d/2d/3d/4d`: `nb` holds nb1 (and nb2, nb3) as those functions take them."""
    size, block = _SIZES[a.type]
    n = len(ne)
    if n == 1:
        nb1 = size * (ne[0] // block)
        strides = (size, nb1, nb1, nb1)
    elif n == 2:
        nb1 = nb[0]
        nb2 = nb1 * ne[1]
        strides = (size, nb1, nb2, nb2)
    elif n == 3:
        strides = (size, nb[0], nb[1], nb[1] * ne[2])
    else:
        strides = (size, nb[0], nb[1], nb[2])
    return Tensor(a.type, ne, "VIEW", (a,), a, strides)


def permute(a: Tensor, *axes: int) -> Tensor:
    ne, nb = [0] * 4, [0] * 4
    for i, axis in enumerate(axes):
        ne[axis], nb[axis] = a.ne[i], a.nb[i]
    return _view(a, "PERMUTE", ne, nb)


def transpose(a: Tensor) -> Tensor:
    ne, nb = a.ne, a.nb
    return _view(a, "TRANSPOSE", (ne[1], ne[0], ne[2], ne[3]), (nb[1], nb[0], nb[2], nb[3]))


# ---------------------------------------------------------------------------------------------- ops


def get_rows(a: Tensor, b: Tensor) -> Tensor:
    return Tensor(I32 if a.type == I32 else F32, (a.ne[0], b.ne[0], b.ne[1], b.ne[2]), "GET_ROWS", (a, b))


def set_rows(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """A view of the cache `a` that writes rows of `b` at the indices `c` (sources in ggml's legacy order)."""
    return view_tensor(a, "SET_ROWS", b, c, a)


def mul_mat(a: Tensor, b: Tensor) -> Tensor:
    return Tensor(F32, (a.ne[1], b.ne[1], b.ne[2], b.ne[3]), "MUL_MAT", (a, b))


def mul_mat_id(a: Tensor, b: Tensor, ids: Tensor) -> Tensor:
    return Tensor(F32, (a.ne[1], ids.ne[0], b.ne[2], 1), "MUL_MAT_ID", (a, b, ids))


def unary(a: Tensor, op: str) -> Tensor:
    """`ggml_unary` family (silu, gelu, tanh, sigmoid, relu, exp, ...): same shape, in-place-able."""
    return Tensor(a.type, a.ne, "UNARY", (a,))


def rms_norm(a: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "RMS_NORM", (a,))


def norm(a: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "NORM", (a,))


def l2_norm(a: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "L2_NORM", (a,))


def add(a: Tensor, b: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "ADD", (a, b))


def sub(a: Tensor, b: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "SUB", (a, b))


def mul(a: Tensor, b: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "MUL", (a, b))


def div(a: Tensor, b: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "DIV", (a, b))


def add_id(a: Tensor, b: Tensor, ids: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "ADD_ID", (a, b, ids))


def scale(a: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "SCALE", (a,))


def scale_inplace(a: Tensor) -> Tensor:
    return view_tensor(a, "SCALE", a)


def fill(a: Tensor) -> Tensor:
    """`ggml_fill`: a's type and shape, every element one constant."""
    return Tensor(a.type, a.ne, "FILL", (a,))


def clamp(a: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "CLAMP", (a,))


def sqr(a: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "SQR", (a,))


def sqrt(a: Tensor) -> Tensor:
    return Tensor(a.type, a.ne, "SQRT", (a,))


def sum_rows(a: Tensor) -> Tensor:
    return Tensor(a.type, (1, a.ne[1], a.ne[2], a.ne[3]), "SUM_ROWS", (a,))


def mean(a: Tensor) -> Tensor:
    return Tensor(F32, (1, a.ne[1], a.ne[2], a.ne[3]), "MEAN", (a,))


def rope(a: Tensor, pos: Tensor) -> Tensor:
    """`ggml_rope_ext` (and `ggml_rope_multi`): a copy of `a`, rotated. Its frequency factors, a weight, never
    reach the allocator and are left out."""
    return Tensor(a.type, a.ne, "ROPE", (a, pos))


def soft_max(a: Tensor, mask: Tensor | None = None, sinks: Tensor | None = None) -> Tensor:
    t = Tensor(a.type, a.ne, "SOFT_MAX", (a, mask))
    if sinks is not None:  # ggml_soft_max_add_sinks
        t.src = (a, mask, sinks)
    return t


def flash_attn_ext(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, sinks: Tensor | None = None) -> Tensor:
    t = Tensor(F32, (v.ne[0], q.ne[2], q.ne[1], q.ne[3]), "FLASH_ATTN_EXT", (q, k, v, mask))
    if sinks is not None:  # ggml_flash_attn_ext_add_sinks
        t.src = (q, k, v, mask, sinks)
    return t


def cont(a: Tensor, *ne: int) -> Tensor:
    """`ggml_cont` (or `ggml_cont_2d/3d/4d` with a new shape): a contiguous copy."""
    return Tensor(a.type, ne or a.ne, "CONT", (a,))


def cpy(a: Tensor, b: Tensor) -> Tensor:
    """`ggml_cpy`: writes `a` into `b`; the result is a view of `b`."""
    return view_tensor(b, "CPY", a, b)


def cast(a: Tensor, type: int) -> Tensor:
    """`ggml_cast`: a new tensor of `type`; its second source is itself, as in ggml."""
    t = Tensor(type, a.ne, "CPY", (a,))
    t.src = (a, t)
    return t


def glu_split(a: Tensor, b: Tensor) -> Tensor:
    """`ggml_swiglu_split` / `ggml_geglu_split` / ...: a's type and shape, contiguous, not in place."""
    return Tensor(a.type, a.ne, "GLU", (a, b))


def glu(a: Tensor) -> Tensor:
    """`ggml_swiglu` / `ggml_geglu` on one tensor holding both halves."""
    return Tensor(a.type, (a.ne[0] // 2, a.ne[1], a.ne[2], a.ne[3]), "GLU", (a, None))


def argsort(a: Tensor) -> Tensor:
    return Tensor(I32, a.ne, "ARGSORT", (a,))


def argsort_top_k(a: Tensor, k: int) -> Tensor:
    s = argsort(a)
    return view(s, (k, s.ne[1], s.ne[2], s.ne[3]), s.nb[1:])


def top_k(a: Tensor, k: int) -> Tensor:
    return Tensor(I32, (k, a.ne[1], a.ne[2], a.ne[3]), "TOP_K", (a,))


def lightning_indexer(q: Tensor, k: Tensor, weights: Tensor, mask: Tensor) -> Tensor:
    """`ggml_lightning_indexer`: DSA's score of every cached key for every token, F32 [n_kv, n_tokens, 1, ne3]."""
    return Tensor(F32, (k.ne[2], q.ne[2], 1, q.ne[3]), "LIGHTNING_INDEXER", (q, k, weights, mask))


def dsv4_hc_pre(x: Tensor, gate: Tensor) -> Tensor:
    """`ggml_dsv4_hc_pre_gated`: the hyper-connections' streams [n_embd, hc, tokens] gated and averaged, F32
    [n_embd, tokens]."""
    return Tensor(F32, (x.ne[0], x.ne[2]), "DSV4_HC_PRE", (x, gate))


def dsv4_hc_post(x: Tensor, residual: Tensor, post: Tensor) -> Tensor:
    """`ggml_dsv4_hc_post` without a combination matrix: a block's output [n_embd, tokens] added to every stream of
    `residual`, each scaled by its weight in `post`, F32 [n_embd, hc, tokens]."""
    return Tensor(F32, (x.ne[0], residual.ne[1], x.ne[1]), "DSV4_HC_POST", (x, residual, post, None))


def concat(a: Tensor, b: Tensor, dim: int) -> Tensor:
    ne = list(a.ne)
    ne[dim] += b.ne[dim]
    return Tensor(a.type, ne, "CONCAT", (a, b))


def pad(a: Tensor, *p: int) -> Tensor:
    ne = [a.ne[i] + (p[i] if i < len(p) else 0) for i in range(4)]
    return Tensor(a.type, ne, "PAD", (a,))


def im2col(a: Tensor, b: Tensor, s0: int, s1: int, p0: int, p1: int, type: int) -> Tensor:
    """`ggml_im2col` (2-D, without dilation): the patches of image `b` padded by `p0`, `p1` on each side, under
    kernel `a`, one row each, of `type`."""
    ow, oh = (b.ne[0] + 2 * p0 - a.ne[0]) // s0 + 1, (b.ne[1] + 2 * p1 - a.ne[1]) // s1 + 1
    return Tensor(type, (a.ne[0] * a.ne[1] * a.ne[2], ow, oh, b.ne[3]), "IM2COL", (a, b))


def conv_2d(a: Tensor, b: Tensor, s0: int, s1: int, p0: int = 0, p1: int = 0) -> Tensor:
    """`ggml_conv_2d` (without dilation): im2col (F16; F32 for a BF16 kernel), a matrix multiplication, back to
    [OW, OH, OC, N]."""
    cols = im2col(a, b, s0, s1, p0, p1, F32 if a.type == GGMLType.BF16 else F16)
    ne = cols.ne
    result = mul_mat(reshape(cols, ne[0], ne[3] * ne[2] * ne[1]), reshape(a, a.ne[0] * a.ne[1] * a.ne[2], a.ne[3]))
    result = reshape(result, ne[1], ne[2], ne[3], a.ne[3])
    return cont(permute(result, 0, 1, 3, 2))


def conv_1d_ph(a: Tensor, b: Tensor, s: int) -> Tensor:
    """`ggml_conv_1d_ph` (half padding, no dilation): the 1-D im2col of signal `b` [L, IC] under kernel `a`
    [K, IC, OC] (F16; F32 for a BF16 kernel), a matrix multiplication, [OL, OC]."""
    ol = (b.ne[0] + 2 * (a.ne[0] // 2) - (a.ne[0] - 1) - 1) // s + 1
    cols = Tensor(F32 if a.type == GGMLType.BF16 else F16, (a.ne[0] * a.ne[1], ol, b.ne[2], 1), "IM2COL", (a, b))
    result = mul_mat(reshape(cols, cols.ne[0], cols.ne[2] * cols.ne[1]), reshape(a, a.ne[0] * a.ne[1], a.ne[2]))
    return reshape(result, ol, a.ne[2], cols.ne[2])


def pool_1d(a: Tensor, k: int, s: int) -> Tensor:
    """`ggml_pool_1d` without padding: F32."""
    return Tensor(F32, ((a.ne[0] - k) // s + 1, a.ne[1], a.ne[2], a.ne[3]), "POOL_1D", (a,))


def pool_2d(a: Tensor, k: int, s: int) -> Tensor:
    """`ggml_pool_2d` without padding: F32."""
    return Tensor(F32, ((a.ne[0] - k) // s + 1, (a.ne[1] - k) // s + 1, a.ne[2], a.ne[3]), "POOL_2D", (a,))


def interpolate(a: Tensor, *ne: int) -> Tensor:
    """`ggml_interpolate` (`ggml_upscale_ext`): `a` resampled to the shape `ne`, a new tensor of a's type."""
    return Tensor(a.type, ne, "UPSCALE", (a,))


def repeat(a: Tensor, *ne: int) -> Tensor:
    """`ggml_repeat_4d`: `a` tiled to the shape `ne`."""
    return Tensor(a.type, ne, "REPEAT", (a,))


def ssm_conv(sx: Tensor, c: Tensor) -> Tensor:
    return Tensor(F32, (c.ne[1], sx.ne[0] - c.ne[0] + 1, sx.ne[2], 1), "SSM_CONV", (sx, c))


def ssm_scan(s: Tensor, x: Tensor, dt: Tensor, a: Tensor, b: Tensor, c: Tensor, ids: Tensor) -> Tensor:
    """`ggml_ssm_scan`: the outputs and the last states, side by side in one F32 vector."""
    n = x.n_elements + s.ne[0] * s.ne[1] * s.ne[2] * ids.ne[0]
    return Tensor(F32, (n,), "SSM_SCAN", (s, x, dt, a, b, c, ids))


def gated_delta_net(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor) -> Tensor:
    """`ggml_gated_delta_net` with one state snapshot: the outputs (a row per token) and the last states (S_v rows
    per sequence) in one matrix."""
    s_v, heads, n_tokens, n_seqs = v.ne
    return Tensor(F32, (s_v * heads, n_tokens * n_seqs + s_v * n_seqs), "GATED_DELTA_NET", (q, k, v, g, beta, state))


def rwkv_wkv6(k: Tensor, v: Tensor, r: Tensor, tf: Tensor, td: Tensor, state: Tensor) -> Tensor:
    """`ggml_rwkv_wkv6`: the outputs (a row per token) and the new states (S rows per sequence) in one matrix."""
    return Tensor(F32, (k.ne[0] * k.ne[1], k.ne[2] + k.ne[0] * state.ne[1]), "RWKV_WKV6", (k, v, r, tf, td, state))


def rwkv_wkv7(r: Tensor, w: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor, state: Tensor) -> Tensor:
    """`ggml_rwkv_wkv7`: laid out as `rwkv_wkv6`'s."""
    return Tensor(F32, (k.ne[0] * k.ne[1], k.ne[2] + k.ne[0] * state.ne[1]), "RWKV_WKV7", (r, w, k, v, a, b, state))


# ---------------------------------------------------------------------------------------------- the graph


class Graph:
    """`ggml_cgraph`: nodes and leaves in the order `ggml_build_forward_expand` visits them (sources in
    order, depth first, each tensor once; a tensor whose op is NONE is a leaf)."""

    __slots__ = ("_seen", "leafs", "nodes")

    MAX_DEPTH = 256  # a longer chain of new tensors is followed on a stack of its own instead of by recursion

    def __init__(self) -> None:
        self.nodes: list[Tensor] = []
        self.leafs: list[Tensor] = []
        self._seen: set[Tensor | None] = {None}  # (an absent source is never followed)

    def expand(self, t: Tensor) -> None:
        if t not in self._seen:
            self._seen.add(t)
            self._visit(t, 0)

    def _visit(self, t: Tensor, depth: int) -> None:
        seen = self._seen
        for src in t.src:
            if src not in seen:
                seen.add(src)
                if not src.src:  # nothing to follow (a weight, an input)
                    (self.leafs if src.op == "NONE" else self.nodes).append(src)
                elif depth < self.MAX_DEPTH:
                    self._visit(src, depth + 1)
                else:
                    self._visit_deep(src)
        (self.leafs if t.op == "NONE" else self.nodes).append(t)

    def _visit_deep(self, t: Tensor) -> None:
        """`_visit` without recursion."""
        seen = self._seen
        stack = [(t, iter(t.src))]
        while stack:
            cur, sources = stack[-1]
            for src in sources:  # the next source not in the graph yet
                if src not in seen:
                    seen.add(src)
                    stack.append((src, iter(src.src)))
                    break
            else:
                stack.pop()
                (self.leafs if cur.op == "NONE" else self.nodes).append(cur)
