"""`quantize_gguf` / `weightkit quantize`: llama-quantize's tensor policy, ggml's bytes, gguf-py reads it back."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
from gguf import quants

import weightkit
from weightkit.dtypes import GGMLType as T
from weightkit.errors import WeightkitError
from weightkit.gguf import GGUFValueType, GGUFWriter, Value, write_gguf
from weightkit.gguf import writer as gguf_writer
from weightkit.llama_quantize import QuantizeOptions, plan_types, quantize_gguf, read_imatrix
from weightkit.llama_quantize.quantize import compatible_type, is_quantizable
from weightkit.quant import quantize

# Relative RMS error a round trip through each type stays under, on Gaussian data.
ERROR = {"Q8_0": 0.01, "Q6_K": 0.025, "Q5_0": 0.05, "Q5_1": 0.05, "Q4_K": 0.09, "Q4_0": 0.12, "IQ4_XS": 0.09}
ERROR["IQ4_NL"] = ERROR["IQ4_XS"]


@pytest.fixture
def model(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "token_embd.weight": rng.standard_normal((64, 256)).astype(np.float32),
        "blk.0.attn_norm.weight": rng.standard_normal(256).astype(np.float32),
        "blk.0.attn_q.weight": rng.standard_normal((256, 256)).astype(np.float16),
        "blk.0.attn_q.bias": rng.standard_normal(256).astype(np.float32),
        "blk.0.ffn_down.weight": rng.standard_normal((256, 96)).astype(np.float32),  # 96: not whole K blocks
        "blk.0.ffn_gate_inp.weight": rng.standard_normal((4, 256)).astype(np.float32),  # MoE router
        "blk.0.ffn_up_exps.weight": rng.standard_normal((4, 32, 256)).astype(np.float32),  # experts
        "output.weight": rng.standard_normal((64, 256)).astype(np.float32),
    }
    path = tmp_path / "m.gguf"
    md = {"general.architecture": "llama", "general.name": "tiny", "general.file_type": Value(0, GGUFValueType.UINT32)}
    write_gguf(path, md, tensors)
    return path, tensors


def test_policy_matches_llama_quantize():
    assert is_quantizable("blk.0.attn_q.weight", (256, 256))
    assert is_quantizable("blk.0.ffn_up_exps.weight", (4, 32, 256))
    assert not is_quantizable("blk.0.attn_norm.weight", (256, 256))
    assert not is_quantizable("blk.0.attn_q.bias", (256, 256))
    assert not is_quantizable("blk.0.attn_q.weight", (256,))
    assert not is_quantizable("blk.0.ffn_gate_inp.weight", (4, 256))
    assert not is_quantizable("position_embd.weight", (512, 256))
    assert is_quantizable("blk.0.attn_k_b.weight", (512, 256))
    assert not is_quantizable("blk.0.attn_k_b.weight", (512, 256), "glm5-next")  # that architecture's own list
    assert compatible_type(T.Q4_K, 96) == T.Q5_0
    assert compatible_type(T.Q6_K, 96) == T.Q8_0
    assert compatible_type(T.IQ4_XS, 96) == T.IQ4_NL
    assert compatible_type(T.Q4_K, 48) == T.F16  # the fallback does not fit either
    assert compatible_type(T.Q3_K, 96) == T.Q4_0
    assert compatible_type(T.Q8_0, 96) == T.Q8_0
    assert compatible_type(T.Q8_0, 40) == T.F16  # a 32-block type has no smaller block to fall back to


def test_plan(model):
    path, _ = model
    with weightkit.open(path) as m:
        plan = plan_types(m, QuantizeOptions("Q4_K", pure=True, output_tensor_type="Q6_K", token_embedding_type="Q8_0"))
    assert plan == {
        "token_embd.weight": T.Q8_0,
        "blk.0.attn_norm.weight": T.F32,
        "blk.0.attn_q.weight": T.Q4_K,
        "blk.0.attn_q.bias": T.F32,
        "blk.0.ffn_down.weight": T.Q5_0,
        "blk.0.ffn_gate_inp.weight": T.F32,
        "blk.0.ffn_up_exps.weight": T.Q4_K,
        "output.weight": T.Q6_K,
    }


@pytest.mark.parametrize("target", ["Q8_0", "Q4_K", "Q6_K", "IQ4_XS"])
def test_output_is_ggml_bytes_and_reads_back_in_gguf_py(tmp_path, model, target):
    path, tensors = model
    out = tmp_path / "q.gguf"
    report = quantize_gguf(path, out, QuantizeOptions(target, pure=True))
    assert report.bytes_after < report.bytes_before
    reader = gguf.GGUFReader(out)
    assert reader.fields["general.name"].contents() == "tiny"
    with weightkit.open(out) as m:
        assert m.metadata["general.file_type"] == {"Q8_0": 7, "Q4_K": 15, "Q6_K": 18, "IQ4_XS": 30}[target]
        for t in reader.tensors:
            info = m.tensors[t.name]
            original = tensors[t.name].astype(np.float32)
            if t.tensor_type.name in ("F32", "F16"):
                assert np.array_equal(np.asarray(t.data).astype(np.float32).reshape(original.shape), original)
                continue
            expected = quantize(original, info.dtype)  # ggml's bytes, per the kernels' own tests
            assert np.array_equal(m.raw(t.name), expected), t.name
            back = quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(original.shape)
            rel = np.sqrt(np.mean((back - original) ** 2) / np.mean(original**2))
            assert rel < ERROR[t.tensor_type.name], (t.name, t.tensor_type.name, rel)


def _imatrix_file(path, tensors, rng):
    """An imatrix GGUF as llama-imatrix writes it: <name>.in_sum2 and <name>.counts per weight."""
    values = {}
    with GGUFWriter(path, {"imatrix.chunk_count": Value(3, GGUFValueType.UINT32)}) as w:
        for name in ("blk.0.attn_q.weight", "blk.0.ffn_up_exps.weight"):
            arr = tensors[name]
            n_mat = arr.shape[0] if arr.ndim == 3 else 1
            sums = rng.uniform(1, 5, (n_mat, arr.shape[-1])).astype(np.float32)
            counts = np.full((n_mat, 1), 3.0, np.float32)
            counts[-1] = 0 if n_mat > 1 else 3.0  # an expert never routed to
            w.add_tensor(name + ".in_sum2", sums)
            w.add_tensor(name + ".counts", counts)
            values[name] = np.where(counts > 0, sums / np.maximum(counts, 1), 1).astype(np.float32)
    return values


@pytest.mark.parametrize("piece", [1 << 24, 1000], ids=["whole", "by-rows"])
def test_imatrix_is_applied_per_matrix(tmp_path, model, monkeypatch, piece):
    """Each expert's rows get its own imatrix row, also when a tensor is quantized a few rows at a time."""
    monkeypatch.setattr(gguf_writer, "PIECE_VALUES", piece)
    path, tensors = model
    imatrix_path = tmp_path / "imatrix.gguf"
    expected = _imatrix_file(imatrix_path, tensors, np.random.default_rng(1))
    loaded = read_imatrix(imatrix_path)
    for name, values in expected.items():
        assert np.array_equal(loaded[name], values)
    out = tmp_path / "q.gguf"
    quantize_gguf(path, out, QuantizeOptions("IQ4_XS", pure=True, imatrix=imatrix_path))
    with weightkit.open(out) as m:
        q = tensors["blk.0.attn_q.weight"].astype(np.float32)
        assert np.array_equal(m.raw("blk.0.attn_q.weight"), quantize(q, "IQ4_XS", expected["blk.0.attn_q.weight"][0]))
        experts = tensors["blk.0.ffn_up_exps.weight"]
        per_expert = [quantize(experts[e], "IQ4_XS", expected["blk.0.ffn_up_exps.weight"][e]) for e in range(4)]
        assert np.array_equal(m.raw("blk.0.ffn_up_exps.weight"), np.concatenate(per_expert))
        assert not np.array_equal(
            m.raw("blk.0.ffn_up_exps.weight")[: per_expert[0].size], quantize(experts[0], "IQ4_XS")
        )


def test_types_that_need_an_imatrix_refuse_without_one(tmp_path, model):
    path, _ = model
    with pytest.raises(WeightkitError, match="IQ2_XS needs an importance matrix"):
        quantize_gguf(path, tmp_path / "q.gguf", QuantizeOptions("IQ2_XS", pure=True))
    with pytest.raises(WeightkitError, match="IQ3_XXS needs an importance matrix"):  # llama-quantize's rule
        options = QuantizeOptions("IQ3_XXS", pure=True, token_embedding_type="Q8_0", output_tensor_type="Q8_0")
        quantize_gguf(path, tmp_path / "q.gguf", options)
    assert not (tmp_path / "q.gguf").exists()


@pytest.mark.slow
def test_command_line(tmp_path, model, weightkit_cli):
    path, _ = model
    out = tmp_path / "cli.gguf"
    r = weightkit_cli("quantize", str(path), str(out), "--type", "Q4_K", "--pure", "--output-tensor-type", "Q8_0")
    assert r.returncode == 0, r.stderr
    assert "Q4_K" in r.stdout and "->" in r.stdout and "tensors changed type" in r.stdout
    with weightkit.open(out) as m:
        assert m.tensors["output.weight"].dtype == T.Q8_0
    as_json = weightkit_cli("quantize", str(path), str(tmp_path / "j.gguf"), "-t", "Q8_0", "--pure", "--json")
    assert as_json.returncode == 0, as_json.stderr
    summary = json.loads(as_json.stdout)  # only JSON on stdout: the progress bar is on stderr
    with weightkit.open(path) as src, weightkit.open(tmp_path / "j.gguf") as m:
        assert summary["type"] == "Q8_0" and summary["output"] == str(tmp_path / "j.gguf")
        assert summary["bytes_before"] == sum(i.nbytes for i in src.tensors.values())
        assert summary["bytes_after"] == sum(i.nbytes for i in m.tensors.values())
        changed = {n: {"from": src.tensors[n].dtype.name, "to": m.tensors[n].dtype.name} for n in m.tensors}
        assert summary["changed"] == {n: c for n, c in changed.items() if c["from"] != c["to"]}
        assert summary["changed"]  # the fixture's weight matrices do change type
    bad = weightkit_cli("quantize", str(path), str(out), "--type", "Q9")
    assert bad.returncode == 2 and "--type 'Q9': neither" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_gemma_requantized_reads_back_in_gguf_py(tmp_path, gemma_path):
    """The real model to Q8_0: every tensor, decoded by gguf-py's dequantizer, is within Q8_0's error of the
    source. (The layout is read by weightkit: gguf-py's reader reads the synthetic files above; parsing the
    262k-token vocabulary takes it 13-18 s.)"""
    out = tmp_path / "gemma-q8.gguf"
    quantize_gguf(gemma_path, out, "Q8_0")
    with weightkit.open(gemma_path) as src, weightkit.open(out) as q:
        assert list(q.tensors) == list(src.tensors)
        for name, info in q.tensors.items():
            if name == "token_embd.weight":  # already Q8_0 in the source: copied byte for byte
                assert np.array_equal(q.raw(name), src.raw(name))
                continue
            original = src.tensor(name, np.float32)
            back = quants.dequantize(q.raw(name), gguf.GGMLQuantizationType[info.dtype.name])
            rel = np.sqrt(np.mean((back.reshape(original.shape) - original) ** 2) / max(np.mean(original**2), 1e-30))
            assert rel <= ERROR.get(info.dtype.name, 0), (name, rel)  # F32: exact
