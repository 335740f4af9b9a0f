"""Ollama's store: names, blobs, manifests, import, open, remove, verify."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

import weightkit
from weightkit.errors import FormatError, UnsupportedError, WeightkitError
from weightkit.gguf import GGUFValueType, Value, write_gguf
from weightkit.llama_quantize import quantize_gguf
from weightkit.ollama import InvalidName, ModelNotFound, Store, create_from_gguf, parse_name
from weightkit.ollama.create import create_from_modelfile, human_number

from ..scripts import load_script

# llama-quantize's own COPY of tiny models (f16, bf16, Q8_0, split), recorded by tests/data/make_llama_mixes.py
MIXES = json.loads((Path(__file__).parents[1] / "data" / "llama_mixes.json").read_text())["files"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("gemma3", "registry.ollama.ai/library/gemma3:latest"),
        ("gemma3:270m", "registry.ollama.ai/library/gemma3:270m"),
        ("me/my-model:v1.0", "registry.ollama.ai/me/my-model:v1.0"),
        ("example.com:5000/team/m:t", "example.com:5000/team/m:t"),
        ("https://example.com/team/m", "example.com/team/m:latest"),
        ("Mixed_Case.1", "registry.ollama.ai/library/Mixed_Case.1:latest"),
    ],
)
def test_names_parse_like_ollama(text, expected):
    assert str(parse_name(text)) == expected


@pytest.mark.parametrize(
    "text",
    ["", ":tag", "m:", "/m", "../m", "a/../m", "ns.x/m", "m:t:x", "-m", "m/", "a b", "m:ta/g", "x" * 81, "é"],
)
def test_invalid_names_are_refused(text):
    with pytest.raises(InvalidName):
        parse_name(text)


def test_human_number_like_ollama():
    assert [human_number(n) for n in (268_098_176, 8_000_000_000, 7_241_732_096, 999, 22_713_728)] == [
        "268.10M", "8B", "7.2B", "999", "22.71M",
    ]  # fmt: skip


@pytest.fixture
def gguf_file(tmp_path):
    path = tmp_path / "tiny.gguf"
    rng = np.random.default_rng(0)
    write_gguf(
        path,
        {"general.architecture": "llama", "general.file_type": np.uint32(7)},
        {"a": rng.standard_normal((4, 32)).astype(np.float32)},
    )
    return path


def test_import_open_verify_remove(tmp_path, gguf_file):
    store = Store(tmp_path / "models")
    manifest = create_from_gguf(store, "tiny:1", gguf_file)
    blob = store.blob_path(manifest.layers[0].digest)
    quantize_gguf(gguf_file, tmp_path / "copy.gguf", "COPY")  # what ollama create stores: llama-quantize COPY's file
    assert blob.read_bytes() == (tmp_path / "copy.gguf").read_bytes()
    assert manifest.layers[0].digest == "sha256:" + hashlib.sha256(blob.read_bytes()).hexdigest()
    path = store.manifest_path("tiny:1")
    assert path == tmp_path / "models/manifests/registry.ollama.ai/library/tiny/1"
    doc = json.loads(path.read_text())
    assert doc["schemaVersion"] == 2 and doc["mediaType"] == "application/vnd.docker.distribution.manifest.v2+json"
    assert doc["layers"][0]["mediaType"] == "application/vnd.ollama.image.model"
    config = json.loads(store.blob_path(doc["config"]["digest"]).read_text())
    assert config["model_format"] == "gguf" and config["model_family"] == "llama" and config["file_type"] == "Q8_0"
    with weightkit.open(str(blob)) as direct, weightkit.ollama.open_store_model("tiny:1", store=store) as m:
        assert np.array_equal(m.tensor("a"), direct.tensor("a"))
    assert store.verify("tiny:1") == []

    create_from_gguf(store, "other:latest", gguf_file)  # the same blob, stored once
    assert len(list(store.blobs.iterdir())) == 2
    assert store.remove("tiny:1") == []  # everything is still used by "other"
    assert [str(n) for n, _ in store.models()] == ["registry.ollama.ai/library/other:latest"]
    assert len(store.remove("other")) == 2
    assert list(store.blobs.iterdir()) == [] and list(store.manifests.iterdir()) == []
    with pytest.raises(ModelNotFound):
        store.manifest("other")


def test_verify_finds_damage(tmp_path, gguf_file):
    store = Store(tmp_path)
    manifest = create_from_gguf(store, "tiny", gguf_file)
    blob = store.blob_path(manifest.layers[0].digest)
    data = bytearray(blob.read_bytes())
    data[100] ^= 1
    blob.write_bytes(data)
    assert [problem for _, problem in store.verify("tiny")] == ["content does not match its digest"]
    blob.unlink()
    assert [problem for _, problem in store.verify("tiny")] == ["missing"]


def test_interrupted_blob_leaves_nothing(tmp_path):
    store = Store(tmp_path)

    def chunks():
        yield b"x" * 1000
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), store.transaction() as tx:
        tx.add_bytes(b"{}", "application/vnd.docker.container.image.v1+json")
        tx.add_blob(chunks(), "application/vnd.ollama.image.tensor")
    assert list(store.blobs.iterdir()) == [] and list(store.root.glob(".weightkit/writer-*")) == []


def test_manifest_never_points_at_a_missing_blob(tmp_path):
    store = Store(tmp_path)
    ghost = weightkit.ollama.Layer("application/vnd.ollama.image.model", "sha256:" + "0" * 64, 5)
    with pytest.raises(WeightkitError, match="not in the store"), store.transaction() as tx:
        layer = tx.add_bytes(b"{}", "application/vnd.docker.container.image.v1+json")
        tx.write_manifest("m", weightkit.ollama.Manifest(layer, [ghost]))
    assert not store.manifest_path("m").exists()


def test_reads_a_store_as_ollama_writes_it(tmp_path, gguf_file):
    """A manifest byte for byte as Ollama's Go encoder writes it, with fields weightkit does not write."""
    store = Store(tmp_path)
    data = gguf_file.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    config = (
        b'{"model_format":"gguf","model_family":"llama","model_families":["llama"],"model_type":"128",'
        b'"file_type":"Q8_0","architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}'
    )
    cdigest = hashlib.sha256(config).hexdigest()
    store.blobs.mkdir(parents=True)
    (store.blobs / f"sha256-{digest}").write_bytes(data)
    (store.blobs / f"sha256-{cdigest}").write_bytes(config)
    manifest = (
        '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",'
        f'"config":{{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:{cdigest}",'
        f'"size":{len(config)}}},"layers":[{{"mediaType":"application/vnd.ollama.image.model",'
        f'"digest":"sha256:{digest}","size":{len(data)},"from":"/root/.ollama/models/blobs/sha256-{digest}"}},'
        '{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:' + "a" * 64 + '","size":3}]}\n'
    )
    path = store.manifests / "registry.ollama.ai/library/tiny/latest"
    path.parent.mkdir(parents=True)
    path.write_text(manifest)
    m = store.manifest("tiny")
    assert m.layers[0].from_.endswith(digest) and m.layers[1].media_type.endswith("template")
    assert m.to_bytes().decode() == manifest
    with weightkit.ollama.open_store_model("tiny", store=store) as model:
        assert model.tensors["a"].shape == (4, 32)


@pytest.mark.parametrize(
    "manifest, message",
    [
        ("not json", "not a JSON manifest"),
        ('{"layers": 5}', "'layers' list"),
        (
            '{"config": {"mediaType": "x", "digest": "sha256:../../etc", "size": 1}, "layers": []}',
            "invalid blob digest",
        ),
        ('{"config": {"mediaType": "x", "digest": "sha256:' + "0" * 64 + '", "size": -1}, "layers": []}', "size"),
    ],
)
def test_malformed_manifests(tmp_path, manifest, message):
    store = Store(tmp_path)
    path = store.manifest_path("bad")
    path.parent.mkdir(parents=True)
    path.write_text(manifest)
    with pytest.raises(FormatError, match=message):
        store.manifest("bad")


@pytest.mark.slow
def test_command_line(tmp_path, gguf_file, weightkit_cli):
    env = {"OLLAMA_MODELS": str(tmp_path / "store")}

    def run(*args):
        return weightkit_cli(*args, env=env)

    r = run("create", "tiny:v1", "--from", str(gguf_file))
    assert r.returncode == 0 and "created tiny:v1" in r.stdout, r.stderr
    assert json.loads(run("ls", "--json").stdout)[0]["name"] == "tiny:v1"
    show = json.loads(run("show", "tiny:v1", "--json").stdout)
    assert show["config"]["model_family"] == "llama" and show["layers"][0]["mediaType"].endswith(".model")
    assert "every blob matches" in run("verify", "tiny:v1").stdout
    assert json.loads(run("verify", "tiny:v1", "--json").stdout) == {"model": "tiny:v1", "ok": True, "problems": []}
    blob = Path(env["OLLAMA_MODELS"]) / "blobs" / show["layers"][0]["digest"].replace(":", "-")
    kept = blob.read_bytes()
    blob.write_bytes(kept[:-1] + bytes([kept[-1] ^ 1]))
    damaged = run("verify", "tiny:v1", "--json")
    assert damaged.returncode == 1 and "do not match" in damaged.stderr
    assert json.loads(damaged.stdout)["problems"] == [
        {"digest": show["layers"][0]["digest"], "layer": show["layers"][0]["mediaType"],
         "problem": "content does not match its digest"}
    ]  # fmt: skip
    blob.write_bytes(kept)
    assert "llama" in run("inspect", "tiny:v1").stdout
    bad = run("show", "../etc/passwd")
    assert bad.returncode == 2 and "invalid model name" in bad.stderr and "Traceback" not in bad.stderr
    created = json.loads(run("create", "tiny:v2", "--from", str(gguf_file), "--json").stdout)
    assert created["model"] == "tiny:v2"
    assert [layer["digest"] for layer in created["layers"]] == [layer["digest"] for layer in show["layers"]]
    assert json.loads(run("rm", "tiny:v2", "--json").stdout) == {"model": "tiny:v2", "removed_blobs": []}  # shared
    assert run("rm", "tiny:v1").returncode == 0
    assert json.loads(run("ls", "--json").stdout) == []


def _mixes_generator():
    return load_script(Path(__file__).parents[1] / "data" / "make_llama_mixes.py")


@pytest.mark.parametrize("model_name", ["tiny-llama", "tiny-llama-bf16", "tiny-llama-q8_0"])
def test_create_stores_llama_quantize_copy(tmp_path, model_name):
    """createModel passes a text GGUF through `llama-quantize --allow-requantize COPY`: the model layer is
    llama-quantize's COPY output, byte for byte (general.file_type the input's, or the loader's guess)."""
    src = _mixes_generator().write_source(tmp_path, model_name)
    store = Store(tmp_path / "models")
    [layer] = create_from_gguf(store, "tiny", src).layers
    assert layer.digest == "sha256:" + MIXES[model_name]["sha256"]["COPY"][0]


def test_create_stores_an_fp8_sourced_gguf_as_q8_0(tmp_path):
    """An F16 GGUF Ollama's converter made from an FP8 checkpoint (source_quantization hf_fp8) is stored as
    llama-quantize's Q8_0 of it (hasSourceFP8Tensors), not COPY."""
    src = _mixes_generator().write_source(tmp_path, "tiny-llama-hf-fp8")
    [layer] = create_from_gguf(Store(tmp_path / "models"), "fp8", src).layers
    assert layer.digest == "sha256:" + MIXES["tiny-llama-hf-fp8"]["sha256"]["Q8_0"][0]


def test_create_merges_a_split_gguf_into_one_layer(tmp_path, weightkit_cli):
    """A split GGUF (`create --from` any shard, or a Modelfile's FROM its folder, as Ollama groups the shards) is
    one model layer: llama-quantize COPY of the whole model, with no split keys. A Modelfile's FROM one shard
    is refused, as Ollama's server then has that shard alone."""
    first = _mixes_generator().write_source(tmp_path, "tiny-llama-split")
    store = Store(tmp_path / "models")
    expected = "sha256:" + MIXES["tiny-llama-split"]["sha256"]["COPY"][0]
    [layer] = create_from_gguf(store, "split", first).layers
    assert layer.digest == expected
    (tmp_path / "Modelfile").write_text(f"FROM {tmp_path}\n")
    r = weightkit_cli(
        "create", "split2", "-f", tmp_path / "Modelfile", "--json", env={"OLLAMA_MODELS": str(store.root)}
    )
    assert r.returncode == 0, r.stderr
    assert [layer["digest"] for layer in json.loads(r.stdout)["layers"]] == [expected]
    with weightkit.open(store.blob_path(layer.digest)) as m:
        assert not any(key.startswith("split.") for key in m.metadata)
    (tmp_path / "Shard").write_text(f"FROM {first}\n")  # Ollama's server gets that one file: refused
    with pytest.raises(FormatError, match="split GGUF has 1 shards, expected 3"):
        create_from_modelfile(store, "split3", tmp_path / "Shard")


def test_a_split_draft_is_merged_into_one_layer(tmp_path):
    """A DRAFT naming the folder of a split GGUF: createModel merges its shards and rewrites it with llama-quantize
    COPY, as a split model (the draft layer is that COPY, byte for byte, with no source name); the config's draft
    names its architecture. A DRAFT naming one shard is refused, as Ollama's server then has that shard alone."""
    for folder in ("base", "draft"):
        (tmp_path / folder).mkdir()
    base = _mixes_generator().write_source(tmp_path / "base", "tiny-llama")
    first = _mixes_generator().write_source(tmp_path / "draft", "tiny-llama-split")
    (tmp_path / "Modelfile").write_text(f"FROM {base}\nDRAFT ./draft\n")
    store = Store(tmp_path / "models")
    model, draft = create_from_modelfile(store, "spec", tmp_path / "Modelfile").layers
    assert model.digest == "sha256:" + MIXES["tiny-llama"]["sha256"]["COPY"][0]
    assert (draft.media_type, draft.digest) == (
        "application/vnd.ollama.image.draft", "sha256:" + MIXES["tiny-llama-split"]["sha256"]["COPY"][0])  # fmt: skip
    assert (draft.name, draft.from_) == ("", "")
    config = json.loads(store.blob_path(store.manifest("spec").config.digest).read_bytes())
    assert config["draft"] == {"model_format": "gguf", "architecture": "llama"}
    (tmp_path / "Shard").write_text(f"FROM {base}\nDRAFT {first}\n")
    with pytest.raises(FormatError, match="split GGUF has 1 shards, expected 3"):
        create_from_modelfile(store, "spec2", tmp_path / "Shard")


# What Ollama's Go GGUF writer makes of split GGUFs with compatibility tensors, recorded by
# tests/data/make_ollama_split_gguf.go (the shards rebuilt by its .py).
SPLIT_GGUF = json.loads((Path(__file__).parents[1] / "data" / "ollama_split_gguf.json").read_text())["cases"]


def _split_gguf_case(folder: Path, name: str) -> Path:
    """A recorded case's shards rebuilt in `folder` (checked against the recorded ones); the first shard."""
    script = load_script(Path(__file__).parents[1] / "data" / "make_ollama_split_gguf.py")
    [recorded] = [case for case in SPLIT_GGUF if case["name"] == name]
    [case] = [case for case in script.CASES if case[0] == name]
    paths = script.write_case(case, folder)
    assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths] == recorded["shards"]
    return paths[0]


def _stored_files(store: Store) -> list[Path]:
    return [p for p in store.root.rglob("*") if p.is_file() and p.parent.name != ".weightkit"]


@pytest.mark.parametrize("case", [c["name"] for c in SPLIT_GGUF if c["name"] not in ("draft", "fp8")])
def test_a_split_gguf_with_compatibility_tensors_is_merged_as_ollamas_go_writer_merges_it(tmp_path, case):
    """A split GGUF with projector, audio or MTP tensors: its shards merged by fs/ggml.WriteGGUF
    (copySplitLayerPreservingTensors) into one model layer of Ollama's bytes and no source name, not rewritten
    further; or refused as that writer refuses it (a value type it lacks, no architecture), the store unchanged."""
    [recorded] = [c for c in SPLIT_GGUF if c["name"] == case]
    first = _split_gguf_case(tmp_path / "src", case)
    store = Store(tmp_path / "models")
    if "error" in recorded:
        with pytest.raises(FormatError, match=re.escape(recorded["error"])):
            create_from_gguf(store, "vl", first)
        assert not _stored_files(store)
        return
    [layer] = create_from_gguf(store, "vl", first).layers
    assert (layer.digest, layer.size, layer.from_) == ("sha256:" + recorded["sha256"], recorded["size"], "")
    with weightkit.open(store.blob_path(layer.digest)) as merged:
        config = json.loads(store.blob_path(store.manifest("vl").config.digest).read_bytes())
        assert config["model_type"] == human_number(sum(t.n_elements for t in merged.tensors.values()))
        assert config["file_type"] == "F16"


def test_a_split_draft_with_compatibility_tensors_is_merged_by_ollamas_go_writer(tmp_path):
    """A DRAFT naming the folder of a split GGUF with compatibility tensors: one draft layer, Ollama's Go
    writer's bytes, no source name; the config's draft names its architecture."""
    (tmp_path / "base").mkdir()
    base = _mixes_generator().write_source(tmp_path / "base", "tiny-llama")
    _split_gguf_case(tmp_path / "draft", "draft")
    (tmp_path / "Modelfile").write_text(f"FROM {base}\nDRAFT ./draft\n")
    store = Store(tmp_path / "models")
    _, draft = create_from_modelfile(store, "spec", tmp_path / "Modelfile").layers
    [recorded] = [c for c in SPLIT_GGUF if c["name"] == "draft"]
    assert (draft.media_type, draft.digest, draft.from_) == (
        "application/vnd.ollama.image.draft", "sha256:" + recorded["sha256"], "")  # fmt: skip
    config = json.loads(store.blob_path(store.manifest("spec").config.digest).read_bytes())
    assert config["draft"] == {"model_format": "gguf", "architecture": "qwen2"}


def test_fp8_sourced_compatibility_tensors_are_refused(tmp_path):
    """An FP8-sourced GGUF with projector tensors (Ollama's own llama-quantize build quantizes it to Q8_0 and
    restores the tensors; a split one after its Go writer merged it, moving bare source keys under the
    architecture): refused, naming the tool, the store unchanged (docs/formats.md says why)."""
    tensors = {"a": np.ones((4, 32), np.float32), "v.patch_embd.weight": np.ones((4, 32), np.float32)}
    fp8 = tmp_path / "fp8.gguf"
    write_gguf(fp8, {"general.architecture": "llama", "general.file_type": Value(1, GGUFValueType.UINT32),
                     "llama.source_quantization": "hf_fp8", "llama.source_fp8_tensors": ["a"]}, tensors)  # fmt: skip
    store = Store(tmp_path / "models")
    for path in (fp8, _split_gguf_case(tmp_path / "split", "fp8")):
        with pytest.raises(UnsupportedError, match="its own llama-quantize build"):
            create_from_gguf(store, "vl", path)
        assert not _stored_files(store)


def test_create_keeps_a_gguf_with_projector_tensors_as_given(tmp_path):
    """A GGUF with projector (v.*, mm.*), audio or MTP tensors is stored as it is, named from its file:
    llama.cpp's text loader would drop them, so Ollama does not pass it through llama-quantize."""
    path = tmp_path / "vl.gguf"
    tensors = {"a": np.ones((4, 32), np.float32), "v.patch_embd.weight": np.ones((4, 32), np.float32)}
    write_gguf(path, {"general.architecture": "llama"}, tensors)
    [layer] = create_from_gguf(Store(tmp_path / "models"), "vl", path).layers
    assert layer.digest == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert layer.from_ == "vl.gguf"  # ggufLayers' layer, named from its file, kept as it is
