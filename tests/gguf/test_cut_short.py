"""Issue 31's GGUF items: zero-element tensors, files cut short (header-only), untouched metadata bits, and
tensor names longer than ggml's. Files are written by gguf-py, the reference writer, wherever it can."""

from __future__ import annotations

import json
import struct

import gguf
import numpy as np
import pytest
from typer.testing import CliRunner

import weightkit
from weightkit.cli import app
from weightkit.errors import ArgumentError, FormatError
from weightkit.gguf import (
    GGUFFile,
    GGUFValueType,
    edit_gguf,
    open_gguf,
    plan_tensor,
    split_path,
    write_gguf,
    write_split,
)

LONG = "blk.0." + "x" * 60  # 66 bytes: over ggml's 63


def reference_file(path, tensors: dict[str, np.ndarray], kv: dict[str, float] | None = None) -> bytes:
    """Write `tensors` (and float32 keys) with gguf-py; returns the file's bytes."""
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value in (kv or {}).items():
        w.add_float32(key, value)
    for name, arr in tensors.items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def test_zero_element_tensors_read_write_and_dequantize(tmp_path):
    tensors = {
        "empty": np.zeros((0, 32), np.float32),
        "also": np.zeros((3, 0), np.float16),
        "w": np.ones(8, np.float32),
    }
    expected = reference_file(tmp_path / "ref.gguf", tensors)
    with GGUFFile(tmp_path / "ref.gguf") as f:
        assert f.tensors["empty"].shape == (0, 32) and f.tensors["empty"].nbytes == 0
        assert f.tensor("empty").shape == (0, 32)
        assert f.tensor("also").shape == (3, 0)
        assert {n: a.shape for n, a in f.load().items()} == {"empty": (0, 32), "also": (3, 0), "w": (8,)}
    write_gguf(tmp_path / "ours.gguf", {"general.architecture": "llama"}, tensors)
    assert (tmp_path / "ours.gguf").read_bytes() == expected
    write_gguf(tmp_path / "q.gguf", {}, [plan_tensor("q", (0, 256), "Q4_K", b"")])
    with GGUFFile(tmp_path / "q.gguf") as f:
        out = f.tensor("q")
        assert out.shape == (0, 256) and out.dtype == np.float32


def cut_short(tmp_path, drop: int):
    tensors = {"token_embd.weight": np.ones((64, 64), np.float32), "output_norm.weight": np.ones(64, np.float32)}
    data = reference_file(tmp_path / "full.gguf", tensors)
    path = tmp_path / "part.gguf"
    path.write_bytes(data[: len(data) - drop])
    return path


def test_cut_short_is_refused_unless_header_only(tmp_path):
    path = cut_short(tmp_path, 300)
    with pytest.raises(FormatError, match=r"'token_embd.weight' occupies.*header_only"):
        weightkit.open(path)
    with weightkit.open(path, header_only=True) as m:
        assert m.metadata["general.architecture"] == "llama"
        assert set(m.tensors) == {"token_embd.weight", "output_norm.weight"}
        # the last tensor's 256 bytes and 44 of the first's
        assert m.missing == {"token_embd.weight": 44, "output_norm.weight": 256}
        with pytest.raises(FormatError, match=r"'output_norm.weight' lacks 256 of its 256 bytes"):
            m.tensor("output_norm.weight")
        with pytest.raises(FormatError, match="lacks 44"):
            m.raw("token_embd.weight")


def test_header_only_file_of_a_split_model(tmp_path):
    paths = write_split(
        tmp_path / "m", {"general.architecture": "llama"},
        [plan_tensor(f"t{i}", (32,), "F32", np.ones(32, np.float32)) for i in range(2)], max_tensors=1,
    )  # fmt: skip
    paths[1].write_bytes(paths[1].read_bytes()[:-100])
    with pytest.raises(FormatError):
        open_gguf(split_path(tmp_path / "m", 0, 2))
    with open_gguf(split_path(tmp_path / "m", 0, 2), header_only=True) as m:
        assert m.missing == {"t1": 100}
        assert m.tensor("t0").sum() == 32


def test_inspect_says_what_is_missing(tmp_path):
    path = cut_short(tmp_path, 300)
    result = CliRunner().invoke(app, ["inspect", str(path), "--tensors"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # rich wraps long lines
    assert "the file is cut short" in text and "(300 bytes) of tensor data missing" in text
    assert "2 of 2 tensors incomplete (token_embd.weight, output_norm.weight)" in text
    doc = json.loads(CliRunner().invoke(app, ["inspect", str(path), "--json"]).output)
    assert doc["summary"]["missing_bytes"] == 300
    assert doc["summary"]["incomplete_tensors"] == ["token_embd.weight", "output_norm.weight"]
    assert [t.get("missing_bytes") for t in doc["tensors"]] == [44, 256]


def test_only_meta_file_as_ggml_writes_it(tmp_path):
    """A header without its data (ggml's gguf_write_to_file with only_meta): gguf-py's header, no data."""
    path = cut_short(tmp_path, 0)
    with GGUFFile(path) as full:
        header = path.read_bytes()[: full.data_offset]
    path.write_bytes(header)
    with weightkit.open(path, header_only=True) as m:
        assert sum(m.missing.values()) == 64 * 64 * 4 + 64 * 4


def test_long_tensor_names(tmp_path):
    with pytest.raises(ArgumentError, match="at most 63 bytes"):
        write_gguf(tmp_path / "x.gguf", {}, {LONG: np.ones(4, np.float32)})
    write_gguf(tmp_path / "ok.gguf", {}, {LONG[:63]: np.ones(4, np.float32)})
    reference_file(tmp_path / "long.gguf", {LONG: np.ones(4, np.float32)})
    with GGUFFile(tmp_path / "long.gguf") as f:
        assert f.tensor(LONG).tolist() == [1, 1, 1, 1]
    result = CliRunner().invoke(app, ["inspect", str(tmp_path / "long.gguf")], terminal_width=200)
    assert result.exit_code == 0
    assert "llama.cpp allows 63 and will not load this file" in " ".join(result.output.split())


def test_edit_keeps_untouched_keys_byte_for_byte(tmp_path):
    """A float32 signalling NaN (0x7F800001) comes through an edit as it was (gguf-py's writer, like a Python
    float, quiets it: the bits are put in place after)."""
    path = tmp_path / "m.gguf"
    reference_file(path, {"w": np.ones(4, np.float32)}, {"x.snan": 1.5})
    raw = path.read_bytes()
    at = raw.index(b"x.snan") + len(b"x.snan") + 4
    raw = raw[:at] + struct.pack("<I", 0x7F800001) + raw[at + 4 :]
    path.write_bytes(raw)
    edit_gguf(path, tmp_path / "out.gguf", set={"general.name": "edited"})
    out = (tmp_path / "out.gguf").read_bytes()
    at = out.index(b"x.snan") + len(b"x.snan") + 4
    assert out[at : at + 4] == struct.pack("<I", 0x7F800001)
    with GGUFFile(tmp_path / "out.gguf") as f:
        assert f.metadata["general.name"] == "edited"
        assert f.value_bytes("x.snan") == struct.pack("<I", 0x7F800001)
        write_gguf(tmp_path / "again.gguf", dict(f.metadata.typed_items()), {})  # a read value keeps its bits too
    assert struct.pack("<I", 0x7F800001) in (tmp_path / "again.gguf").read_bytes()
    # edit with nothing to change: the same file
    edit_gguf(path, tmp_path / "same.gguf")
    assert (tmp_path / "same.gguf").read_bytes() == raw
    assert GGUFFile(path).metadata.value_type("x.snan") == GGUFValueType.FLOAT32
