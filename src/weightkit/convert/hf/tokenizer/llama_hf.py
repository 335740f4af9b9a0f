"""Llama-style byte-fallback BPE from tokenizer.json alone (`tokenizer.ggml.model = "llama"`).

A SentencePiece vocabulary converted to HF `tokenizers` (BPE with byte fallback and a Sequence decoder, as
transformers writes for Llama and Mistral, and as `--to hf` writes) with no tokenizer.model beside it. The
reference reads it with `gguf.LlamaHfVocab` through `AutoTokenizer` (`TextModel._set_vocab_llama_hf`): the
base vocabulary's tokens, BYTE for `<0xXX>`, CONTROL for special tokens, NORMAL otherwise, then the added
tokens beyond it (CONTROL if special, else USER_DEFINED); every score is -1000.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ....errors import FormatError
from ..config import HFConfig, read_json_object
from ..kv import KV
from .fast import TOKENIZER_JSON, load_fast_tokenizer
from .sentencepiece import ADDED_SCORE, LlamaVocab, write_llama_vocab
from .vocab import TokenType

#: Every spelling of a byte token, `<0x[0-9A-Fa-f]{2}>`.
_BYTE_TOKENS = tuple(f"<0x{a}{b}>" for a in "0123456789ABCDEFabcdef" for b in "0123456789ABCDEFabcdef")


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
    tokens = list(map(by_id.get, range(base)))
    if None in tokens:
        raise FormatError(folder / TOKENIZER_JSON, None, f"no token has id {tokens.index(None)} (of {base})")
    types = np.full(base, TokenType.NORMAL, dtype=np.int32)
    types[[i for i in special_ids if i < base]] = TokenType.CONTROL
    types[_byte_token_ids(vocab, by_id, base)] = TokenType.BYTE  # BYTE before CONTROL, as the reference asks
    added = {t.content: i for i, t in tok.added_tokens().items()}  # `get_added_vocab`: by id, last id wins
    more: list[int] = []
    for token, token_id in sorted(added.items(), key=lambda item: item[1]):
        if token_id >= base:
            tokens.append(token)
            more.append(TokenType.CONTROL if token in tok.special_tokens else TokenType.USER_DEFINED)
    scores = np.full(len(tokens), ADDED_SCORE, dtype=np.float32)
    return LlamaVocab(tokens, scores, np.concatenate([types, np.array(more, dtype=np.int32)]))


def _byte_token_ids(vocab: dict[str, int], by_id: dict[int, str], base: int) -> list[int]:
    """The ids below `base` whose token is a byte, `<0xXX>`: each of its 484 spellings looked up, rather than
    every token matched against the pattern."""
    return [i for s in _BYTE_TOKENS if (i := vocab.get(s, base)) < base and by_id[i] == s]


def write_llama_hf_vocab(kv: KV, folder: Path, hparams: HFConfig) -> None:
    """`TextModel._set_vocab_llama_hf`: model "llama", pre "default", tokens, scores, types, specials."""
    write_llama_vocab(kv, folder, llama_hf_vocab(folder, hparams))
