"""`tokenizer.ggml.pre`: which BPE pre-tokenizer llama.cpp should use, found by hashing a tokenization.

The converter encodes a fixed check text with the checkpoint's tokenizer and looks the SHA-256 of the id list
up in a table generated from known models (`data/bpe_pre_hashes.json`, recorded from the reference by
tools/make_bpe_pre_hashes.py). An unknown hash means llama.cpp does not know how to pre-tokenize for this
model, and the conversion stops, as the reference's does.
"""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import resources

from ....errors import UnsupportedError
from .fast import TOKENIZER_JSON, FastTokenizer


@functools.cache
def _table() -> tuple[str, dict[str, str]]:
    data = json.loads(resources.files(__package__).joinpath("data/bpe_pre_hashes.json").read_text("utf-8"))
    return data["check_text"], data["pre_by_hash"]


def check_hash(tok: FastTokenizer) -> str:
    """SHA-256 of `str(tokenizer.encode(check_text))`, special tokens included."""
    text, _ = _table()
    return hashlib.sha256(str(tok.encode(text)).encode()).hexdigest()


def pre_tokenizer_name(tok: FastTokenizer, where: str) -> str:
    """The `tokenizer.ggml.pre` value for this tokenizer, or an UnsupportedError saying what to do."""
    digest = check_hash(tok)
    name = _table()[1].get(digest)
    if name is None:
        raise UnsupportedError(
            f"{where}/{TOKENIZER_JSON}: llama.cpp does not know this BPE pre-tokenizer (check hash {digest}); "
            "its converter refuses it too. If the model is a fine-tune, copy the tokenizer files of its base "
            "model; otherwise llama.cpp has to add it (convert_hf_to_gguf_update.py) first"
        )
    return name
