"""read_imatrix: llama.cpp's two imatrix formats, read as llama-quantize reads them, and a malformed-file
corpus for the legacy one."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import weightkit
from weightkit.convert import quantize_gguf, read_imatrix
from weightkit.errors import FormatError
from weightkit.gguf import GGUFValueType, GGUFWriter, Value, write_gguf


def _legacy(entries: list[tuple[str, int, np.ndarray]], trailer: bool = True) -> bytes:
    """A legacy imatrix.dat as llama-imatrix wrote it: entries, then the chunk count and dataset name."""
    out = [struct.pack("<i", len(entries))]
    for name, ncall, values in entries:
        raw = name.encode()
        out += [struct.pack("<i", len(raw)), raw, struct.pack("<ii", ncall, values.size)]
        out.append(values.astype("<f4").tobytes())
    if trailer:
        out += [struct.pack("<i", 12), struct.pack("<i", 9), b"wiki.test"]
    return b"".join(out)


def test_legacy_values_are_divided_by_ncall(tmp_path):
    rng = np.random.default_rng(0)
    q = rng.uniform(1, 9, 256).astype(np.float32)
    experts = rng.uniform(1, 9, 4 * 256).astype(np.float32)
    raw = rng.uniform(1, 9, 256).astype(np.float32)
    path = tmp_path / "imatrix.dat"
    path.write_bytes(_legacy([("blk.0.attn_q.weight", 3, q), ("blk.0.ffn_up_exps.weight", 7, experts),
                              ("blk.0.ffn_down.weight", 0, raw)]))  # fmt: skip
    loaded = read_imatrix(path)
    assert np.array_equal(loaded["blk.0.attn_q.weight"].reshape(-1), q / np.float32(3))
    assert np.array_equal(loaded["blk.0.ffn_up_exps.weight"].reshape(-1), experts / np.float32(7))
    assert np.array_equal(loaded["blk.0.ffn_down.weight"].reshape(-1), raw)  # ncall 0: the values as they are
    (tmp_path / "bare.dat").write_bytes(_legacy([("blk.0.attn_q.weight", 3, q)], trailer=False))
    assert np.array_equal(read_imatrix(tmp_path / "bare.dat")["blk.0.attn_q.weight"].reshape(-1), q / np.float32(3))


def test_gguf_counts_are_rounded_as_llama_quantize_does(tmp_path):
    sums = np.arange(1, 9, dtype=np.float32).reshape(4, 2) * 10
    counts = np.array([[2.4], [2.5], [0.4], [0]], np.float32)  # lround: 2, 3, 0 (never seen), 0
    with GGUFWriter(tmp_path / "i.gguf", {"imatrix.chunk_count": Value(1, GGUFValueType.UINT32)}) as w:
        w.add_tensor("m.weight.in_sum2", sums)
        w.add_tensor("m.weight.counts", counts)
    got = read_imatrix(tmp_path / "i.gguf")["m.weight"]
    assert np.array_equal(got, np.array([[5, 10], [10, 40 / 3], [1, 1], [1, 1]], np.float32))


def test_quantize_takes_a_legacy_file(tmp_path):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 256)).astype(np.float32)
    write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama"}, {"blk.0.attn_q.weight": w})
    values = rng.uniform(1, 9, 256).astype(np.float32)
    (tmp_path / "imatrix.dat").write_bytes(_legacy([("blk.0.attn_q.weight", 5, values)]))
    quantize_gguf(tmp_path / "m.gguf", tmp_path / "a.gguf", "IQ4_XS", imatrix=tmp_path / "imatrix.dat")
    quantize_gguf(tmp_path / "m.gguf", tmp_path / "b.gguf", "IQ4_XS",
                  imatrix={"blk.0.attn_q.weight": values / np.float32(5)})  # fmt: skip
    quantize_gguf(tmp_path / "m.gguf", tmp_path / "c.gguf", "IQ4_XS")
    with weightkit.open(tmp_path / "a.gguf") as a, weightkit.open(tmp_path / "b.gguf") as b:
        assert np.array_equal(a.raw("blk.0.attn_q.weight"), b.raw("blk.0.attn_q.weight"))
        with weightkit.open(tmp_path / "c.gguf") as c:
            assert not np.array_equal(a.raw("blk.0.attn_q.weight"), c.raw("blk.0.attn_q.weight"))


def _corpus() -> dict[str, tuple[bytes, int]]:
    """Malformed legacy files and the byte offset the error must name."""
    good = _legacy([("blk.0.attn_q.weight", 3, np.ones(4, np.float32))], trailer=False)
    name_len = len("blk.0.attn_q.weight")
    cases = {
        "empty": (b"", 0),
        "no entries": (struct.pack("<i", 0), 0),
        "negative entries": (struct.pack("<i", -5), 0),
        "negative name length": (struct.pack("<ii", 1, -1), 4),
        "name past the end": (struct.pack("<ii", 1, 1000) + b"abc", 8),
        "no values": (struct.pack("<ii", 1, 1) + b"a" + struct.pack("<ii", 1, 0), 13),
        "huge value count": (struct.pack("<ii", 1, 1) + b"a" + struct.pack("<ii", 1, 2**31 - 1), 17),
        "second entry missing": (struct.pack("<i", 2) + good[4:], len(good)),
    }
    for cut in (2, 6, 8 + name_len + 3, 8 + name_len + 9, len(good) - 1):
        cases[f"truncated at {cut}"] = (good[:cut], None)
    return cases


@pytest.mark.parametrize("case", sorted(_corpus()))
def test_malformed_legacy_files_are_format_errors(tmp_path, case):
    data, offset = _corpus()[case]
    path = tmp_path / "bad.dat"
    path.write_bytes(data)
    with pytest.raises(FormatError) as e:
        read_imatrix(path)
    assert e.value.path == str(path)
    if offset is not None:
        assert e.value.offset == offset, str(e.value)
