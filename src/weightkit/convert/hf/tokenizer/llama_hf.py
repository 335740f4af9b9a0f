"""Llama-style byte-fallback BPE from tokenizer.json alone (`tokenizer.ggml.model = "llama"`).

A SentencePiece vocabulary converted to HF `tokenizers` (BPE with byte fallback and a Sequence decoder, as
transformers writes for Llama and Mistral, and as `--to hf` writes) with no tokenizer.model beside it. The
reference reads it with `gguf.LlamaHfVocab` through `AutoTokenizer` (`TextModel._set_vocab_llama_hf`): the
base vocabulary's tokens, BYTE for `<0xXX>`, CONTROL for special tokens, NORMAL otherwise, then the added
tokens beyond it (CONTROL if special, else USER_DEFINED); every score is -1000.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ....errors import FormatError
from ..config import HFConfig, read_json_object
from ..kv import KV
from .fast import TOKENIZER_JSON, load_fast_tokenizer
from .sentencepiece import ADDED_SCORE, LlamaVocab, write_llama_vocab
from .vocab import TokenType

_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def is_llama_hf_bpe(folder: Path) -> bool:
    """`LlamaHfVocab`'s test: a BPE model with byte fallback and a Sequence decoder (Llama 3's BPE is not)."""
    path = folder / TOKENIZER_JSON
    if not path.is_file():
        return False
    tokenizer = read_json_object(path, "tokenizer.json", shared=True)
    model = tokenizer.get("model")
    if not isinstance(model, dict):
        raise FormatError(path, None, "tokenizer.json has no model")
    if model.get("type") == "BPE" and model.get("ignore_merges", False) and not model.get("byte_fallback", True):
        return False
    decoder = tokenizer.get("decoder")
    return (
        model.get("type") == "BPE"
        and bool(model.get("byte_fallback", False))
        and isinstance(decoder, dict)
        and decoder.get("type") == "Sequence"
    )


def llama_hf_vocab(folder: Path, hparams: HFConfig) -> LlamaVocab:
    """`LlamaHfVocab.all_tokens`: ids below `tokenizer.vocab_size`, then the added tokens above it by id."""
    tok = load_fast_tokenizer(folder, hparams.get("model_type"))
    vocab = tok.vocab()
    special_ids = {vocab[t] for t in tok.special_tokens}
    base = tok.base_size()
    by_id = {i: t for t, i in vocab.items()}
    tokens: list[str] = []
    types: list[int] = []
    for token_id in range(base):
        token = by_id.get(token_id)
        if token is None:
            raise FormatError(folder / TOKENIZER_JSON, None, f"no token has id {token_id} (of {base})")
        tokens.append(token)
        if _BYTE_TOKEN.fullmatch(token):
            types.append(TokenType.BYTE)
        else:
            types.append(TokenType.CONTROL if token_id in special_ids else TokenType.NORMAL)
    added = {t.content: i for i, t in tok.added_tokens().items()}  # `get_added_vocab`: by id, last id wins
    for token, token_id in sorted(added.items(), key=lambda item: item[1]):
        if token_id >= base:
            tokens.append(token)
            types.append(TokenType.CONTROL if token in tok.special_tokens else TokenType.USER_DEFINED)
    scores = np.full(len(tokens), ADDED_SCORE, dtype=np.float32)
    return LlamaVocab(tokens, scores, np.array(types, dtype=np.int32))


def write_llama_hf_vocab(kv: KV, folder: Path, hparams: HFConfig) -> None:
    """`TextModel._set_vocab_llama_hf`: model "llama", pre "default", tokens, scores, types, specials."""
    write_llama_vocab(kv, folder, llama_hf_vocab(folder, hparams))
