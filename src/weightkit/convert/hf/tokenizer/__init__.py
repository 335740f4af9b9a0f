"""Tokenizer vocabularies for GGUF: BPE and WordPiece from tokenizer.json, SentencePiece from tokenizer.model
(or, Llama-style, from tokenizer.json alone), Mistral's tekken.json, the pre-tokenizer check hash, and the
special tokens."""

from .bpe import write_bpe_vocab
from .llama_hf import is_llama_hf_bpe, llama_hf_vocab, write_llama_hf_vocab
from .sentencepiece import SPM_MODEL, LlamaVocab, write_phi3_vocab, write_sentencepiece_vocab
from .special import load_special_vocab, write_special_vocab
from .tekken import has_tekken_only, write_tekken_vocab
from .vocab import TokenType
from .wordpiece import write_wordpiece_vocab

__all__ = [
    "SPM_MODEL",
    "LlamaVocab",
    "TokenType",
    "has_tekken_only",
    "is_llama_hf_bpe",
    "llama_hf_vocab",
    "load_special_vocab",
    "write_bpe_vocab",
    "write_llama_hf_vocab",
    "write_phi3_vocab",
    "write_sentencepiece_vocab",
    "write_special_vocab",
    "write_tekken_vocab",
    "write_wordpiece_vocab",
]
