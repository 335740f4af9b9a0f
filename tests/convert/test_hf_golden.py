"""`convert_hf` against llama.cpp's own converter: the same file, byte for byte, for every test checkpoint
and every --outtype, and for the projectors (`--mmproj`) recorded (hashes recorded by
tests/data/make_convert_golden.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from weightkit.convert.hf import convert_hf
from weightkit.errors import WeightkitError
from weightkit.gguf import writer as gguf_writer

from .conftest import checkpoint_group, file_sha256, output_sha256

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "data" / "convert_golden.json").read_text())
#: The checkpoints whose conversions take 3 s or more (GPT-OSS's o200k vocabulary; Gemma 3's and Gemma 4's 262k
#: ones, from tokenizer.json alone), and their saves by transformers 5.x: marked `slow`.
SLOW = {n + s for n in ("tiny-gpt-oss", "tiny-gpt-oss-dense", "tiny-gemma-3-fast") for s in ("", "-tf5")} | {
    "tiny-gemma-4",
    "tiny-gemma-4-moe",
}
#: Checkpoints whose other outtypes are marked `slow`: every outtype takes the same steps but the last, and
#: each conversion costs a second or more (Qwen2's 151,936-token vocabulary, Gemma 3n's 262,400 tokens, Granite
#: 4.0-H's Mamba2 layers).
FAST_OUTTYPES = {"tiny-qwen35": ("f32", "q8_0"), "tiny-qwen35-text": ("f16",), "tiny-qwen35-moe": ("auto",),
                 "tiny-qwen35-moe-text": ("bf16",), "tiny-qwen3next": ("f16",), "tiny-qwen2.5-vl": ("bf16",),
                 "tiny-qwen3-vl": ("q8_0",), "tiny-qwen3-vl-moe": ("f32",), "tiny-gemma-3n": ("bf16",),
                 "tiny-llama4": ("bf16", "q8_0"), "tiny-gemma-3n-text": ("q8_0",),
                 "tiny-granite-4h": ("f32", "q8_0"), "tiny-granite-4h-dense": ("bf16",)}  # fmt: skip


def _slow(name: str, outtype: str) -> bool:
    return name in SLOW or outtype not in FAST_OUTTYPES.get(name, (outtype,))


def _marks(name: str, outtype: str) -> list[pytest.MarkDecorator]:
    """A checkpoint's outtypes (and its -tf5 save's) on one worker: `checkpoint_group`."""
    return [checkpoint_group(name), *([pytest.mark.slow] if _slow(name, outtype) else [])]


CASES = [
    pytest.param(name, outtype, id=f"{name}-{outtype}", marks=_marks(name, outtype))
    for name, runs in GOLDEN["checkpoints"].items()
    for outtype in runs
]


@pytest.mark.parametrize(("name", "outtype"), CASES)
def test_same_bytes_as_convert_hf_to_gguf(converted, vocabulary_once, name, outtype):
    """The reference's file; or, where the reference refuses the checkpoint (recorded with its last line), an
    error of weightkit's. (`converted` keeps the files the GGUF -> HF tests start from.)"""
    expected = GOLDEN["checkpoints"][name][outtype]
    if "refused" in expected:
        with pytest.raises(WeightkitError):
            converted(name, outtype)
        return
    out, report = converted(name, outtype)
    assert out.stat().st_size == expected["bytes"]
    assert file_sha256(out) == expected["sha256"]
    assert len(report.tensors) == expected["tensors"] and report.metadata_keys == expected["keys"]
    assert report.bytes_written == expected["bytes"]


#: checkpoint, outtype, values in each group of rows written: Gemma 3n's padded per-layer embeddings in groups of
#: 1,489 rows straddling the end of their own 262,144; stacked experts (apart, fused, fused and stored transposed)
#: in groups of a few dozen rows straddling the experts
GROUPS = [
    ("tiny-gemma-3n-text", "q8_0", 1489 * 32),
    ("tiny-llama4", "bf16", 2000),
    ("tiny-qwen35-moe-text", "bf16", 700),
    ("tiny-qwen35-moe", "auto", 700),
    ("tiny-qwen3-vl-moe", "f32", 700),
]


@pytest.mark.parametrize(("name", "outtype", "group"),
                         [pytest.param(*g, id=g[0], marks=checkpoint_group(g[0])) for g in GROUPS])  # fmt: skip
def test_written_a_group_of_rows_at_a_time(hf_checkpoints, tmp_path, monkeypatch, name, outtype, group):
    """A tensor made by rows (a stored one, or one joined or transposed from others) reaches the writer a group of
    rows at a time: the same bytes."""
    monkeypatch.setattr(gguf_writer, "PIECE_VALUES", group)
    out = tmp_path / "out.gguf"
    convert_hf(hf_checkpoints[name], out, outtype)
    assert output_sha256(out) == GOLDEN["checkpoints"][name][outtype]["sha256"]


@pytest.mark.parametrize(
    ("name", "outtype"),
    [pytest.param(name, t, id=f"{name}-{t}") for name, runs in GOLDEN.get("projectors", {}).items() for t in runs],
)
def test_same_projector_as_convert_hf_to_gguf_mmproj(hf_checkpoints, tmp_path, name, outtype):
    """`--mmproj`: the projector file the reference's `convert_hf_to_gguf.py --mmproj` writes."""
    expected = GOLDEN["projectors"][name][outtype]
    out = tmp_path / "mmproj.gguf"
    report = convert_hf(hf_checkpoints[name], out, outtype, mmproj=True)
    assert report.architecture == "clip" and report.bytes_written == expected["bytes"]
    assert output_sha256(out) == expected["sha256"]
    assert len(report.tensors) == expected["tensors"] and report.metadata_keys == expected["keys"]


@pytest.mark.needs_torch
def test_pytorch_bin_checkpoint(hf_checkpoints, tmp_path):
    """A pytorch_model.bin (read with torch.load(weights_only=True), in its own order): saved here in the
    sorted order safetensors parts are read in, it converts to the same bytes."""
    import shutil

    import torch

    import weightkit

    folder = tmp_path / "tiny-bert"
    shutil.copytree(hf_checkpoints["tiny-bert"], folder)
    with weightkit.open(folder / "model.safetensors", framework="torch") as m:
        state = {name: m.tensor(name).clone() for name in sorted(m.tensors)}
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    out = tmp_path / "out.gguf"
    convert_hf(folder, out, "f16")
    assert hashlib.sha256(out.read_bytes()).hexdigest() == GOLDEN["checkpoints"]["tiny-bert"]["f16"]["sha256"]
