"""A vision or audio projector (`--mmproj`) as llama-server loads it through libmtmd (`tools/mtmd/clip.cpp`): one
clip context per encoder the file holds, each with its weights in one buffer on the first GPU (the CPU with
`--no-mmproj-offload`, or without GPUs) and the compute buffer its warmup graph reserves (the default image
size, or 3000 mel frames of audio), under a scheduler over that device and the CPU.

The weights are exact: every tensor clip loads, as ggml allocates a context's tensors in one buffer (each rounded up
to the buffer's alignment; CUDA's padding of quantized rows). The compute buffer is exact where clip's graph is
reproduced node for node (`GRAPHS`: Gemma 3's SigLIP, Gemma 4's vision encoder and audio conformer, Qwen2-VL's,
Qwen2.5-VL's and Qwen3-VL's ViTs with their mergers; Pixtral's and Mistral 3's; the Whisper encoders of Qwen2-Audio,
Voxtral and Audio Flamingo 3 with their projectors), laid out by ggml's allocator as on the CPU. Other projector
types get a derived figure: clip's standard ViT encoder (`build_vit`, with the file's own layer tensors) over the
warmup image's patches (or the audio's frames after a stride-2 convolution), without the type's own merger or
projection head; that is marked derived, as are compute buffers on GPUs whose backend reorders graphs of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ...errors import FormatError
from ...model import ModelFile
from ..devices import GPU
from . import ggml as g
from .alloc import buffer_size
from .placement import buffer_of

#: clip's projector type names (`PROJECTOR_TYPE_NAMES`, clip-impl.h)
PROJECTOR_TYPES = frozenset({
    "mlp", "ldp", "ldpv2", "resampler", "adapter", "qwen2vl_merger", "qwen2.5vl_merger", "qwen3vl_merger", "ling3vl",
    "step3vl", "gemma3", "gemma3nv", "gemma3na", "gemma4v", "gemma4a", "gemma4uv", "gemma4ua", "phi4", "idefics3",
    "pixtral", "ultravox", "internvl", "llama4", "qwen2a", "qwen3a", "glma", "qwen2.5o", "voxtral", "meralion",
    "musicflamingo", "lfm2", "kimivl", "paddleocr", "lightonocr", "cogvlm", "janus_pro", "dots_ocr", "dots3note_v",
    "dots3note_a", "deepseekocr", "deepseekocr2", "deepseek4v", "lfm2a", "glm4v", "glm5v", "youtuvl", "yasa2",
    "kimik25", "nemotron_v2_vl", "exaone4_5", "hunyuanvl", "minicpmv4_6", "granite_speech", "mimovl", "minimax_m3",
    "granite4_vision", "mimo_audio", "parakeet", "qwen3tts_spkenc", "qwen3tts_gen", "pockettts_spkenc",
    "pockettts_gen", "muse-glimmer",
})  # fmt: skip
#: the warmup image's token count where clip sets one (`set_warmup_n_tokens`): side = sqrt(n) * patch * n_merge
WARMUP_TOKENS = {
    "qwen2vl_merger": 46 * 46, "qwen2.5vl_merger": 46 * 46, "qwen3vl_merger": 46 * 46, "ling3vl": 46 * 46,
    "glm4v": 46 * 46, "kimivl": 256, "paddleocr": 28 * 28, "youtuvl": 46 * 46, "mimovl": 46 * 46,
    "exaone4_5": 46 * 46, "hunyuanvl": 46 * 46, "gemma4v": 256, "pixtral": 256,
}  # fmt: skip
#: `n_merge` where clip sets a default before reading `clip.vision.spatial_merge_size` or the scale factor
N_MERGE_DEFAULT = {"gemma3": 4, "qwen2vl_merger": 2, "qwen2.5vl_merger": 2, "qwen3vl_merger": 2, "ling3vl": 2,
                   "gemma4v": 3, "pixtral": 1}  # fmt: skip
#: projector types whose graph reads `clip.vision.n_wa_pattern`: its default (None: required)
WINDOW_ATTENTION = {"qwen2vl_merger": 0, "qwen2.5vl_merger": None}
WARMUP_AUDIO_FRAMES = 3000  # clip_hparams::warmup_audio_size
#: audio projector types whose graph reads `clip.audio.projector.stack_factor`: whether clip requires it
STACK_FACTOR = {"ultravox": True, "voxtral": True, "meralion": True, "glma": True, "qwen2a": False, "qwen3a": False,
                "musicflamingo": False}  # fmt: skip
#: the tensors clip's loader asks for in every encoder's context, vision or audio (their names have no modality)
SHARED_TENSORS = frozenset({"v.class_embd", "v.patch_embd.bias", "v.patch_embd.weight", "v.patch_embd.weight.1",
                            "v.norm_embd.weight", "v.norm_embd.bias"})  # fmt: skip
#: `clip_model::audio_has_avgpool`: the encoder's output pooled by 2 along time before the post-norm
AUDIO_AVGPOOL = frozenset({"qwen2a", "voxtral", "musicflamingo"})
#: `clip_model::audio_has_stack_frames`: the projector's input is that many consecutive frames side by side
AUDIO_STACK_FRAMES = frozenset({"ultravox", "voxtral", "meralion"})
#: Gemma 4's encoders, whose every matrix is a clippable linear (`clip_model::clamp_info_map`)
CLIPPABLE = frozenset({"gemma4v", "gemma4a"})
#: tensors clip reads as values at load (`get_scalar`, `get_vector`) instead of loading them: the clippable
#: linears' clamp bounds, Parakeet's mel filters and window (name endings, per projector type)
READ_AS_VALUES = {
    "gemma4v": (".input_max", ".input_min", ".output_max", ".output_min"),
    "gemma4a": (".input_max", ".input_min", ".output_max", ".output_min"),
    "parakeet": ("a.mel_filters", "a.window"),
}  # fmt: skip
#: Gemma 4's audio conformer attends in blocks of this many frames, each to itself and this many frames before it
GEMMA4A_CHUNK, GEMMA4A_PAST = 12, 12


@dataclass(frozen=True)
class ClipHParams:
    """What clip's `load_hparams` reads that the warmup graph depends on, for one encoder."""

    projector_type: str
    modality: str  # "vision" or "audio"
    n_embd: int
    n_head: int
    n_head_kv: int
    n_layer: int
    image_size: int
    patch_size: int
    n_merge: int
    warmup_image_size: int
    n_mel_bins: int = 0
    n_wa_pattern: int = 0  # Qwen2.5-VL's window attention: every n-th layer attends to the whole image
    stack_factor: int = 0  # audio frames the projector takes side by side (`proj_stack_factor`)


@dataclass(frozen=True)
class ProjectorEstimate:
    """A projector file's memory as llama-server loads it. `device` is the GPU's index, -1 the CPU. `weights`
    is the buffer ggml allocates; `counted` is clip's own sum of its tensors' sizes, which is what llama-server's
    fit adds to the device's margin (with the compute buffer). `compute_exact`: the warmup graph reproduced node
    for node and laid out as that device's allocator does (else derived)."""

    projector_types: tuple[str, ...]
    device: int
    weights: int
    counted: int
    compute: int
    compute_exact: bool
    warmup: str
    flash_attn: bool

    @property
    def total(self) -> int:
        return self.weights + self.compute

    @property
    def fit_bytes(self) -> int:
        """What `mtmd_get_memory_usage` reports for the device, which llama-server adds to its fit target."""
        return self.counted + self.compute


def read_clip_hparams(model: ModelFile) -> list[ClipHParams]:
    """Each encoder of a projector file (vision, then audio), as clip reads it; a file that is not a projector or
    whose projector type clip does not know is a `FormatError`."""
    md, path = model.metadata, getattr(model, "path", None)
    if md.get("general.architecture") != "clip":
        raise FormatError(path, None, f"not a projector file (--mmproj): general.architecture is "
                                      f"{md.get('general.architecture')!r}, not 'clip'")  # fmt: skip
    encoders = [m for m in ("vision", "audio") if md.get(f"clip.has_{m}_encoder")]
    if not encoders:
        raise FormatError(path, None, "a projector file without a vision or audio encoder (clip.has_vision_encoder)")
    found = []
    for modality in encoders:
        proj = md.get("clip.projector_type") or md.get(f"clip.{modality}.projector_type")
        if proj not in PROJECTOR_TYPES:
            raise FormatError(path, None, f"clip.projector_type: unknown projector type {proj!r} (libmtmd knows "
                                          f"{', '.join(sorted(PROJECTOR_TYPES))})")  # fmt: skip
        if proj == "qwen2.5o":  # the legacy name of Qwen2.5-Omni's two encoders
            proj = "qwen2.5vl_merger" if modality == "vision" else "qwen2a"

        def number(key: str, default: int | None = None, *, modality: str = modality) -> int:
            value = md.get(f"clip.{modality}.{key}", default)
            if value is None:
                raise FormatError(path, None, f"clip.{modality}.{key}: missing (clip requires it)")
            return int(value)

        if modality == "vision":
            image_size, patch_size = int(md.get("clip.vision.image_size", 0)), int(md.get("clip.vision.patch_size", 0))
            n_merge = number("spatial_merge_size", number("projector.scale_factor", N_MERGE_DEFAULT.get(proj, 0)))
            warmup = image_size
            if proj in WARMUP_TOKENS:
                warmup = math.isqrt(WARMUP_TOKENS[proj]) * patch_size * max(n_merge, 1)
            extra = {"image_size": image_size, "patch_size": patch_size, "n_merge": n_merge,
                     "warmup_image_size": warmup}  # fmt: skip
            if proj in WINDOW_ATTENTION:
                extra["n_wa_pattern"] = number("n_wa_pattern", WINDOW_ATTENTION[proj])
        else:
            extra = {"image_size": 0, "patch_size": 1, "n_merge": 0, "warmup_image_size": 0,
                     "n_mel_bins": number("num_mel_bins")}  # fmt: skip
            if proj in STACK_FACTOR:
                extra["stack_factor"] = number("projector.stack_factor", None if STACK_FACTOR[proj] else 0)
        n_head = number("attention.head_count")
        n_head_kv = number("attention.head_count_kv", n_head)
        found.append(ClipHParams(proj, modality, number("embedding_length"), n_head, n_head_kv, number("block_count"),
                                 **extra))  # fmt: skip
    return found


def estimate_projector(model: ModelFile, gpus: Sequence[GPU] = (), *, offload: bool = True,
                       flash_attn: str = "auto") -> ProjectorEstimate:  # fmt: skip
    """The projector in `model` as llama-server loads it beside a model on `gpus` (`offload`: not
    `--no-mmproj-offload`; `flash_attn`: llama-server's `-fa`, which mtmd follows)."""
    encoders = read_clip_hparams(model)
    device = 0 if offload and gpus else -1
    buffer = buffer_of(gpus[device] if device >= 0 else None)
    tensors = model.tensors
    weights = counted = 0
    for hp in encoders:
        for name in _loaded(tensors, hp, len(encoders)):
            info = tensors[name]
            ne0 = info.shape[-1] if info.shape else 1
            weights += buffer.alloc_size(int(info.dtype), ne0, info.nbytes)
            counted += info.nbytes
    # flash attention `auto`: clip tries it and keeps it where the backend runs the op (the CPU and the GPU
    # backends here all do)
    fa = flash_attn != "off"
    compute, exact, warmups = 0, buffer.exact, []
    for hp in encoders:
        build = GRAPHS.get(hp.projector_type)
        exact = exact and build is not None
        graph = (build or _derived_graph)(_Builder(hp, tensors, fa))
        compute += buffer_size(graph, buffer.alignment)
        side = hp.warmup_image_size
        warmups.append(f"{side}x{side} image" if hp.modality == "vision" else f"{WARMUP_AUDIO_FRAMES} audio frames")
    return ProjectorEstimate(tuple(hp.projector_type for hp in encoders), device, weights, counted, compute, exact,
                             ", ".join(warmups), fa)  # fmt: skip


def _loaded(tensors: Mapping, hp: ClipHParams, n_encoders: int) -> list[str]:
    """The tensors clip's loader reads into the encoder's own context (and buffer): the whole file for its only
    encoder; of a file with two, the vision context takes all but the audio tensors (`a.`, `mm.a.`), and the audio
    context its own and those clip asks for in every context whatever its modality (`SHARED_TENSORS`, and
    Qwen3-VL's deepstack layers up to the audio encoder's layer count), which are then counted twice. Those the
    type reads as values (`READ_AS_VALUES`) are never loaded."""
    values = READ_AS_VALUES.get(hp.projector_type, ())
    names = [name for name in tensors if not (values and name.endswith(values))]
    if n_encoders == 1:
        return names
    audio = [name for name in names if name.startswith(("a.", "mm.a."))]
    if hp.modality == "vision":
        audio_names = set(audio)
        return [name for name in names if name not in audio_names]
    deepstack = tuple(f"v.deepstack.{il}.{part}." for il in range(hp.n_layer) for part in ("norm", "fc1", "fc2"))
    return audio + [name for name in names if name in SHARED_TENSORS or name.startswith(deepstack)]


def fit_margins(margins: int | Sequence[int], projector: ProjectorEstimate, n_gpus: int) -> int | list[int]:
    """llama-server's fit targets with the projector counted (server-context.cpp): what `mtmd_get_memory_usage`
    reports is added to the target of its device's index among ggml's devices, the GPUs first and the CPU after
    them; fit reads the GPUs' targets (the first one for the host when there is no GPU)."""
    listed = [margins] * max(n_gpus, 1) if isinstance(margins, int) else list(margins)
    index = projector.device if projector.device >= 0 else n_gpus
    if index < len(listed):
        listed[index] += projector.fit_bytes
    return listed


# ---------------------------------------------------------------------------------------------- clip's graphs


class _Builder:
    """`clip_graph`: the warmup image's shapes, the file's weights, the graph being built."""

    def __init__(self, hp: ClipHParams, tensors: Mapping, flash_attn: bool) -> None:
        self.hp, self.tensors, self.flash_attn = hp, tensors, flash_attn
        self.graph = g.Graph()
        self.prefix = "v" if hp.modality == "vision" else "a"
        if hp.modality == "vision":
            side = hp.warmup_image_size
            self.nx = self.ny = side
            self.n_patches_x = self.n_patches_y = side // hp.patch_size
        else:
            self.nx, self.ny = WARMUP_AUDIO_FRAMES, hp.n_mel_bins
            self.n_patches_x, self.n_patches_y = WARMUP_AUDIO_FRAMES // 2, 1
        self.n_patches = self.n_patches_x * self.n_patches_y
        self.d_head = hp.n_embd // hp.n_head if hp.n_head else 0

    def weight(self, name: str) -> g.Tensor | None:
        """The file's tensor `name` (a leaf with memory of its own), or None where the file lacks it."""
        info = self.tensors.get(name)
        if info is None:
            return None
        return g.external(int(info.dtype), tuple(reversed(info.shape)) or (1,), name, weight=True)

    def layer(self, il: int, name: str) -> g.Tensor | None:
        return self.weight(f"{self.prefix}.blk.{il}.{name}")

    def inp(self) -> g.Tensor:
        """`build_inp`: the raw image through the patch convolution, one row per patch, plus the patch bias."""
        raw = g.graph_input(g.F32, (self.nx, self.ny, 3, 1), "inp_raw")
        patch = self.weight("v.patch_embd.weight")
        cur = g.conv_2d(patch, raw, self.hp.patch_size, self.hp.patch_size)
        cur = g.cont(g.transpose(g.reshape(cur, self.n_patches, self.hp.n_embd, 1)))
        bias = self.weight("v.patch_embd.bias")
        return g.add(cur, bias) if bias is not None else cur

    def norm(self, cur: g.Tensor, w: g.Tensor | None, b: g.Tensor | None, rms: bool = False) -> g.Tensor:
        """`build_norm`."""
        cur = g.rms_norm(cur) if rms else g.norm(cur)
        if w is not None:
            cur = g.mul(cur, w)
        if b is not None:
            cur = g.add(cur, b)
        return cur

    def attn(self, wo: g.Tensor | None, wo_b: g.Tensor | None, q: g.Tensor, k: g.Tensor, v: g.Tensor,
             mask: g.Tensor | None = None) -> g.Tensor:  # fmt: skip
        """`build_attn`: Q, K and V ordered into the graph first, then flash attention (K, V and the mask cast to
        F16) or soft_max(K Q + mask) V."""
        for t in (q, k, v):
            self.graph.expand(t)
        q, k = g.permute(q, 0, 2, 1, 3), g.permute(k, 0, 2, 1, 3)
        if self.flash_attn:
            v = g.permute(v, 0, 2, 1, 3)
            k, v = g.cast(k, g.F16), g.cast(v, g.F16)
            cur = g.flash_attn_ext(q, k, v, g.cast(mask, g.F16) if mask is not None else None)
            cur = g.reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        else:
            v = g.cont(g.permute(v, 1, 2, 0, 3))
            kq = g.soft_max(g.mul_mat(k, q), mask)
            cur = g.permute(g.mul_mat(v, kq), 0, 2, 1, 3)
            cur = g.cont(cur, cur.ne[0] * cur.ne[1], cur.ne[2] * cur.ne[3])
        if wo is not None:
            cur = self.mm(wo, cur)
        if wo_b is not None:
            cur = g.add(cur, wo_b)
        return cur

    def ffn(self, cur: g.Tensor, up, up_b, gate, gate_b, down, down_b) -> g.Tensor:
        """`build_ffn` (a plain activation, or a gated one with `gate`)."""
        tmp = self.mm(up, cur) if up is not None else cur
        if up_b is not None:
            tmp = g.add(tmp, up_b)
        if gate is not None:
            cur = self.mm(gate, cur)
            if gate_b is not None:
                cur = g.add(cur, gate_b)
            cur = g.glu_split(cur, tmp)
        else:
            cur = g.unary(tmp, "GELU")
        if down is not None:
            cur = self.mm(down, cur)
        if down_b is not None:
            cur = g.add(cur, down_b)
        return cur

    def vit(self, inp: g.Tensor, n_pos: int, learned_pos_embd: g.Tensor | None, *, rms: bool = False,
            add_pos: Callable[[g.Tensor], g.Tensor] | None = None) -> g.Tensor:  # fmt: skip
        """`build_vit`: layer or RMS norms, separate or fused Q/K/V with the Q/K norms the file holds (per head
        where they are a head wide), `add_pos` on Q and K, Gemma 4's V norm, the post-attention and post-FFN
        norms and layer scales the file holds, and a plain or gated FFN."""
        hp, n_embd, d_head = self.hp, self.hp.n_embd, self.d_head
        p = self.prefix
        if learned_pos_embd is not None:
            inp = g.add(inp, learned_pos_embd)
        inp_l = g.reshape(inp, n_embd, n_pos)
        pre_w = self.weight(f"{p}.pre_ln.weight")
        if pre_w is not None:
            inp_l = self.norm(inp_l, pre_w, self.weight(f"{p}.pre_ln.bias"), rms)
        for il in range(hp.n_layer):
            w = self._layer_weights(il)
            q_norm, k_norm = w["attn_q_norm.weight"], w["attn_k_norm.weight"]
            cur = self.norm(inp_l, w["ln1.weight"], w["ln1.bias"], rms)
            if w["attn_qkv.weight"] is not None:
                cur = self.mm(w["attn_qkv.weight"], cur)
                if w["attn_qkv.bias"] is not None:
                    cur = g.add(cur, w["attn_qkv.bias"])
                row = g.row_size(cur.type, d_head)
                q, k, v = (g.view(cur, (d_head, hp.n_head, n_pos, 1), (row, cur.nb[1], cur.nb[1] * n_pos))
                           for _ in range(3))  # fmt: skip
                q = self.norm(q, q_norm, None, rms) if q_norm is not None else q
                k = self.norm(k, k_norm, None, rms) if k_norm is not None else k
            else:
                q, k, v = (self._proj(cur, w[f"attn_{x}.weight"], w[f"attn_{x}.bias"]) for x in "qkv")
                per_head = q_norm is not None and q_norm.ne[0] == d_head
                if not per_head:
                    q = self.norm(q, q_norm, None, rms) if q_norm is not None else q
                    k = self.norm(k, k_norm, None, rms) if k_norm is not None else k
                q = g.reshape(q, d_head, hp.n_head, n_pos, 1)
                k, v = (g.reshape(t, d_head, hp.n_head_kv, n_pos, 1) for t in (k, v))
                if per_head:
                    q = self.norm(q, q_norm, None, rms)
                    k = self.norm(k, k_norm, None, rms) if k_norm is not None else k
            if add_pos is not None:
                q, k = add_pos(q), add_pos(k)
            if hp.projector_type == "gemma4v":
                v = g.rms_norm(v)
            cur = self.attn(w["attn_out.weight"], w["attn_out.bias"], q, k, v)
            cur = self._scaled(cur, w["ls1.weight"])
            if w["attn_post_norm.weight"] is not None:
                cur = self.norm(cur, w["attn_post_norm.weight"], None, rms)
            cur = g.add(cur, inp_l)
            inp_l = cur
            cur = self.norm(cur, w["ln2.weight"], w["ln2.bias"], rms)
            cur = self.ffn(cur, w["ffn_up.weight"], w["ffn_up.bias"], w["ffn_gate.weight"], w["ffn_gate.bias"],
                           w["ffn_down.weight"], w["ffn_down.bias"])  # fmt: skip
            if w["ffn_post_norm.weight"] is not None:
                cur = self.norm(cur, w["ffn_post_norm.weight"], None, rms)
            cur = self._scaled(cur, w["ls2.weight"])
            inp_l = self._scaled(g.add(inp_l, cur), w["out_scale.weight"])
        if hp.projector_type in AUDIO_AVGPOOL:
            inp_l = g.cont(g.transpose(g.pool_1d(g.cont(g.transpose(inp_l)), 2, 2)))
        post_w = self.weight(f"{p}.post_ln.weight")
        if post_w is not None:
            inp_l = self.norm(inp_l, post_w, self.weight(f"{p}.post_ln.bias"), rms)
        return g.reshape(inp_l, n_embd, inp_l.ne[1], 1)

    def mm(self, w: g.Tensor, x: g.Tensor) -> g.Tensor:
        """`build_mm`: Gemma 4's clippable linears (`CLIPPABLE`) clamp the input and the output of every matrix
        (clip keeps clamp bounds for every `.weight` tensor, FLT_MAX where the file has none)."""
        if self.hp.projector_type not in CLIPPABLE:
            return g.mul_mat(w, x)
        return g.clamp(g.mul_mat(w, g.clamp(x)))

    def _scaled(self, cur: g.Tensor, scale: g.Tensor | None) -> g.Tensor:
        return g.mul(cur, scale) if scale is not None else cur

    def _proj(self, cur: g.Tensor, w: g.Tensor | None, b: g.Tensor | None) -> g.Tensor:
        cur = self.mm(w, cur) if w is not None else cur
        return g.add(cur, b) if b is not None else cur

    def _layer_weights(self, il: int) -> dict[str, g.Tensor | None]:
        names = ("ln1", "ln2", "attn_qkv", "attn_q", "attn_k", "attn_v", "attn_out", "ffn_up", "ffn_gate",
                 "ffn_down", "attn_q_norm", "attn_k_norm", "attn_post_norm", "ffn_post_norm", "ls1", "ls2",
                 "out_scale")  # fmt: skip
        return {f"{n}.{kind}": self.layer(il, f"{n}.{kind}") for n in names for kind in ("weight", "bias")}


def _gemma3(b: _Builder) -> g.Graph:
    """`clip_graph_siglip::build` for Gemma 3: the ViT, a 2-D average pool by `n_merge`, an RMS norm and the
    projection (its matrix transposed into the compute buffer)."""
    hp = b.hp
    cur = b.vit(b.inp(), b.n_patches, b.weight("v.position_embd.weight"))
    side = b.n_patches_x
    cur = g.cont(g.transpose(cur), side, side, hp.n_embd, 1)
    cur = g.pool_2d(cur, hp.n_merge, hp.n_merge)
    cur = g.reshape(cur, cur.ne[0] * cur.ne[0], hp.n_embd, 1)
    cur = g.cont(g.transpose(cur))
    cur = g.mul(g.rms_norm(cur), b.weight("mm.soft_emb_norm.weight"))
    cur = g.mul_mat(g.cont(g.transpose(b.weight("mm.input_projection.weight"))), cur)
    b.graph.expand(cur)
    return b.graph


def _gemma4v(b: _Builder) -> g.Graph:
    """`clip_graph_gemma4v::build` (Gemma 4): the image scaled to [-1, 1] through the patch convolution, position
    embeddings looked up per column and per row, the ViT with RMS norms and 2-D NeoX RoPE (the first half of
    each head by column, the second by row), an average pool by `n_merge`, then the RMS norm and the projection.
    Every matrix is a clippable linear (`_Builder.mm`)."""
    hp, n_embd, n_pos = b.hp, b.hp.n_embd, b.n_patches
    raw = g.scale(g.graph_input(g.F32, (b.nx, b.ny, 3, 1), "inp_raw"))
    p = hp.patch_size
    cur = g.reshape(g.conv_2d(b.weight("v.patch_embd.weight"), raw, p, p), n_pos, n_embd, 1)
    cur = g.cont(g.transpose(cur))
    pos_x = g.graph_input(g.I32, (n_pos,), "pos_x")
    pos_y = g.graph_input(g.I32, (n_pos,), "pos_y")
    table = b.weight("v.position_embd.weight")
    by_x, by_y = (g.view(table, (n_embd, table.ne[1]), (table.nb[1],)) for _ in range(2))
    cur = g.add(g.add(cur, g.get_rows(by_x, pos_x)), g.get_rows(by_y, pos_y))
    cur = b.vit(cur, n_pos, None, rms=True, add_pos=lambda t: g.rope(g.rope(t, pos_x), pos_y))
    cur = g.cont(g.transpose(cur), b.n_patches_x, b.n_patches_y, n_embd, 1)
    cur = g.pool_2d(cur, hp.n_merge, hp.n_merge)
    cur = g.scale(g.cont(g.transpose(g.reshape(cur, cur.ne[0] * cur.ne[1], n_embd, 1))))
    std_bias, std_scale = b.weight("v.std_bias"), b.weight("v.std_scale")
    if std_bias is not None and std_scale is not None:
        cur = g.mul(g.sub(cur, std_bias), std_scale)
    cur = b.mm(b.weight("mm.input_projection.weight"), g.rms_norm(cur))
    b.graph.expand(cur)
    return b.graph


def _pixtral(b: _Builder) -> g.Graph:
    """`clip_graph_pixtral::build` (Pixtral, Mistral 3): the ViT with RMS norms and 2-D RoPE (by row, then by
    column); Mistral Small 3.1's patch merger where the file has one (an RMS norm, each `n_merge` x `n_merge`
    square of patches side by side by an im2col, projected); the adapter MLP (GELU); then the [IMG_BREAK]
    embedding appended to every row of merged tokens but the last (a cleared row of tokens plus the embedding,
    concatenated)."""
    n_embd, merge = b.hp.n_embd, max(b.hp.n_merge, 1)
    pos_h = g.graph_input(g.I32, (b.n_patches,), "pos_h")
    pos_w = g.graph_input(g.I32, (b.n_patches,), "pos_w")
    cur = b.vit(b.inp(), b.n_patches, None, rms=True, add_pos=lambda t: g.rope(g.rope(t, pos_h), pos_w))
    merger = b.weight("mm.patch_merger.weight")
    if merger is not None:
        cur = g.mul(g.rms_norm(cur), b.weight("mm.input_norm.weight"))
        cur = g.cont(g.permute(g.reshape(cur, n_embd, b.n_patches_x, b.n_patches_y), 2, 0, 1, 3))
        kernel = g.view(cur, (merge, merge, cur.ne[2]), (0, 0))
        cur = g.im2col(kernel, cur, merge, merge, 0, 0, g.F32)
        cur = b.mm(merger, g.reshape(cur, cur.ne[0], cur.ne[1] * cur.ne[2]))
    cur = b.ffn(cur, b.weight("mm.1.weight"), b.weight("mm.1.bias"), None, None, b.weight("mm.2.weight"),
                b.weight("mm.2.bias"))  # fmt: skip
    img_break = b.weight("v.token_embd.img_break")
    if img_break is not None:
        rows, per_row, width = b.n_patches_y // merge, b.n_patches_x // merge, cur.ne[0]
        breaks = g.add(g.scale(g.new_tensor(cur.type, (width, 1, rows))), img_break)
        tokens = g.concat(g.reshape(cur, width, per_row, rows), breaks, 1)
        cur = g.view(tokens, (width, per_row * rows + rows - 1), (g.row_size(tokens.type, width),))
    b.graph.expand(cur)
    return b.graph


def _merge_order(b: _Builder, cur: g.Tensor) -> g.Tensor:
    """Qwen-VL's patch order for the 2x2 merge: [n_embd, width, height] rows regrouped so that each merged
    token's four patches are adjacent, one row per patch."""
    n_embd, nx, ny = b.hp.n_embd, b.n_patches_x, b.n_patches_y
    cur = g.reshape(g.cont(cur, n_embd * 2, nx // 2, ny, 1), n_embd * 2, nx // 2, 2, ny // 2)
    return g.cont(g.permute(cur, 0, 2, 1, 3), n_embd, nx * ny, 1)


def _qwen_inp(b: _Builder) -> g.Tensor:
    """`build_inp_with_temporal_merge` for one still image (both temporal patch convolutions over the same
    frame, added) in the merge order."""
    raw = g.graph_input(g.F32, (b.nx, b.ny, 3, 1), "inp_raw")
    p = b.hp.patch_size
    cur = g.add(g.conv_2d(b.weight("v.patch_embd.weight"), raw, p, p),
                g.conv_2d(b.weight("v.patch_embd.weight.1"), raw, p, p))  # fmt: skip
    return _merge_order(b, g.permute(cur, 1, 2, 0, 3))


def _resized_position_embd(b: _Builder) -> g.Tensor:
    """`resize_position_embeddings`: the learned square grid of position embeddings, interpolated to the
    image's patch grid where it differs."""
    pos = b.weight("v.position_embd.weight")
    n_embd, side = b.hp.n_embd, math.isqrt(pos.ne[1])
    if (b.n_patches_x, b.n_patches_y) == (side, side):
        return pos
    pos = g.permute(g.reshape(pos, n_embd, side, side), 2, 0, 1, 3)
    pos = g.interpolate(pos, b.n_patches_x, b.n_patches_y, n_embd, 1)
    return g.cont(g.permute(pos, 1, 2, 0, 3), n_embd, b.n_patches)


def _qwen_layer(b: _Builder, il: int, inp_l: g.Tensor, positions: g.Tensor, rms: bool,
                mask: g.Tensor | None = None) -> g.Tensor:  # fmt: skip
    """One layer of Qwen-VL's ViT: fused or separate Q/K/V with biases, M-RoPE (vision) on Q and K, attention
    (over a window where `mask`), the FFN."""
    hp, d_head, n_pos = b.hp, b.d_head, b.n_patches
    w = b._layer_weights(il)
    cur = b.norm(inp_l, w["ln1.weight"], w["ln1.bias"], rms)
    if w["attn_qkv.weight"] is not None:
        cur = g.add(b.mm(w["attn_qkv.weight"], cur), w["attn_qkv.bias"])
        row = g.row_size(cur.type, d_head)
        q, k, v = (g.view(cur, (d_head, hp.n_head, n_pos), (row, cur.nb[1])) for _ in range(3))
    else:
        q, k, v = (g.reshape(g.add(b.mm(w[f"attn_{x}.weight"], cur), w[f"attn_{x}.bias"]), d_head, hp.n_head,
                             n_pos) for x in "qkv")  # fmt: skip
    q, k = g.rope(q, positions), g.rope(k, positions)
    cur = g.add(b.attn(w["attn_out.weight"], w["attn_out.bias"], q, k, v, mask), inp_l)
    inp_l = cur
    cur = b.norm(cur, w["ln2.weight"], w["ln2.bias"], rms)
    cur = b.ffn(cur, w["ffn_up.weight"], w["ffn_up.bias"], w["ffn_gate.weight"], w["ffn_gate.bias"],
                w["ffn_down.weight"], w["ffn_down.bias"])  # fmt: skip
    return g.add(inp_l, cur)


def _qwen_merger(b: _Builder, cur: g.Tensor, rms: bool) -> g.Tensor:
    """The post-norm, then each merged token's four patches side by side through the merger MLP."""
    cur = b.norm(cur, b.weight("v.post_ln.weight"), b.weight("v.post_ln.bias"), rms)
    cur = g.reshape(cur, b.hp.n_embd * 4, b.n_patches // 4, 1)
    return b.ffn(cur, b.weight("mm.0.weight"), b.weight("mm.0.bias"), None, None, b.weight("mm.2.weight"),
                 b.weight("mm.2.bias"))  # fmt: skip


def _qwen2vl(b: _Builder) -> g.Graph:
    """`clip_graph_qwen2vl::build` (Qwen2-VL, Qwen2.5-VL): Qwen2.5-VL's RMS norms and window attention, its
    patches permuted into window order before the layers (all but every `n_wa_pattern`-th attending within
    their window by a mask) and the merged tokens permuted back after the merger."""
    hp, n_pos = b.hp, b.n_patches
    rms = hp.projector_type == "qwen2.5vl_merger"
    cur = _qwen_inp(b)
    positions = g.graph_input(g.I32, (n_pos * 4,), "positions")
    pre_w = b.weight("v.pre_ln.weight")
    if pre_w is not None:
        cur = b.norm(cur, pre_w, b.weight("v.pre_ln.bias"), rms)
    mask = None
    if hp.n_wa_pattern > 0:
        inv_window_idx = g.graph_input(g.I32, (n_pos // 4,), "inv_window_idx")
        mask = g.graph_input(g.F32, (n_pos, n_pos), "window_mask")
        if b.flash_attn:
            mask = g.cast(mask, g.F16)
        cur = g.get_rows(g.reshape(cur, hp.n_embd * 4, n_pos // 4), inv_window_idx)
        cur = g.reshape(cur, hp.n_embd, n_pos, 1)
    for il in range(hp.n_layer):
        full = hp.n_wa_pattern == 0 or (il + 1) % hp.n_wa_pattern == 0
        cur = _qwen_layer(b, il, cur, positions, rms, None if full else mask)
    cur = _qwen_merger(b, cur, rms)
    if hp.n_wa_pattern > 0:
        window_idx = g.graph_input(g.I32, (n_pos // 4,), "window_idx")
        cur = g.get_rows(g.reshape(cur, cur.ne[0], n_pos // 4), window_idx)
        cur = g.reshape(cur, cur.ne[0], n_pos // 4, 1)
    b.graph.expand(cur)
    return b.graph


def _qwen3vl(b: _Builder) -> g.Graph:
    """`clip_graph_qwen3vl::build` (Qwen3-VL): the patch bias, the learned position embeddings resized to the
    image and put in the merge order, LayerNorms, and the deepstack layers' features (each merged token's four
    patches through the layer's own norm and MLP) concatenated after the merger's output."""
    hp, n_pos = b.hp, b.n_patches
    cur = g.add(_qwen_inp(b), b.weight("v.patch_embd.bias"))
    cur = g.add(cur, _merge_order(b, _resized_position_embd(b)))
    positions = g.graph_input(g.I32, (n_pos * 4,), "positions")
    pre_w = b.weight("v.pre_ln.weight")
    if pre_w is not None:
        cur = b.norm(cur, pre_w, b.weight("v.pre_ln.bias"))
    merge = hp.n_merge * hp.n_merge if hp.n_merge > 0 else 4
    deepstack = None
    for il in range(hp.n_layer):
        cur = _qwen_layer(b, il, cur, positions, False)
        fc1 = b.weight(f"v.deepstack.{il}.fc1.weight")
        if fc1 is not None:
            feat = g.reshape(cur, hp.n_embd * merge, n_pos // merge, 1)
            feat = b.norm(feat, b.weight(f"v.deepstack.{il}.norm.weight"), b.weight(f"v.deepstack.{il}.norm.bias"))
            feat = b.ffn(feat, fc1, b.weight(f"v.deepstack.{il}.fc1.bias"), None, None,
                         b.weight(f"v.deepstack.{il}.fc2.weight"), b.weight(f"v.deepstack.{il}.fc2.bias"))  # fmt: skip
            deepstack = feat if deepstack is None else g.concat(deepstack, feat, 0)
    cur = _qwen_merger(b, cur, False)
    if deepstack is not None:
        cur = g.concat(cur, deepstack, 0)
    b.graph.expand(cur)
    return b.graph


def _stack(cur: g.Tensor, factor: int, n_embd: int) -> g.Tensor:
    """`build_stack`: every `factor` consecutive frames side by side in one row, the last row padded."""
    if factor <= 1:
        return cur
    total, stride = cur.n_elements, n_embd * factor
    padded = -(-total // stride) * stride
    if padded > total:
        cur = g.pad(g.view(cur, (total,)), padded - total)
    return g.view(cur, (stride, padded // stride), (g.row_size(cur.type, stride),))


def _whisper(b: _Builder) -> g.Graph:
    """`clip_graph_whisper_enc::build` (Qwen2-Audio, Voxtral, Audio Flamingo 3): the mel frames
    through two 1-D convolutions (the second of stride 2), each with GELU, the learned positions of the frames
    left, the ViT (pooled by 2 along time where `AUDIO_AVGPOOL`), frames stacked where `AUDIO_STACK_FRAMES`, then
    the type's projector."""
    hp, n_pos = b.hp, b.n_patches
    raw = g.graph_input(g.F32, (b.nx, b.ny, 1, 1), "inp_raw")
    cur = raw
    for i, stride in ((1, 1), (2, 2)):
        cur = g.conv_1d_ph(b.weight(f"a.conv1d.{i}.weight"), cur, stride)
        cur = g.unary(g.add(cur, b.weight(f"a.conv1d.{i}.bias")), "GELU_ERF")
    table = b.weight("a.position_embd.weight")
    positions = g.view(table, (table.ne[0], n_pos), (table.nb[1],))
    cur = b.vit(g.cont(g.transpose(cur)), n_pos, positions)
    if hp.projector_type in AUDIO_STACK_FRAMES:
        cur = _stack(cur, hp.stack_factor, hp.n_embd)
    if hp.projector_type == "qwen2a":
        cur = g.add(b.mm(b.weight("mm.a.fc.weight"), cur), b.weight("mm.a.fc.bias"))
    else:  # voxtral, musicflamingo
        cur = b.ffn(cur, b.weight("mm.a.mlp.1.weight"), b.weight("mm.a.mlp.1.bias"), None, None,
                    b.weight("mm.a.mlp.2.weight"), b.weight("mm.a.mlp.2.bias"))  # fmt: skip
    b.graph.expand(cur)
    return b.graph


def _gemma4a_attention(b: _Builder, il: int, cur: g.Tensor, pos_emb: g.Tensor, kq_mask: g.Tensor) -> g.Tensor:
    """The conformer's chunked local attention: Q in blocks of `GEMMA4A_CHUNK` frames, K and V as overlapping
    windows of the block and the `GEMMA4A_PAST` frames before it, the relative positions' scores shifted into
    place (Transformer-XL's blocked shift), soft-capped and masked, then the output projection."""
    hp, d_head, n_pos = b.hp, b.d_head, cur.ne[1]
    chunk, past = GEMMA4A_CHUNK, GEMMA4A_PAST
    context, n_rel = chunk + past, past + 1
    n_blocks = -(-n_pos // chunk)
    q, k, v = (g.reshape(b.mm(b.layer(il, f"attn_{x}.weight"), cur), d_head, hp.n_head, n_pos) for x in "qkv")
    q = g.scale(q)
    q_scale = b.layer(il, "per_dim_scale.weight")
    if q_scale is not None:
        q = g.mul(q, g.reshape(q_scale, d_head, 1, 1))
    k = g.scale(k)
    k_scale = b.layer(il, "per_dim_k_scale.weight")
    if k_scale is not None:
        k = g.mul(k, g.reshape(k_scale, d_head, 1, 1))
    q = g.pad(q, 0, 0, n_blocks * chunk - n_pos)
    q = g.cont(g.permute(g.reshape(q, d_head, hp.n_head, chunk, n_blocks), 0, 3, 1, 2))

    def blocks(t: g.Tensor) -> g.Tensor:  # [D, H, N] -> the overlapping windows [D, H, context, B]
        t = g.pad(t, 0, 0, context * n_blocks - n_pos)
        return g.cont(g.view(t, (d_head, hp.n_head, context, n_blocks), (t.nb[1], t.nb[2], chunk * t.nb[2])))

    k_blocks = g.cont(g.permute(blocks(k), 0, 3, 1, 2))
    v_blocks = g.cont(g.permute(blocks(v), 1, 3, 0, 2))
    scores = g.mul_mat(k_blocks, q)
    k_rel = b.layer(il, "attn_k_rel.weight")
    if k_rel is not None:
        rel = g.reshape(g.mul_mat(k_rel, pos_emb), d_head, hp.n_head, n_rel)
        rel = g.cont(g.permute(rel, 0, 2, 1, 3))
        rel = g.mul_mat(rel, g.reshape(q, d_head, chunk * n_blocks, hp.n_head))
        rel = g.reshape(g.pad(g.reshape(rel, n_rel, chunk, n_blocks, hp.n_head), context + 1 - n_rel),
                        (context + 1) * chunk, n_blocks, hp.n_head)  # fmt: skip
        rel = g.cont(g.view(rel, (chunk * context, n_blocks, hp.n_head), (rel.nb[1], rel.nb[2])))
        scores = g.add(scores, g.reshape(rel, context, chunk, n_blocks, hp.n_head))
    scores = g.add(g.scale(g.unary(g.scale(scores), "TANH")), kq_mask)
    x = g.mul_mat(v_blocks, g.soft_max(scores))
    x = g.cont(g.cont(g.permute(x, 0, 2, 3, 1)), d_head * hp.n_head, chunk * n_blocks)
    if n_blocks * chunk > n_pos:
        x = g.cont(g.view(x, (d_head * hp.n_head, n_pos), (x.nb[1],)))
    return b._proj(x, b.layer(il, "attn_out.weight"), b.layer(il, "attn_out.bias"))


def _gemma4a_ffn(b: _Builder, il: int, cur: g.Tensor, suffix: str) -> g.Tensor:
    """One of the conformer's half-step FFNs (SiLU), its norms around it, added at half weight."""
    x = b.norm(cur, b.layer(il, f"ffn_norm{suffix}.weight"), None, rms=True)
    x = b.mm(b.layer(il, f"ffn_down{suffix}.weight"), g.unary(b.mm(b.layer(il, f"ffn_up{suffix}.weight"), x), "SILU"))
    post = b.layer(il, f"ffn_post_norm{suffix}.weight")
    if post is not None:
        x = b.norm(x, post, None, rms=True)
    return g.add(cur, g.scale(x))


def _gemma4a(b: _Builder) -> g.Graph:
    """`clip_graph_gemma4a::build` (Gemma 4's audio encoder, a conformer): the mel frames through two stride-2
    2-D convolutions (padded by one, each with a LayerNorm over its channels and ReLU), flattened and projected;
    per layer a half-step FFN, chunked local attention with relative positions, the convolution module (GLU,
    a causal depthwise convolution, an RMS norm, SiLU) and a second half-step FFN, then the layer's norm; the
    output projection, an RMS norm and the projection into the language model. Every matrix is a clippable
    linear (`_Builder.mm`)."""
    hp = b.hp
    cur = g.cont(g.transpose(g.graph_input(g.F32, (b.nx, b.ny, 1, 1), "inp_raw")))
    for i in range(2):
        cur = g.conv_2d(b.weight(f"a.conv1d.{i}.weight"), cur, 2, 2, 1, 1)
        bias = b.weight(f"a.conv1d.{i}.bias")
        cur = g.add(cur, bias) if bias is not None else cur
        norm_w = b.weight(f"a.conv1d.{i}.norm.weight")
        if norm_w is not None:
            cur = g.mul(g.norm(g.cont(g.permute(cur, 1, 2, 0, 3))), norm_w)
            cur = g.cont(g.permute(cur, 2, 0, 1, 3))
        cur = g.unary(cur, "RELU")
    cur = g.cont(g.permute(cur, 1, 2, 0, 3))
    cur = g.reshape(cur, cur.ne[0] * cur.ne[1], cur.ne[2])
    cur = b._proj(cur, b.weight("a.input_projection.weight"), b.weight("a.input_projection.bias"))
    n_blocks = -(-cur.ne[1] // GEMMA4A_CHUNK)
    pos_emb = g.graph_input(g.F32, (hp.n_embd, GEMMA4A_PAST + 1), "pos_emb")
    kq_mask = g.graph_input(g.F32, (GEMMA4A_CHUNK + GEMMA4A_PAST, GEMMA4A_CHUNK, n_blocks), "kq_mask")
    for il in range(hp.n_layer):
        cur = _gemma4a_ffn(b, il, cur, "")
        attn_norm = b.layer(il, "attn_pre_norm.weight") or b.layer(il, "ln1.weight")
        x = b.norm(cur, attn_norm, None, rms=True) if attn_norm is not None else cur
        x = _gemma4a_attention(b, il, x, pos_emb, kq_mask)
        post = b.layer(il, "attn_post_norm.weight")
        cur = g.add(cur, b.norm(x, post, None, rms=True) if post is not None else x)
        # the convolution module; the file's `conv_norm` is the norm before it, `norm_conv` the one inside
        x = b.mm(b.layer(il, "conv_pw1.weight"), b.norm(cur, b.layer(il, "conv_norm.weight"), None, rms=True))
        half = x.ne[0] // 2
        gate = g.unary(g.cont(g.view(x, (half, x.ne[1]), (x.nb[1],))), "SIGMOID")
        x = g.cont(g.transpose(g.mul(g.view(x, (half, x.ne[1]), (x.nb[1],)), gate)))
        x = g.ssm_conv(g.pad(x, 4), b.layer(il, "conv_dw.weight"))
        dw_bias = b.layer(il, "conv_dw.bias")
        x = g.add(x, dw_bias) if dw_bias is not None else x
        inner = b.layer(il, "norm_conv.weight")
        x = g.mul(g.rms_norm(x), inner) if inner is not None else x
        x = b.mm(b.layer(il, "conv_pw2.weight"), g.unary(x, "SILU"))
        cur = _gemma4a_ffn(b, il, g.add(cur, x), "_1")
        out_norm = b.layer(il, "ln2.weight")
        cur = b.norm(cur, out_norm, None, rms=True) if out_norm is not None else cur
    cur = b._proj(cur, b.weight("a.pre_encode.out.weight"), b.weight("a.pre_encode.out.bias"))
    cur = b._scaled(g.rms_norm(cur), b.weight("mm.a.soft_emb_norm.weight"))
    cur = b._proj(cur, b.weight("mm.a.input_projection.weight"), None)
    b.graph.expand(cur)
    return b.graph


def _derived_graph(b: _Builder) -> g.Graph:
    """Clip's standard ViT encoder over the warmup input's tokens, without the type's own head (derived)."""
    if b.hp.modality == "vision" and b.weight("v.patch_embd.weight") is not None:
        inp = b.inp()
    else:
        inp = g.graph_input(g.F32, (b.hp.n_embd, b.n_patches, 1), "inp")
    if all(b.layer(0, name) is None for name in ("ln1.weight", "attn_qkv.weight", "attn_q.weight")):
        b.graph.expand(inp)  # no standard layers to build: the input alone
        return b.graph
    b.graph.expand(b.vit(inp, b.n_patches, None))
    return b.graph


#: projector type -> its warmup graph, reproduced node for node
GRAPHS: dict[str, Callable[[_Builder], g.Graph]] = {
    "gemma3": _gemma3, "gemma4v": _gemma4v, "qwen2vl_merger": _qwen2vl, "qwen2.5vl_merger": _qwen2vl,
    "qwen3vl_merger": _qwen3vl, "qwen2a": _whisper, "voxtral": _whisper, "musicflamingo": _whisper,
    "gemma4a": _gemma4a, "pixtral": _pixtral,
}  # fmt: skip
