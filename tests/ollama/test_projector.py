"""Projector GGUFs named by FROM or ADAPTER, as `ollama create` stores them: the layer ggufLayers files a GGUF as
(isProjectorGGUF), and a llava projector's default type added by Ollama's Go GGUF writer
(addDefaultLlavaProjectorType), checked against Ollama's verdicts and bytes (tests/data/ollama_projector_gguf.json,
recorded by make_ollama_projector_gguf.py with Go)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

import weightkit
from weightkit.errors import FormatError, UnsupportedError
from weightkit.gguf import GGUFValueType, Value, open_gguf, write_gguf
from weightkit.ollama import Store, create_from_gguf
from weightkit.ollama.create import create_from_modelfile, gguf_layer_kind
from weightkit.ollama.go_gguf import go_kv
from weightkit.ollama.store import MEDIA_TYPES

from ..scripts import load_script

DATA = Path(__file__).parents[1] / "data"
RECORDED = {c["name"]: c for c in json.loads((DATA / "ollama_projector_gguf.json").read_text())["cases"]}
SCRIPT = load_script(DATA / "make_ollama_projector_gguf.py")
_CASES = dict(SCRIPT.CASES)


def _case(folder: Path, name: str) -> Path:
    """A recorded case's file rebuilt in `folder`, checked against the one Go read."""
    path = SCRIPT.write_case((name, _CASES[name]), folder)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == RECORDED[name]["input"]
    return path


def _stored_files(store: Store) -> list[Path]:
    return sorted(p for p in store.root.rglob("*") if p.is_file() and p.parent.name != ".weightkit")


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_gguf_layer_kind_is_ollamas(tmp_path, name):
    """ggufLayers' media type for each case: general.type, isProjectorGGUF's block counts (uint32 only) and
    clip encoders (bools only)."""
    with open_gguf(_case(tmp_path, name)) as model:
        assert MEDIA_TYPES[gguf_layer_kind(go_kv(model))] == RECORDED[name]["media_type"]


@pytest.mark.parametrize("name", sorted(n for n, c in RECORDED.items() if not c["media_type"].endswith("model")))
def test_from_a_projector_or_adapter_stores_ollamas_layer(tmp_path, name):
    """FROM a projector or adapter GGUF: one layer of that type, a llava projector rewritten with
    clip.projector_type "mlp" (Ollama's bytes, no source name), any other as given and named from its file;
    the Go writer's refusal refused, the store unchanged."""
    recorded, path = RECORDED[name], _case(tmp_path / "src", name)
    store = Store(tmp_path / "models")
    if "error" in recorded:
        with pytest.raises(FormatError, match=re.escape(recorded["error"])):
            create_from_gguf(store, "vl", path)
        assert not _stored_files(store)
        return
    [layer] = create_from_gguf(store, "vl", path, quantize="q4_k_m").layers  # only model layers are quantized
    rewritten = recorded["media_type"].endswith("projector") and recorded["needs_default_projector_type"]
    digest = recorded["rewritten_sha256"] if rewritten else recorded["input"]
    assert (layer.media_type, layer.digest) == (recorded["media_type"], "sha256:" + digest)
    assert layer.from_ == ("" if rewritten else path.name)
    config = json.loads(store.blob_path(store.manifest("vl").config.digest).read_bytes())
    assert (config["model_format"], config["model_families"], config["file_type"]) == ("", None, "")


def test_adapter_naming_a_llava_projector_is_rewritten(tmp_path):
    """ADAPTER naming a llava projector: filed as a projector after the model's layer, rewritten as for FROM."""
    _tiny_model(tmp_path / "tiny.gguf")
    _case(tmp_path, "llava")
    (tmp_path / "Modelfile").write_text("FROM ./tiny.gguf\nADAPTER ./llava.gguf\n")
    _, projector = create_from_modelfile(Store(tmp_path / "models"), "vl", tmp_path / "Modelfile").layers
    recorded = RECORDED["llava"]
    assert (projector.media_type, projector.digest, projector.from_) == (
        recorded["media_type"], "sha256:" + recorded["rewritten_sha256"], "")  # fmt: skip


def test_create_model_adds_default_llava_projector_type(tmp_path):
    """Ollama's TestCreateModelAddsDefaultLlavaProjectorType: a clip file with a vision encoder and a
    vision.block_count is stored as a projector, rewritten, with clip.projector_type "mlp"."""
    path = tmp_path / "test.gguf"
    write_gguf(path, {"general.architecture": "clip", "clip.has_vision_encoder": True,
                      "clip.vision.block_count": Value(1, GGUFValueType.UINT32)},
               {"mm.0.weight": np.zeros((1, 1), np.float32)})  # fmt: skip
    store = Store(tmp_path / "models")
    [layer] = create_from_gguf(store, "test-create-llava-projector", path).layers
    assert layer.media_type == "application/vnd.ollama.image.projector"
    assert layer.digest != "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    with weightkit.open(store.blob_path(layer.digest)) as projector:
        assert projector.metadata["clip.projector_type"] == "mlp"


def test_gguf_layers_classifies_mmproj_as_projector(tmp_path):
    """Ollama's TestGGUFLayersClassifiesMMProjAsProjector: general.type mmproj is a projector, whatever its
    block counts."""
    md = {"general.architecture": "clip", "general.type": "mmproj", "clip.has_vision_encoder": True,
          "clip.vision.block_count": Value(0, GGUFValueType.UINT32), "clip.vision.projector_type": "gemma4uv",
          "clip.has_audio_encoder": True, "clip.audio.block_count": Value(0, GGUFValueType.UINT32),
          "clip.audio.projector_type": "gemma4ua"}  # fmt: skip
    write_gguf(tmp_path / "mmproj.gguf", md, {"mm.input_projection.weight": np.zeros((1, 1), np.float32)})
    with open_gguf(tmp_path / "mmproj.gguf") as model:
        assert gguf_layer_kind(go_kv(model)) == "projector"


def _tiny_model(path: Path) -> Path:
    write_gguf(path, {"general.architecture": "llama", "general.file_type": np.uint32(1)},
               {"a": np.ones((4, 32), np.float16)})  # fmt: skip
    return path


def test_from_a_folder_of_a_model_and_its_projector(tmp_path):
    """FROM a folder holding a model and its llava projector: a layer for each file in order of name (the
    projector rewritten as Ollama rewrites it, the model as FROM it alone), the config the model's."""
    _case(tmp_path / "vl", "llava")
    model = _tiny_model(tmp_path / "vl" / "tiny.gguf")
    (tmp_path / "Modelfile").write_text("FROM ./vl\n")
    store = Store(tmp_path / "models")
    projector, layer = create_from_modelfile(store, "vl", tmp_path / "Modelfile").layers
    alone = create_from_gguf(store, "alone", model)
    assert (projector.digest, projector.media_type) == ("sha256:" + RECORDED["llava"]["rewritten_sha256"],
                                                         RECORDED["llava"]["media_type"])  # fmt: skip
    assert layer == alone.layers[0]
    assert store.manifest("vl").config.digest == alone.config.digest


def test_from_a_folder_of_two_models_is_refused(tmp_path):
    """Several model GGUFs in one FROM folder (not one split model) are not followed: refused, nothing stored."""
    (tmp_path / "two").mkdir()
    for name in ("a.gguf", "b.gguf"):
        _tiny_model(tmp_path / "two" / name)
    (tmp_path / "Modelfile").write_text("FROM ./two\n")
    store = Store(tmp_path / "models")
    with pytest.raises(UnsupportedError, match="more than one model"):
        create_from_modelfile(store, "two", tmp_path / "Modelfile")
    assert not _stored_files(store)
