"""The vocabulary and pre-tokenizer hash weightkit reads, against what transformers' AutoTokenizer gives the
reference converter, over tokenizer variants that exercise its loading steps (recorded by
tests/data/make_tokenizer_golden.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from weightkit.convert.hf.tokenizer.fast import load_fast_tokenizer
from weightkit.convert.hf.tokenizer.pre_tokenizer import check_hash
from weightkit.convert.hf.tokenizer.vocab import vocab_base

from .conftest import make_hf_checkpoints as mk

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "data" / "tokenizer_golden.json").read_text())


@pytest.mark.parametrize("name", list(GOLDEN["variants"]))
def test_vocabulary_as_autotokenizer_gives_it(hf_checkpoints, tmp_path, name):
    _, model_type, vocab_size, _ = mk.TOKENIZER_VARIANTS[name]
    folder = mk.tokenizer_variant(name, hf_checkpoints, tmp_path)
    tok = load_fast_tokenizer(folder, model_type)
    tokens, types = vocab_base(tok, vocab_size)
    digest = hashlib.sha256(json.dumps([tokens, types.tolist()], ensure_ascii=False).encode()).hexdigest()
    assert digest == GOLDEN["variants"][name]["vocab_sha256"]
    assert check_hash(tok) == GOLDEN["variants"][name]["check_hash"]
