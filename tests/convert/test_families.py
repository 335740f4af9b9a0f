"""Every registered model family is complete: each module under `convert/families` is registered once, its
conversions name tensors llama.cpp knows and are checked against the reference on a recorded checkpoint, its
config classes are whole, and each export inverts its conversion."""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import pytest

from weightkit.convert import families
from weightkit.convert.families import CONFIG_CLASSES, EXPORTS, FAMILIES
from weightkit.convert.tohf.tokenizer import TOKENIZER_CLASS_BY_FAMILY
from weightkit.memory.llamacpp.known_architectures import LLAMA_CPP_ARCHITECTURES

from .conftest import make_hf_checkpoints

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = json.loads((DATA / "convert_golden.json").read_text())
SHARED_MODULES = {"family", "decoder", "vision"}  # the declarations' shapes, the shared pieces: no family


def _recorded_classes(section: str = "checkpoints") -> set[str]:
    """The HF classes of the checkpoints whose reference conversions are recorded (the real MiniLM is a BERT);
    `section` "projectors": whose projectors are."""
    classes = {"BertModel"} if section == "checkpoints" else set()
    for name in GOLDEN.get(section, {}):
        if name in make_hf_checkpoints.MISTRAL_FORMAT:  # params.json names no class: the converter's own
            classes.add("MistralModel")
        elif name in make_hf_checkpoints.CHECKPOINTS:
            config = make_hf_checkpoints.CHECKPOINTS[name][0]
            text = config.get("text_config") or {}
            classes.add((text.get("architectures") or config["architectures"])[0])
    return classes


def test_every_family_module_is_registered_once():
    modules = {m.name for m in pkgutil.iter_modules(families.__path__)} - SHARED_MODULES
    declared = [importlib.import_module(f"{families.__name__}.{name}").FAMILY for name in sorted(modules)]
    assert len(FAMILIES) == len(declared) and all(any(f is d for f in FAMILIES) for d in declared)
    assert len({f.name for f in FAMILIES}) == len(FAMILIES)


def test_no_name_is_declared_twice():
    for kind in ("conversions", "projectors", "configs", "exports"):
        names = [name for f in FAMILIES for name in getattr(f, kind)]
        assert len(names) == len(set(names)), kind


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_conversions_are_complete(family):
    recorded = _recorded_classes()
    for hf_class, conversion in family.conversions.items():
        assert hf_class in recorded, f"{hf_class}: no checkpoint recorded against the reference converter"
        assert conversion.gguf in LLAMA_CPP_ARCHITECTURES, conversion.gguf
        gguf_names = set(conversion.tensor_names.values())
        for required in conversion.required:
            assert required.rsplit(".", 1)[0] in gguf_names, f"{hf_class}: {required} has no HF name"
        assert all(t.suffixes and t.check for t in conversion.transforms), hf_class


@pytest.mark.parametrize("family", [f for f in FAMILIES if f.projectors], ids=lambda f: f.name)
def test_projectors_are_complete(family):
    recorded = _recorded_classes("projectors")
    for hf_class, projector in family.projectors.items():
        assert hf_class in recorded, f"{hf_class}: no projector recorded against the reference's --mmproj"
        assert projector.gguf == "clip" and projector.general_type == "mmproj", hf_class
        gguf_names = set(projector.tensor_names.values())
        for required in projector.required:  # named with its suffix, or whole (Qwen-VL's v.patch_embd.weight.1)
            assert {required.rsplit(".", 1)[0], required} & gguf_names, f"{hf_class}: {required} has no HF name"


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_config_classes_are_complete(family):
    for model_type, cls in family.configs.items():
        assert cls.name.endswith("Config"), model_type
        if cls.text_config is not None:
            assert cls.text_config in family.configs, f"{model_type}: text_config {cls.text_config} is elsewhere"
        if cls.vision_config is not None:
            assert cls.vision_config in CONFIG_CLASSES, f"{model_type}: vision_config {cls.vision_config} is unknown"


@pytest.mark.parametrize("family", [f for f in FAMILIES if f.exports], ids=lambda f: f.name)
def test_exports_invert_their_conversion(family):
    for arch, export in family.exports.items():
        for e in (export, *(named for _, named in export.named)):
            assert e.conversion.gguf == arch, e.hf_class
            assert e.conversion in family.conversions.values(), e.hf_class
            assert e.model_type in CONFIG_CLASSES, e.model_type
            assert e.tokenizer in TOKENIZER_CLASS_BY_FAMILY, e.tokenizer
            names = e.conversion.tensor_names
            assert names and len(set(names.values())) == len(names), f"{e.hf_class}: two HF names for one tensor"
            assert all(t.invert is not None for t in e.conversion.transforms), e.hf_class


def test_lookups_cover_every_family():
    assert set(EXPORTS) == {arch for f in FAMILIES for arch in f.exports}
    assert set(CONFIG_CLASSES) == {t for f in FAMILIES for t in f.configs}
    assert set(families.PROJECTORS) == {c for f in FAMILIES for c in f.projectors}
