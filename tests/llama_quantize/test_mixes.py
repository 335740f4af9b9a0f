"""llama.cpp's quantization mixtures (Q4_K_M, Q3_K_L, IQ2_M, ...): the type of every tensor as llama-quantize
chooses it, checked against what llama.cpp's own libllama chose (tests/data/llama_mixes.json, made by
tests/data/make_llama_mixes.py) and against the real Gemma file, which llama-quantize made as Q4_K_M; and
whole output files against llama-quantize's, hash for hash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import weightkit
from weightkit.dtypes import GGMLType as T
from weightkit.errors import ArgumentError, WeightkitError
from weightkit.gguf import GGUFValueType, Value, write_gguf
from weightkit.llama_quantize import QuantizeOptions, plan_types, quantize_gguf, resolve_target
from weightkit.llama_quantize.mixes import file_type, llama_order, mixture_names
from weightkit.llama_quantize.options import parse_kv_override

from ..scripts import load_script

RECORD = json.loads((Path(__file__).parents[1] / "data" / "llama_mixes.json").read_text())


def _metadata(record: dict) -> dict:
    """The recorded metadata with the GGUF types the generator wrote it with."""
    kind = {float: GGUFValueType.FLOAT32, int: GGUFValueType.UINT32}
    return {k: v if isinstance(v, str) else Value(v, kind[type(v)]) for k, v in record["metadata"].items()}


def _model_file(path: Path, record: dict) -> Path:
    """A GGUF with the recorded metadata and tensor shapes (zeros: the plan reads names and shapes only)."""
    tensors = {n: np.zeros(s, np.float32 if len(s) == 1 else np.float16) for n, s in record["tensors"].items()}
    write_gguf(path, _metadata(record), tensors)
    return path


def _generator():
    """tests/data/make_llama_mixes.py, for `parse_key`: the records' keys are read as the generator wrote them."""
    return load_script(Path(__file__).parents[1] / "data" / "make_llama_mixes.py")


GENERATOR = _generator()
parse_key = GENERATOR.parse_key


def _options(key: str, imatrix=None) -> QuantizeOptions:
    """The options that mean what the key's llama-quantize options meant."""
    ftype, options = parse_key(key)
    return QuantizeOptions(
        ftype,
        pure=options["pure"],
        output_tensor_type=options.get("output_tensor_type"),
        token_embedding_type=options.get("token_embedding_type"),
        tensor_type=tuple(options["tensor_types"]),
        leave_output_tensor=options["leave_output"],
        override_kv=tuple(parse_kv_override(o) for o in options["kv_overrides"]),
        keep_split=options["keep_split"],
        prune_layers=tuple(options["prune_layers"]),
        imatrix=imatrix,
    )


@pytest.mark.parametrize(
    "model_name", [pytest.param(n, marks=pytest.mark.slow) if n == "llama-70b" else n for n in sorted(RECORD["models"])]
)
def test_every_mixture_matches_llama_quantize(tmp_path, model_name):
    record = RECORD["models"][model_name]
    path = _model_file(tmp_path / "m.gguf", record)
    names = list(record["tensors"])
    wrong = []
    with weightkit.open(path) as m:  # the plans read the one open file; each dry run opens its own
        for key, expected in record["plans"].items():
            weighted = parse_key(key)[1]["imatrix"]
            options = _options(key, dict.fromkeys(names, np.ones(1, np.float32)) if weighted else None)
            try:
                # dry_run: the plan and llama-quantize's imatrix refusals, without quantizing
                quantize_gguf(path, None, options, dry_run=True)
            except WeightkitError:
                got = "error"
            else:
                plan = plan_types(m, options, has_imatrix=weighted)
                got = "".join(chr(ord("a") + RECORD["types"].index(plan[n].name)) for n in names)
            if got != expected:
                first = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), 0)
                wrong.append((key, names[first] if got != "error" and expected != "error" else got))
    assert not wrong, wrong
    assert len(record["plans"]) > 70  # every file type with and without an imatrix, and the option runs


@pytest.mark.parametrize(
    ("model_name", "key"), [(m, k) for m, f in sorted(RECORD["files"].items()) for k in f["sha256"]]
)
def test_output_is_llama_quantizes_file_byte_for_byte(tmp_path, model_name, key):
    """Whole files: metadata order, tensor order (by layer, then name; with --keep-split by source shard),
    types, bytes, shard names."""
    record = RECORD["files"][model_name]
    shapes = {n: tuple(s) for n, s in record["tensors"].items()}
    (tmp_path / "out").mkdir()
    src = GENERATOR.write_source(tmp_path, model_name)
    imatrix = GENERATOR.imatrix_values(shapes) if parse_key(key)[1]["imatrix"] else None
    report = quantize_gguf(src, tmp_path / "out" / "out.gguf", _options(key, imatrix))
    assert [Path(p) for p in report.outputs] == GENERATOR.outputs(tmp_path / "out" / "out.gguf")
    assert [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in report.outputs] == record["sha256"][key]


def test_copy_on_the_command_line(weightkit_cli, tmp_path):
    """`weightkit quantize IN OUT -t COPY`, as `llama-quantize IN OUT COPY`: the recorded file."""
    src = GENERATOR.write_source(tmp_path, "tiny-llama-bf16")
    r = weightkit_cli("quantize", src, tmp_path / "out.gguf", "-t", "COPY")
    assert r.returncode == 0, r.stderr
    digest = hashlib.sha256((tmp_path / "out.gguf").read_bytes()).hexdigest()
    assert digest == RECORD["files"]["tiny-llama-bf16"]["sha256"]["COPY"][0]


def test_gemma_as_q4_k_m_keeps_every_type(gemma_path):
    """The Gemma file is llama-quantize's Q4_K_M: planning Q4_K_M for it changes nothing."""
    with weightkit.open(gemma_path) as m:
        assert m.metadata["general.file_type"] == file_type("Q4_K_M").id == 15
        plan = plan_types(m, "Q4_K_M")
        assert plan == {name: info.dtype for name, info in m.tensors.items()}
        assert len(set(plan.values())) == 5  # Q8_0, Q5_0, Q4_K, Q6_K, F32: the mixture's choices and fallbacks
        report = quantize_gguf(gemma_path, None, "Q4_K_M", dry_run=True)
        assert report.target == "Q4_K_M" and not report.changes
        assert report.bytes_before == report.bytes_after


def test_names_resolve_as_llama_quantize_takes_them():
    target = resolve_target("Q4_K")  # what llama-quantize means by Q4_K: the Q4_K_M file type
    assert (target.name, target.base, target.mixture.name, target.file_type_id) == ("Q4_K_M", T.Q4_K, "Q4_K_M", 15)
    target = resolve_target("Q4_0")  # a type name is its file type, mixture and all
    assert (target.base, target.mixture.name, target.file_type_id) == (T.Q4_0, "Q4_0", 2)
    pure = resolve_target("Q4_K", pure=True)  # --pure: the base type everywhere, the file type's id
    assert (pure.base, pure.mixture, pure.file_type_id) == (T.Q4_K, None, 15)
    target = resolve_target("q5_k_s")
    assert (target.base, target.mixture.name, target.file_type_id) == (T.Q5_K, "Q5_K_S", 16)
    assert resolve_target("IQ2_S").base == T.IQ2_XS  # llama.cpp's IQ2_S file type is mostly IQ2_XS
    assert resolve_target("IQ2_S", pure=True).file_type_id == 28
    assert resolve_target("IQ2_M").base == T.IQ2_S
    assert resolve_target("MXFP4_MOE").mixture.id == 38
    assert resolve_target("15").name == "Q4_K_M"  # llama-quantize takes the number too
    mxfp4 = resolve_target("MXFP4")  # a GGML type with no file type of its name: every matrix
    assert (mxfp4.base, mxfp4.mixture, mxfp4.file_type_id) == (T.MXFP4, None, 38)
    assert "Q4_K_M" in mixture_names() and "Q4_K" not in mixture_names()
    with pytest.raises(ArgumentError, match=r"--type 'Q4_K_X': neither a llama\.cpp file type \(.*Q4_K_M"):
        resolve_target("Q4_K_X")


def test_llama_order_is_by_layer_then_name():
    names = ["blk.10.attn_q.weight", "blk.2.ffn_up.weight", "output.weight", "blk.2.attn_v.weight", "token_embd.weight"]
    assert llama_order(names) == [
        "output.weight",
        "token_embd.weight",
        "blk.2.attn_v.weight",
        "blk.2.ffn_up.weight",
        "blk.10.attn_q.weight",
    ]


def test_mixture_needs_the_layer_count(tmp_path):
    path = tmp_path / "m.gguf"
    write_gguf(path, {"general.architecture": "llama"}, {"blk.0.attn_v.weight": np.zeros((8, 256), np.float16)})
    with weightkit.open(path) as m, pytest.raises(WeightkitError, match=r"llama\.block_count"):
        plan_types(m, "Q4_K_M")
    with weightkit.open(path) as m:  # one type: no hyperparameters needed
        assert plan_types(m, QuantizeOptions("Q4_K", pure=True)) == {"blk.0.attn_v.weight": T.Q4_K}
    for key, value in [("llama.block_count", "32"), ("llama.expert_count", True), ("llama.block_count", 0)]:
        write_gguf(path, {"general.architecture": "llama", "llama.block_count": Value(4, GGUFValueType.UINT32),
                          key: value}, {"blk.0.attn_v.weight": np.zeros((8, 256), np.float16)})  # fmt: skip
        with weightkit.open(path) as m, pytest.raises(WeightkitError, match=r"llama\.(block|expert)_count"):
            plan_types(m, "Q4_K_M")


@pytest.mark.slow
def test_command_line_mixture_and_dry_run(weightkit_cli, tmp_path):
    record = RECORD["models"]["llama-gqa4"]
    path = _model_file(tmp_path / "m.gguf", record)
    out = tmp_path / "q.gguf"
    r = weightkit_cli("quantize", str(path), str(out), "-t", "Q4_K_M")
    assert r.returncode == 0, r.stderr
    assert "Q4_K_M: tensor data" in r.stdout and "written to" in r.stdout
    with weightkit.open(path) as src, weightkit.open(out) as m:
        assert m.metadata["general.file_type"] == 15
        assert {n: i.dtype for n, i in m.tensors.items()} == plan_types(src, "Q4_K_M")
        assert m.tensors["blk.0.attn_v.weight"].dtype == T.Q6_K and m.tensors["blk.2.attn_v.weight"].dtype == T.Q4_K

    dry = weightkit_cli("quantize", str(path), "-t", "Q4_K", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    summary = json.loads(dry.stdout)
    assert summary["type"] == "Q4_K_M" and summary["dry_run"] is True and summary["output"] is None
    assert summary["requantized"] == 0  # an F16 source
    with weightkit.open(out) as m:
        assert summary["bytes_after"] == sum(i.nbytes for i in m.tensors.values())
        assert summary["changed"]["blk.0.attn_v.weight"] == {"from": "F16", "to": "Q6_K"}
    text = weightkit_cli("quantize", str(path), "-t", "Q3_K_L", "--dry-run")
    assert text.returncode == 0, text.stderr
    assert "Planned changes (Q3_K_L)" in text.stdout and "nothing written (--dry-run)" in text.stdout
    assert "blk.0.attn_output.weight" in text.stdout
    missing = weightkit_cli("quantize", str(path), "-t", "Q4_K_M")
    assert missing.returncode == 2 and "give an output path, or --dry-run" in missing.stderr


@pytest.mark.slow
def test_command_line_tensor_types_and_leave_output(weightkit_cli, tmp_path):
    path = _model_file(tmp_path / "m.gguf", RECORD["models"]["llama-gqa4"])
    r = weightkit_cli(
        "quantize", str(path), "-t", "Q4_K_M", "--dry-run", "--json", "--tensor-type", r"blk\.[01]\.ATTN_V=q8_0",
        "--tensor-type", "attn_v=f32", "--leave-output-tensor"
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    changed = json.loads(r.stdout)["changed"]
    assert changed["blk.0.attn_v.weight"]["to"] == changed["blk.1.attn_v.weight"]["to"] == "Q8_0"  # first match
    assert changed["blk.2.attn_v.weight"]["to"] == "F32"
    assert "output.weight" not in changed and changed["token_embd.weight"]["to"] == "Q4_K"
    for option, message in [
        ("attn_v", "expected PATTERN=TYPE"),
        ("attn_v=q9", "--tensor-type 'q9': not a GGML type"),
        ("attn_v[=q8_0", "--tensor-type pattern 'attn_v['"),
    ]:
        bad = weightkit_cli("quantize", str(path), "-t", "Q4_K", "--dry-run", "--tensor-type", option)
        assert bad.returncode == 2 and message in bad.stderr.replace("\n", " "), bad.stderr
        assert "Traceback" not in bad.stderr


def test_command_line_tensor_type_file(weightkit_cli, tmp_path):
    path = _model_file(tmp_path / "m.gguf", RECORD["models"]["llama-gqa4"])
    types = tmp_path / "types.txt"
    types.write_text("blk\\.0\\.attn_v=q5_0\nattn_v=q8_0\n")
    r = weightkit_cli(
        "quantize", str(path), "-t", "Q4_K_M", "--dry-run", "--json", "--tensor-type", "blk\\.1\\.attn_v=bf16",
        "--tensor-type-file", str(types)
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    changed = json.loads(r.stdout)["changed"]
    assert [changed[f"blk.{i}.attn_v.weight"]["to"] for i in range(3)] == ["Q5_0", "BF16", "Q8_0"]


def test_command_line_says_when_tensors_are_quantized_again(weightkit_cli, gemma_path):
    r = weightkit_cli("quantize", str(gemma_path), "-t", "Q3_K_M", "--dry-run")
    assert r.returncode == 0, r.stderr
    with weightkit.open(gemma_path) as m:
        plan = plan_types(m, "Q3_K_M")
        again = sum(plan[n] != i.dtype and i.dtype.name != "F32" for n, i in m.tensors.items())
    assert again > 0 and f"note: {again} of them were quantized already" in r.stdout


@pytest.mark.parametrize(("name", "flags", "key"), [("q4_0", [], "Q4_0"), ("Q4_K_M", ["--pure"], "Q4_K_M --pure")])
def test_command_line_type_means_llama_quantizes_file_type(weightkit_cli, tmp_path, name, flags, key):
    """`-t Q4_0` is llama-quantize's Q4_0 file type (its mixture gives the output matrix more bits), and
    --pure gives every matrix the base type: both as libllama chose (the record)."""
    record = RECORD["models"]["llama-gqa4"]
    path = _model_file(tmp_path / "m.gguf", record)
    r = weightkit_cli("quantize", str(path), "-t", name, "--dry-run", "--json", *flags)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["type"] == key.split()[0] and summary["pure"] is bool(flags)
    source = {n: "F32" if len(shape) == 1 else "F16" for n, shape in record["tensors"].items()}
    planned = {n: summary["changed"].get(n, {}).get("to", source[n]) for n in record["tensors"]}
    assert "".join(chr(ord("a") + RECORD["types"].index(planned[n])) for n in record["tensors"]) == record["plans"][key]
    assert len({planned[n] for n in planned if n.endswith("weight") and len(record["tensors"][n]) == 2}) == (
        1 if flags else 2
    )
