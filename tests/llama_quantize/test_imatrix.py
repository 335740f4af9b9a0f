"""read_imatrix: llama.cpp's two imatrix formats, read as llama-quantize reads them, and a malformed-file
corpus for the legacy one."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import weightkit
from weightkit.errors import FormatError, WeightkitError
from weightkit.gguf import GGUFValueType, GGUFWriter, Value, write_gguf
from weightkit.llama_quantize import QuantizeOptions, quantize_gguf, read_imatrix


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


def _pure(type_name: str, **options) -> QuantizeOptions:
    """Every matrix one type (the models here lack the hyperparameters a mixture reads)."""
    return QuantizeOptions(type_name, pure=True, **options)


def test_quantize_takes_a_legacy_file(tmp_path):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 256)).astype(np.float32)
    write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama"}, {"blk.0.attn_q.weight": w})
    values = rng.uniform(1, 9, 256).astype(np.float32)
    (tmp_path / "imatrix.dat").write_bytes(_legacy([("blk.0.attn_q.weight", 5, values)]))
    quantize_gguf(tmp_path / "m.gguf", tmp_path / "a.gguf", _pure("IQ4_XS", imatrix=tmp_path / "imatrix.dat"))
    quantize_gguf(tmp_path / "m.gguf", tmp_path / "b.gguf",
                  _pure("IQ4_XS", imatrix={"blk.0.attn_q.weight": values / np.float32(5)}))  # fmt: skip
    quantize_gguf(tmp_path / "m.gguf", tmp_path / "c.gguf", _pure("IQ4_XS"))
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


def test_output_records_the_imatrix_as_llama_quantize_does(tmp_path):
    """quantize.imatrix.file / .dataset / .entries_count / .chunks_count, appended after general.file_type."""
    rng = np.random.default_rng(2)
    names = ("blk.0.attn_q.weight", "blk.0.ffn_up.weight")
    tensors = {n: rng.standard_normal((8, 256)).astype(np.float32) for n in names}
    write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama"}, tensors)
    entries = [(n, 2, rng.uniform(1, 2, 256).astype(np.float32)) for n in tensors]
    path = tmp_path / "imatrix.dat"
    path.write_bytes(_legacy([*entries, ("blk.9.unused.weight", 1, np.ones(4, np.float32))]))  # trailer: 12, wiki.test
    quantize_gguf(tmp_path / "m.gguf", tmp_path / "q.gguf", _pure("Q4_K", imatrix=path))
    with weightkit.open(tmp_path / "q.gguf") as m:
        keys = list(m.metadata)
        assert keys[-5:] == ["general.file_type", "quantize.imatrix.file", "quantize.imatrix.dataset",
                             "quantize.imatrix.entries_count", "quantize.imatrix.chunks_count"]  # fmt: skip
        assert m.metadata["quantize.imatrix.file"] == str(path)
        assert m.metadata["quantize.imatrix.dataset"] == "wiki.test"
        assert m.metadata["quantize.imatrix.entries_count"] == 3  # every entry of the file, used or not
        assert m.metadata["quantize.imatrix.chunks_count"] == 12

    quantize_gguf(tmp_path / "m.gguf", tmp_path / "i.gguf", _pure("Q4_K", imatrix=path, include_weights=["attn_q"]))
    excluded = _pure("Q4_K", imatrix=path, exclude_weights=["ffn", "unused"])
    quantize_gguf(tmp_path / "m.gguf", tmp_path / "e.gguf", excluded)
    quantize_gguf(tmp_path / "m.gguf", tmp_path / "n.gguf", _pure("Q4_K", imatrix=path, include_weights=["nothing"]))
    quantize_gguf(tmp_path / "m.gguf", tmp_path / "plain.gguf", _pure("Q4_K"))
    with weightkit.open(tmp_path / "q.gguf") as q, weightkit.open(tmp_path / "i.gguf") as i, \
            weightkit.open(tmp_path / "e.gguf") as e, weightkit.open(tmp_path / "plain.gguf") as plain:  # fmt: skip
        assert i.metadata["quantize.imatrix.entries_count"] == e.metadata["quantize.imatrix.entries_count"] == 1
        for selected in (i, e):
            assert np.array_equal(selected.raw("blk.0.attn_q.weight"), q.raw("blk.0.attn_q.weight"))
            assert np.array_equal(selected.raw("blk.0.ffn_up.weight"), plain.raw("blk.0.ffn_up.weight"))
        assert not np.array_equal(q.raw("blk.0.ffn_up.weight"), plain.raw("blk.0.ffn_up.weight"))
    with weightkit.open(tmp_path / "n.gguf") as n:  # nothing selected: as without an imatrix, and no record of it
        assert "quantize.imatrix.file" not in n.metadata
    with pytest.raises(WeightkitError, match="cannot be used together"):
        options = _pure("Q4_K", imatrix=path, include_weights=["a"], exclude_weights=["b"])
        quantize_gguf(tmp_path / "m.gguf", None, options, dry_run=True)


def test_gguf_imatrix_provenance_and_long_names(tmp_path):
    long_dir = tmp_path / ("d" * 150)
    long_dir.mkdir()
    path = long_dir / "imatrix.gguf"
    md = {"imatrix.datasets": ["calibration.txt", "other.txt"], "imatrix.chunk_count": Value(40, GGUFValueType.UINT32),
          "imatrix.chunk_size": Value(512, GGUFValueType.UINT32)}  # fmt: skip
    with GGUFWriter(path, md) as w:
        w.add_tensor("m.weight.in_sum2", np.ones((1, 256), np.float32))
        w.add_tensor("m.weight.counts", np.ones((1, 1), np.float32))
    matrix = read_imatrix(path)
    assert matrix.datasets == ["calibration.txt", "other.txt"] and matrix.chunk_count == 40
    keys = dict(matrix.provenance(path))
    assert keys["quantize.imatrix.file"].value == str(path)[:127]  # llama-quantize's char[128]
    assert keys["quantize.imatrix.dataset"].value == "calibration.txt"
    assert keys["quantize.imatrix.entries_count"].value == 1 and keys["quantize.imatrix.chunks_count"].value == 40


@pytest.mark.slow
def test_command_line_imatrix_selection_and_overrides(tmp_path, weightkit_cli):
    rng = np.random.default_rng(3)
    write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama", "general.name": "tiny"},
               {"blk.0.attn_q.weight": rng.standard_normal((8, 256)).astype(np.float32)})  # fmt: skip
    (tmp_path / "imatrix.dat").write_bytes(_legacy([("blk.0.attn_q.weight", 1, np.ones(256, np.float32))]))
    out = tmp_path / "q.gguf"
    r = weightkit_cli(
        "quantize", str(tmp_path / "m.gguf"), str(out), "-t", "Q4_K", "--pure", "--imatrix",
        str(tmp_path / "imatrix.dat"), "--exclude-weights", "ffn", "--override-kv", "general.name=str:renamed",
        "--override-kv", "llama.context_length=int:4096"
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    with weightkit.open(out) as m:
        assert m.metadata["general.name"] == "renamed" and m.metadata["llama.context_length"] == 4096
        assert m.metadata["quantize.imatrix.entries_count"] == 1
        assert list(m.metadata)[-6:-4] == ["general.name", "llama.context_length"]  # moved last, then the imatrix's
    bad = weightkit_cli(
        "quantize", str(tmp_path / "m.gguf"), str(out), "-t", "Q4_K", "--pure", "--override-kv", "general.name=text:x"
    )
    assert bad.returncode == 2 and "--override-kv" in bad.stderr and "Traceback" not in bad.stderr
