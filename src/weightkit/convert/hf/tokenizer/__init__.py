"""Tokenizer vocabularies for GGUF: BPE and WordPiece from tokenizer.json (SentencePiece comes later), the
pre-tokenizer check hash, and the special tokens."""

from .bpe import write_bpe_vocab
from .vocab import TokenType
from .wordpiece import write_wordpiece_vocab

__all__ = ["TokenType", "write_bpe_vocab", "write_wordpiece_vocab"]
