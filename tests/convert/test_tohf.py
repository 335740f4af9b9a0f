"""GGUF -> Hugging Face folder against transformers and the reference converter.

The GGUFs are the reference converter's files for the tiny checkpoints (weightkit's forward conversion
writes them; their hashes, recorded from llama.cpp's converter, prove it is the reference's file) and the
real Gemma 3 270M Q4_K_M. tests/data/tohf_golden.json, recorded by tests/data/make_tohf_golden.py with
transformers 4.57.6 (5.25 for Qwen 3.5), holds what transformers loads from each GGUF (every state_dict
tensor's hash) and the reference converter's file for weightkit's folder of each tiny GGUF;
tests/data/tohf_tokenizer_golden.json,
recorded by make_tohf_tokenizer_golden.py with transformers 5.25, the source tokenizers' ids that each
family's folder was loaded to, and that folder's tokenizer files' hashes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import weightkit
from weightkit.convert.hf import convert_hf
from weightkit.convert.hf.tokenizer.sentencepiece import read_sentencepiece_model
from weightkit.convert.tohf import convert_gguf_to_hf
from weightkit.errors import ArgumentError, UnsupportedError, WeightkitError
from weightkit.safetensors import SafetensorsCheckpoint

from ..conftest import BuiltEach
from ..scripts import load_script
from .conftest import DATA, checkpoint_group, kept_last

GOLDEN = json.loads((DATA / "tohf_golden.json").read_text())
make_tohf_golden = load_script(DATA / "make_tohf_golden.py")
TINY = list(GOLDEN["tiny"])
TOKENS = json.loads((DATA / "tohf_tokenizer_golden.json").read_text(encoding="utf-8"))
make_tohf_tokenizer_golden = load_script(DATA / "make_tohf_tokenizer_golden.py")
#: the tokenizer cases of tiny checkpoints that tohf_golden.json does not have
EXTRA_TOKEN_CASES = [n for n in TOKENS["cases"] if n not in TINY and n != make_tohf_tokenizer_golden.GEMMA]
#: the conversion tests' checkpoint each tiny GGUF, and each tokenizer case's GGUF, is converted from
BASES = {name: base for name, (base, _, _) in make_tohf_golden.TINY.items()}
TOKEN_BASES = {name: BASES.get(name, make_tohf_tokenizer_golden.case_source(name)[0]) for name in TOKENS["cases"]}


def _on_checkpoint_worker(names: list[str], checkpoint: Mapping[str, str]) -> list:
    """Cases by name, each in the xdist group of the checkpoint its GGUF is converted from: converted on the
    worker that converted that checkpoint already, its vocabulary's writes replayed (`vocabulary_once`)."""
    return [pytest.param(name, id=name, marks=checkpoint_group(checkpoint[name])) for name in names]


#: the two Gemma 3 270M tests on one worker: its vocabulary exported once (`tokenizer_once`)
GEMMA_270M_WORKER = pytest.mark.xdist_group("gemma-3-270m")


def _sha(values: np.ndarray) -> str:
    return make_tohf_golden.tensor_hash(values)


@pytest.fixture(scope="session")
def tiny_ggufs(converted, tmp_path_factory) -> Mapping[str, Path]:
    """The reference's GGUF for each tiny checkpoint (written by weightkit, checked against its hash), each made
    once a run; where it has no config changes, the golden test's conversion of the same checkpoint (`converted`)."""

    def build(name: str, root: Path) -> None:
        gguf, outtype = root / f"{name}.gguf", GOLDEN["tiny"][name]["outtype"]
        base, changes, _ = make_tohf_golden.TINY[name]
        if changes:
            convert_hf(make_tohf_golden.build_tiny(name, root / "hf"), gguf, outtype)
        else:
            os.link(converted(base, outtype)[0], gguf)
        assert hashlib.sha256(gguf.read_bytes()).hexdigest() == GOLDEN["tiny"][name]["gguf_sha256"]

    return BuiltEach(tmp_path_factory, "tohf", list(TINY), build, lambda name, root: root / f"{name}.gguf")


@pytest.fixture(scope="session")
def tiny_folders(tiny_ggufs, tmp_path_factory) -> Mapping[str, Path]:
    """weightkit's f32 HF folder of each tiny GGUF, named as when recorded (the folder name is metadata), each
    made once a run."""

    def build(name: str, root: Path) -> None:
        with pytest.MonkeyPatch.context() as mp:  # the dtype tests export tiny-qwen2's vocabulary again
            _export_tokenizer_once(mp)
            convert_gguf_to_hf(tiny_ggufs[name], root / f"{name}-hf", "f32")

    return BuiltEach(tmp_path_factory, "tohf-out", list(TINY), build, lambda name, root: root / f"{name}-hf")


@pytest.fixture(scope="session")
def extra_token_folders(converted, tmp_path_factory) -> Mapping[str, Path]:
    """weightkit's folder of each tokenizer case that is not a tohf_golden.json checkpoint (so a checkpoint of
    the conversion tests, with no config changes), from the golden test's conversion (`converted`), made once a
    run."""

    def build(name: str, root: Path) -> None:
        gguf = root / f"{name}.gguf"  # named as when recorded
        os.link(converted(*make_tohf_tokenizer_golden.case_source(name))[0], gguf)
        convert_gguf_to_hf(gguf, root / f"{name}-hf", "f32")

    return BuiltEach(tmp_path_factory, "tohf-tokens", EXTRA_TOKEN_CASES, build, lambda name, root: root / f"{name}-hf")


#: `tokenizer_files` of the last few vocabularies exported, by their content (`_vocabulary_key`)
_TOKENIZER_FILES: dict[tuple, dict] = {}


def _vocabulary_key(meta: Mapping, family: str, byte_level_class: str | None) -> tuple:
    """All that `tokenizer_files` reads (the tokenizer keys, the family, the class), hashable."""

    def frozen(value: object) -> object:
        if isinstance(value, np.ndarray):
            return value.dtype.str, value.tobytes()
        return tuple(value) if isinstance(value, list) else value

    return (
        family,
        byte_level_class,
        tuple((k, frozen(v)) for k, v in sorted(meta.items()) if k.startswith("tokenizer.")),
    )


def _export_tokenizer_once(mp: pytest.MonkeyPatch) -> None:
    """GGUF -> HF's `tokenizer_files` (seconds for a 262k vocabulary) made once a process per vocabulary, for the
    conversions that export the same file's vocabulary again (in another dtype, or through the command line):
    it is a function of the `tokenizer.*` keys alone, and every folder's files are still checked where they were."""
    from weightkit.convert.tohf import export

    made = export.tokenizer_files

    def files(meta: Mapping, family: str, path: Path, byte_level_class: str | None = None) -> dict:
        key = _vocabulary_key(meta, family, byte_level_class)
        return dict(kept_last(_TOKENIZER_FILES, key, lambda: made(meta, family, path, byte_level_class), 4))

    mp.setattr(export, "tokenizer_files", files)


@pytest.fixture
def tokenizer_once(monkeypatch):
    """`_export_tokenizer_once` for a test."""
    _export_tokenizer_once(monkeypatch)


def _check_against_transformers(folder: Path, record: dict) -> None:
    """Every tensor is transformers' (the `last_bit` ones within an ulp: torch's float32 log rounds otherwise),
    and the folder has those and the ones transformers does not load."""
    last_bit = record.get("last_bit", {})
    with SafetensorsCheckpoint(folder) as ckpt:
        assert set(ckpt.tensors) == set(record["state_dict"]) | set(record.get("not_loaded", []))
        assert {n: _sha(ckpt.tensor(n)) for n in record["state_dict"] if n not in last_bit} == {
            n: h for n, h in record["state_dict"].items() if n not in last_bit
        }
        for n, values in last_bit.items():
            assert make_tohf_golden.ulps(ckpt.tensor(n), np.asarray(values, np.float32)) == 1, n


#: the ids the `tokenizers` library gives TOKENS["texts"], by tokenizer.json's sha256 and split_special_tokens:
#: a file written for two tests (tiny Gemma 3's and Gemma 3 270M's are the same bytes) is loaded once a process
_IDS: dict[tuple[str, bool], list[list[int]]] = {}


def _check_tokenizer(folder: Path, record: dict) -> None:
    """The folder's tokenizer files are those transformers 5 was recorded to load to the source's ids, and
    the `tokenizers` library gives those ids from them."""
    from tokenizers import Tokenizer

    hashes = make_tohf_tokenizer_golden.file_hashes(folder)
    assert hashes == record["files"]
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    key = (hashes["tokenizer.json"], config.get("split_special_tokens", False))
    if key not in _IDS:
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tok.encode_special_tokens = key[1]  # as transformers sets it
        _IDS[key] = [tok.encode(text).ids for text in TOKENS["texts"]]
    for text, got, ids in zip(TOKENS["texts"], _IDS[key], record["ids"], strict=True):
        assert got == ids, text


@pytest.mark.parametrize("name", _on_checkpoint_worker(TINY, BASES))
def test_tiny_folder_is_what_transformers_loads(tiny_folders, vocabulary_once, name):
    _check_against_transformers(tiny_folders[name], GOLDEN["tiny"][name])


@pytest.mark.parametrize(
    "name", _on_checkpoint_worker([n for n in TOKENS["cases"] if n != make_tohf_tokenizer_golden.GEMMA], TOKEN_BASES)
)
def test_tiny_folder_tokenizes_like_its_source(tiny_folders, extra_token_folders, vocabulary_once, name):
    """Each family's folder (one case per family and vocabulary kind) gives its source tokenizer's ids on
    llama.cpp's tokenizer test inputs, scripts, code, whitespace and chat markup, as transformers 5 loads it."""
    _check_tokenizer((tiny_folders if name in TINY else extra_token_folders)[name], TOKENS["cases"][name])


@pytest.mark.parametrize("name", _on_checkpoint_worker(TINY, BASES))
def test_round_trip_is_the_reference_file(tiny_folders, tmp_path, vocabulary_once, name):
    """GGUF -> HF (weightkit) -> GGUF (weightkit) is the file the reference converter writes from the folder
    (the Llama-family folders' byte-fallback BPE tokenizer.json is read as the reference's LlamaHfVocab)."""
    out, expected = tmp_path / "back.gguf", GOLDEN["tiny"][name]["round_trip"]
    if "refused" in expected:  # the tiny tekken vocabulary's check hash, unknown to llama.cpp
        with pytest.raises(WeightkitError):
            convert_hf(tiny_folders[name], out, make_tohf_golden.ROUND_TRIP)
        return
    convert_hf(tiny_folders[name], out, make_tohf_golden.ROUND_TRIP)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == expected["auto"]


@pytest.mark.slow
@GEMMA_270M_WORKER
def test_gemma_3_270m_is_what_transformers_loads(gemma_path, tmp_path, tokenizer_once):
    """The real Q4_K_M model: dequantized, norms less one, SentencePiece vocabulary as Unigram."""
    folder = tmp_path / "gemma"
    report = convert_gguf_to_hf(gemma_path, folder)
    assert (report.hf_architecture, report.dtype) == ("Gemma3ForCausalLM", "f32")
    _check_against_transformers(folder, GOLDEN["gemma-3-270m"])
    _check_tokenizer(folder, TOKENS["cases"][make_tohf_tokenizer_golden.GEMMA])
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "gemma3_text" and config["tie_word_embeddings"] is True
    assert (config["head_dim"], config["sliding_window"], config["rms_norm_eps"]) == (256, 512, 1e-06)


@pytest.mark.slow
@GEMMA_270M_WORKER
def test_gemma_3_270m_round_trip_is_the_reference_file(gemma_path, tmp_path, tokenizer_once):
    """The real model GGUF -> HF (weightkit, bf16, tokenizer.model written back from the GGUF's vocabulary) ->
    GGUF (weightkit) is the file the reference converter writes from the same folder."""
    record = GOLDEN["gemma-3-270m"]["round_trip"]
    folder = tmp_path / f"{gemma_path.stem}-hf"  # as recorded: the folder's name is the model's name
    convert_gguf_to_hf(gemma_path, folder, record["dtype"])
    model = read_sentencepiece_model(folder / "tokenizer.model")
    with weightkit.open(gemma_path) as m:
        assert model.pieces[:4] == ["<pad>", "<eos>", "<bos>", "<unk>"]
        assert np.array_equal(model.scores, np.asarray(m.metadata["tokenizer.ggml.scores"], np.float32))
    out = tmp_path / "back.gguf"
    convert_hf(folder, out, make_tohf_golden.ROUND_TRIP)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == record["auto"]


@pytest.mark.slow
def test_dtypes_round_the_float32_values(tiny_ggufs, tiny_folders, tmp_path, tokenizer_once):
    """bf16 and f16 are the f32 folder's values rounded to nearest even; auto keeps a 16-bit file's type. (The
    bf16 folder checked is the BF16 GGUF's auto one, asserted bf16: `--dtype bf16` is the same steps once auto
    is resolved, and test_command_line asks for it.)"""
    name = "tiny-qwen2"  # a BF16 GGUF
    with SafetensorsCheckpoint(tiny_folders[name]) as ref:
        exact = {n: ref.tensor(n) for n in ref.tensors}
    reports = {}
    for dtype, numpy in (("auto", ml_dtypes.bfloat16), ("f16", np.float16)):
        reports[dtype] = convert_gguf_to_hf(tiny_ggufs[name], tmp_path / f"{dtype}-{name}", dtype)
        with SafetensorsCheckpoint(tmp_path / f"{dtype}-{name}") as ckpt:
            for n, values in exact.items():
                np.testing.assert_array_equal(ckpt.tensor(n).view(np.uint16), values.astype(numpy).view(np.uint16))
    for gguf_name, want in (("tiny-qwen2", "bf16"), ("tiny-mistral-v0.1", "f16"), ("Tiny-Llama-3-8B-Instruct", "f32")):
        folder = tmp_path / f"auto-{gguf_name}"
        report = reports["auto"] if gguf_name == name else convert_gguf_to_hf(tiny_ggufs[gguf_name], folder)
        assert report.dtype == want
        config = json.loads((folder / "config.json").read_text())
        assert config["torch_dtype"] == {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[want]


def test_shards_and_index_as_save_pretrained(tiny_ggufs, tiny_folders, tmp_path):
    folder = tmp_path / "sharded"
    report = convert_gguf_to_hf(tiny_ggufs["tiny-mistral-v0.1"], folder, "f32", max_shard_bytes=4 << 20)
    shards = sorted(p.name for p in folder.glob("*.safetensors"))
    assert len(shards) > 1 and shards[0] == f"model-00001-of-{len(shards):05d}.safetensors"
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(report.tensors) and set(index["weight_map"].values()) == set(shards)
    with SafetensorsCheckpoint(folder) as a, SafetensorsCheckpoint(tiny_folders["tiny-mistral-v0.1"]) as b:
        assert all(np.array_equal(a.tensor(n), b.tensor(n)) for n in b.tensors) and set(a.tensors) == set(b.tensors)


def test_experts_are_unstacked_and_names_inverted(tmp_path):
    """A Qwen3-MoE GGUF (written here) gets one tensor per expert under transformers' names."""
    from weightkit.gguf import write_gguf

    rng = np.random.default_rng(0)
    n_exp, ff, hidden = 4, 32, 32
    meta = {"general.architecture": "qwen3moe", "qwen3moe.block_count": 1, "qwen3moe.embedding_length": hidden,
            "qwen3moe.attention.head_count": 2, "qwen3moe.attention.head_count_kv": 2, "qwen3moe.expert_count": n_exp,
            "qwen3moe.expert_used_count": 2, "qwen3moe.expert_feed_forward_length": ff,
            "qwen3moe.attention.key_length": 16}  # fmt: skip
    shapes = {"token_embd.weight": (64, hidden), "output_norm.weight": (hidden,), "blk.0.attn_norm.weight": (hidden,),
              "blk.0.ffn_gate_inp.weight": (n_exp, hidden), "blk.0.ffn_gate_exps.weight": (n_exp, ff, hidden),
              "blk.0.ffn_down_exps.weight": (n_exp, hidden, ff)}  # fmt: skip
    tensors = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    write_gguf(tmp_path / "moe.gguf", meta, tensors)
    report = convert_gguf_to_hf(tmp_path / "moe.gguf", tmp_path / "hf")
    assert report.hf_architecture == "Qwen3MoeForCausalLM"
    with SafetensorsCheckpoint(tmp_path / "hf") as ckpt:
        for x in range(n_exp):
            got = ckpt.tensor(f"model.layers.0.mlp.experts.{x}.down_proj.weight")
            np.testing.assert_array_equal(got, tensors["blk.0.ffn_down_exps.weight"][x])
        gate = ckpt.tensor("model.layers.0.mlp.gate.weight")
        np.testing.assert_array_equal(gate, tensors["blk.0.ffn_gate_inp.weight"])
        assert len(ckpt.tensors) == 4 + 2 * n_exp
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (config["model_type"], config["num_experts"], config["moe_intermediate_size"]) == ("qwen3_moe", 4, ff)
    assert config["tie_word_embeddings"] is True and not (tmp_path / "hf" / "tokenizer.json").exists()


def test_refusals_leave_nothing(tiny_ggufs, tmp_path, hf_checkpoints):
    bert = tmp_path / "bert.gguf"
    convert_hf(hf_checkpoints["tiny-bert"], bert, "f16")
    with pytest.raises(UnsupportedError, match="architecture 'bert' is not supported"):
        convert_gguf_to_hf(bert, tmp_path / "out")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ArgumentError, match="already exists"):
        convert_gguf_to_hf(tiny_ggufs["tiny-qwen2"], tmp_path / "full")
    with pytest.raises(ArgumentError, match="--dtype 'q8_0'"):
        convert_gguf_to_hf(tiny_ggufs["tiny-qwen2"], tmp_path / "out", "q8_0")

    def fail(name, done, total):
        if done * 2 > total:
            raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        convert_gguf_to_hf(tiny_ggufs["tiny-qwen2"], tmp_path / "out", progress=fail)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bert.gguf", "full"]


@pytest.mark.slow
def test_command_line(tiny_ggufs, tmp_path, weightkit_cli, tokenizer_once):
    gguf = str(tiny_ggufs["tiny-qwen2"])
    cmd = ["convert", gguf, str(tmp_path / "hf"), "--to", "hf"]
    r = weightkit_cli(*cmd, "--dtype", "bf16", "--json")
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert (answer["hf_architecture"], answer["dtype"]) == ("Qwen2ForCausalLM", "bf16")
    assert answer["tensors"]["model.embed_tokens.weight"] == {"dtype": "BF16", "shape": [151936, 64]}
    assert "model.safetensors" in answer["files"] and "tokenizer.json" in answer["files"]
    with weightkit.open(tmp_path / "hf" / "model.safetensors") as m:
        assert len(m.tensors) == len(answer["tensors"])
    again = weightkit_cli(*cmd)
    assert again.returncode != 0 and "already exists" in again.stderr and len(again.stderr.splitlines()) == 1
    wrong = weightkit_cli(*cmd[:-3], str(tmp_path / "x"), "--to", "hf", "--outtype", "f16")
    assert wrong.returncode != 0 and "--outtype applies to --to gguf" in wrong.stderr


def test_an_unknown_byte_level_pre_tokenizer_is_refused(tmp_path):
    """A byte-level vocabulary whose `tokenizer.ggml.pre` has no known split is refused, not given GPT-2's."""
    from weightkit.convert.tohf.tokenizer import tokenizer_files

    meta = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "bloom", "tokenizer.ggml.tokens": ["a", "b", "ab"],
            "tokenizer.ggml.merges": ["a b"]}  # fmt: skip
    with pytest.raises(UnsupportedError, match=r"x\.gguf: tokenizer\.ggml\.pre 'bloom' is not supported"):
        tokenizer_files(meta, "llama", tmp_path / "x.gguf")


def test_a_qwen35_pre_tokenizer_is_qwen_3_5s_split(tiny_ggufs, hf_checkpoints):
    """A file whose `tokenizer.ggml.pre` is `qwen35` (the released Qwen 3.5 tokenizers' check hash; the test
    vocabulary hashes as Qwen2's) gets the source tokenizer's normalizer and pre-tokenizer, and its ids."""
    from tokenizers import Tokenizer

    from weightkit.convert.tohf.tokenizer import tokenizer_files

    gguf = tiny_ggufs["tiny-qwen35"]
    with weightkit.open(gguf) as m:
        meta = dict(m.metadata) | {"tokenizer.ggml.pre": "qwen35"}
    text = tokenizer_files(meta, "qwen2", gguf)["tokenizer.json"]
    ours = json.loads(text)
    source = json.loads((hf_checkpoints["tiny-qwen35"] / "tokenizer.json").read_text(encoding="utf-8"))
    assert (ours["normalizer"], ours["pre_tokenizer"]) == (source["normalizer"], source["pre_tokenizer"])
    tok = Tokenizer.from_str(text)
    assert [tok.encode(t).ids for t in TOKENS["texts"]] == TOKENS["cases"]["tiny-qwen35"]["ids"]


def test_stacked_experts_without_their_up_projection_are_refused(tiny_ggufs, tmp_path):
    """Qwen 3.5's experts are written as transformers 5 has them, gate and up in one tensor: a file with a
    layer's gate but not its up projection is refused, naming the tensor, and nothing is written."""
    from weightkit.errors import FormatError
    from weightkit.gguf import write_gguf

    with weightkit.open(tiny_ggufs["tiny-qwen35-moe"]) as m:
        meta = {k: v for k, v in m.metadata.items() if not k.startswith("tokenizer.")}
        tensors = {n: m.tensor(n, np.float32) for n in m.tensors if n != "blk.1.ffn_up_exps.weight"}
    write_gguf(tmp_path / "moe.gguf", meta, tensors)
    with pytest.raises(FormatError, match=r"moe\.gguf.*'blk\.1\.ffn_gate_exps\.weight'.*no up projection"):
        convert_gguf_to_hf(tmp_path / "moe.gguf", tmp_path / "hf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["moe.gguf"]
