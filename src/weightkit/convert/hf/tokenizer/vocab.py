"""The token list and token types of a BPE or WordPiece vocabulary (`TextModel.get_vocab_base`)."""

from __future__ import annotations

import enum

import numpy as np

from ....errors import FormatError
from .fast import TOKENIZER_JSON, FastTokenizer


class TokenType(enum.IntEnum):
    """`tokenizer.ggml.token_type` values (SentencePiece's piece types)."""

    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


def looks_special(token: str) -> bool:
    """Added tokens the converter makes CONTROL even when not marked special (command-r, gemma, deepseek)."""
    return (
        token in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
        or (token.startswith("<|") and token.endswith("|>"))
        or (token.startswith("<｜") and token.endswith("｜>"))
        or (token.startswith("<unused") and token.endswith(">"))
    )


def vocab_base(tok: FastTokenizer, vocab_size: int | None) -> tuple[list[str], np.ndarray]:
    """Tokens 0..vocab_size-1 with their types: `[PAD{i}]` UNUSED for ids no token has, added tokens
    CONTROL (special or special-looking) or USER_DEFINED (with "▁" as a space), the rest NORMAL. Added tokens
    that skip normalization are first passed through an encode/decode round trip, as the converter does."""
    vocab = tok.vocab()
    if vocab_size is None:
        vocab_size = len(vocab)
    if vocab and max(vocab.values()) >= vocab_size:
        raise FormatError(
            TOKENIZER_JSON, None, f"token id {max(vocab.values())} is not below config.json's vocab_size {vocab_size}"
        )
    by_id = dict(zip(vocab.values(), vocab, strict=True))
    tokens: list[str] = list(map(by_id.get, range(vocab_size)))
    types = np.full(vocab_size, TokenType.NORMAL, dtype=np.int32)
    gaps = [i for i, t in enumerate(tokens) if t is None] if len(by_id) < vocab_size else []
    for i in gaps:
        tokens[i] = f"[PAD{i}]"
        types[i] = TokenType.UNUSED
    added = tok.added_tokens()
    texts = {t.content for t in added.values()}  # each is one id's token at most: the vocabulary maps it to one
    for i in sorted(vocab[t] for t in texts if t in vocab and by_id[vocab[t]] == t):
        info = added.get(i)
        if info is None:
            raise FormatError(
                TOKENIZER_JSON, None, f"added token {tokens[i]!r} is not at id {i}, where the vocabulary has it"
            )
        token = tokens[i] if info.normalized else tok.round_trip(tokens[i])
        if info.special or looks_special(token):
            tokens[i], types[i] = token, TokenType.CONTROL
        else:
            tokens[i], types[i] = token.replace("\u2581", " "), TokenType.USER_DEFINED
    return tokens, types
