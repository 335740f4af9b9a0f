"""Mixture-of-experts conversion beyond the goldens: bad expert tensors, the MXFP4 repacking against the
format's definition, and that a layer's experts are read only while their stack is written."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weightkit import quant
from weightkit.convert.families.gpt_oss import repack_mxfp4
from weightkit.convert.hf import convert_hf
from weightkit.errors import FormatError, UnsupportedError

from .test_hf_errors import _drop, _reshape, _rewrite_tensors, _set_config, assert_refused
from .test_hf_golden import GOLDEN

_EXPERTS = "model.layers.1.mlp.experts."


def _rename(old: str, new: str):
    return lambda t: t.update({new: t.pop(old)})


def _retype(name: str, dtype: type):
    return lambda t: t.update({name: t[name].astype(dtype)})


# (what is broken, checkpoint to start from, how to break it, expected error, fragments of its message)
CASES = [
    ("missing expert", "tiny-qwen3moe", lambda d: _rewrite_tensors(d, _drop(_EXPERTS + "7.up_proj.weight")),
     FormatError, ["model.safetensors", "do not make up whole layers of 12 experts", "experts.0.down_proj"]),
    ("expert numbered past the count", "tiny-qwen3moe",
     lambda d: _rewrite_tensors(d, _rename(_EXPERTS + "7.up_proj.weight", _EXPERTS + "12.up_proj.weight")),
     FormatError, ["layer 1 has no model.layers.1.mlp.experts.7.up_proj.weight", "experts.12.up_proj"]),
    ("misshapen expert", "tiny-qwen3moe", lambda d: _rewrite_tensors(d, _reshape(_EXPERTS + "3.gate_proj.weight",
                                                                                  (33, 32))),
     FormatError, ["experts.3.gate_proj.weight", "[33, 32]", "expert 0's is [32, 32]"]),
    ("experts of another size than config.json's", "tiny-qwen3moe",
     lambda d: _set_config(d, moe_intermediate_size=48), FormatError,
     ["blk.0.ffn_gate_exps.weight has shape [12, 32, 32]", "moe_intermediate_size=48"]),
    ("fewer experts than config.json's", "tiny-qwen3moe", lambda d: _set_config(d, num_experts=16), FormatError,
     ["do not make up whole layers of 16 experts"]),
    ("a dense layer among the MoE ones", "tiny-qwen3moe", lambda d: _rewrite_tensors(d, lambda t: t.update(
        {"model.layers.1.mlp.down_proj.weight": np.zeros((32, 64), np.float32)})),
     FormatError, ["'model.layers.1.mlp.down_proj.weight' has no GGUF name for qwen3moe"]),
    ("MXFP4 Qwen3-MoE", "tiny-qwen3moe", lambda d: _set_config(d, quantization_config={"quant_method": "mxfp4"}),
     UnsupportedError, ["quant_method 'mxfp4'", "qwen3moe"]),
    ("no shared expert gate", "tiny-qwen2moe",
     lambda d: _rewrite_tensors(d, _drop("model.layers.1.mlp.shared_expert_gate.weight")),
     FormatError, ["no blk.1.ffn_gate_inp_shexp.weight"]),
    ("shared expert of another size than config.json's", "tiny-qwen2moe",
     lambda d: _set_config(d, shared_expert_intermediate_size=40), FormatError,
     ["blk.0.ffn_gate_shexp.weight has shape [48, 32]", "shared_expert_intermediate_size=40"]),
    ("blocks without scales", "tiny-gpt-oss", lambda d: _rewrite_tensors(d, _drop(_EXPERTS + "down_proj_scales")),
     FormatError, ["down_proj_blocks has no model.layers.1.mlp.experts.down_proj_scales"]),
    ("scales without blocks", "tiny-gpt-oss", lambda d: _rewrite_tensors(d, _drop(_EXPERTS + "gate_up_proj_blocks")),
     FormatError, ["gate_up_proj_scales has no", "gate_up_proj_blocks"]),
    ("blocks not of 16 bytes", "tiny-gpt-oss",
     lambda d: _rewrite_tensors(d, _reshape(_EXPERTS + "down_proj_blocks", (4, 32, 2, 8))),
     FormatError, ["down_proj_blocks' [4, 32, 2, 8]", "not MXFP4 blocks"]),
    ("gate_up blocks of an odd row count", "tiny-gpt-oss",
     lambda d: _rewrite_tensors(d, lambda t: [_reshape(_EXPERTS + f"gate_up_proj_{k}", s)(t) for k, s in
                                              (("blocks", (4, 127, 1, 16)), ("scales", (4, 127, 1)))]),
     FormatError, ["127 rows: not gate and up pairs"]),
    ("float blocks", "tiny-gpt-oss", lambda d: _rewrite_tensors(d, _retype(_EXPERTS + "down_proj_blocks", np.float32)),
     FormatError, ["down_proj_blocks' is F32", "U8"]),
    ("no sliding window", "tiny-gpt-oss", lambda d: _set_config(d, sliding_window=None), FormatError,
     ["sliding_window is None"]),
    ("odd dense gate_up", "tiny-gpt-oss-dense",
     lambda d: _rewrite_tensors(d, _reshape(_EXPERTS + "gate_up_proj", (4, 32, 127))),
     FormatError, ["gate_up_proj' [4, 32, 127]", "even out"]),
    ("missing expert bias", "tiny-gpt-oss-dense", lambda d: _rewrite_tensors(d, _drop(_EXPERTS + "down_proj_bias")),
     FormatError, ["no blk.1.ffn_down_exps.bias"]),
    ("kv_b of other heads than config.json's", "tiny-deepseek-v3", lambda d: _set_config(d, v_head_dim=16),
     FormatError, ["kv_b_proj.weight' [256, 32]", "[4 * (32 + 16), *]"]),
    ("a routed expert missing", "tiny-deepseek-v3",
     lambda d: _rewrite_tensors(d, _drop(_EXPERTS + "2.down_proj.weight")),
     FormatError, ["do not make up whole layers of 4 experts", "down_proj, gate_proj, up_proj"]),
    ("no NextN count", "tiny-glm-4.5", lambda d: _set_config(d, num_nextn_predict_layers=None), FormatError,
     ["num_nextn_predict_layers None is not a count"]),
    ("NextN layer not counted", "tiny-glm-4.5", lambda d: _set_config(d, num_nextn_predict_layers=0), FormatError,
     ["'model.layers.3.eh_proj.weight' has no GGUF name for glm4moe"]),
    ("a Mixtral expert missing", "tiny-mixtral",
     lambda d: _rewrite_tensors(d, _drop("model.layers.0.block_sparse_moe.experts.3.w3.weight")),
     FormatError, ["do not make up whole layers of 4 experts", "w1, w2, w3"]),
]  # fmt: skip


@pytest.mark.parametrize(("what", "base", "breaks", "error", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_bad_moe_checkpoint(hf_checkpoints, tmp_path, what, base, breaks, error, fragments):
    assert_refused(hf_checkpoints[base], tmp_path, breaks, error, fragments, "f16")


def test_dense_layer_flags_are_not_read(hf_checkpoints, tmp_path):
    """config.json's mlp_only_layers and decoder_sparse_step change nothing, as in the reference (whose file for
    this folder, checked once by hand, is the recorded one without them): experts in every layer convert; a
    dense layer's tensors are refused by name (above), where the reference cannot map them either."""
    folder = tmp_path / "tiny-qwen3moe"
    shutil.copytree(hf_checkpoints["tiny-qwen3moe"], folder)
    _set_config(folder, mlp_only_layers=[1], decoder_sparse_step=2)
    convert_hf(folder, tmp_path / "out.gguf", "f16")
    digest = hashlib.sha256((tmp_path / "out.gguf").read_bytes()).hexdigest()
    assert digest == GOLDEN["checkpoints"]["tiny-qwen3moe"]["f16"]["sha256"]


# E2M1 values of the 16 codes, as the MXFP4 (OCP microscaling) format defines them
_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def _hf_mxfp4_values(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Hugging Face's MXFP4 decoding: value 2i in byte i's low nibble, 2i+1 in its high one, times 2^(scale-127)."""
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    values = _E2M1[codes] * np.ldexp(np.float32(1), scales.astype(np.int32) - 127)[..., None]
    return values.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)


@settings(max_examples=50, deadline=None)
@given(
    st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3)),
    st.integers(0, 2**32 - 1),
)
def test_repacked_mxfp4_decodes_to_the_checkpoints_values(dims, seed):
    """GGML's MXFP4 decoding of the repacked data gives the values the checkpoint's blocks and scales mean."""
    experts, rows, n_blocks = dims
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (experts, rows, n_blocks, 16), dtype=np.uint8)
    scales = rng.integers(100, 150, (experts, rows, n_blocks), dtype=np.uint8)
    packed = repack_mxfp4(blocks, scales)
    assert packed.shape == (experts, rows, n_blocks * 17) and packed.dtype == np.uint8
    ours = quant.dequantize(packed.tobytes(), "MXFP4", (experts, rows, n_blocks * 32))
    np.testing.assert_array_equal(ours, _hf_mxfp4_values(blocks, scales))


def test_experts_are_read_only_while_their_stack_is_written(hf_checkpoints, tmp_path, monkeypatch):
    """Streaming stays bounded: each expert tensor is read once, right when the stack it belongs to is
    written (one layer's experts of one kind in memory), and nothing is read ahead."""
    from weightkit.convert.hf import convert as module

    events: list[str] = []
    real = module.read_checkpoint

    def logged(folder, **options):
        tensors, opened = real(folder, **options)
        for name, t in tensors.items():

            def read(t=t, name=name):
                events.append(name)
                return t.read()

            tensors[name] = type(t)(t.name, t.dtype, t.shape, read, t.file, t.ggml)
        return tensors, opened

    monkeypatch.setattr(module, "read_checkpoint", logged)
    convert_hf(hf_checkpoints["tiny-qwen3moe"], tmp_path / "out.gguf", "f16",
               progress=lambda name, done, total: events.append("> " + name))  # fmt: skip
    for bid in range(2):
        for kind in ("down", "gate", "up"):
            i = events.index(f"> blk.{bid}.ffn_{kind}_exps.weight")
            before = events[i - 12 : i]
            assert before == [f"model.layers.{bid}.mlp.experts.{x}.{kind}_proj.weight" for x in range(12)]
            assert events[i - 13].startswith(">")  # the previous tensor was written before these were read
    assert len([e for e in events if not e.startswith(">")]) == len({e for e in events if not e.startswith(">")})
