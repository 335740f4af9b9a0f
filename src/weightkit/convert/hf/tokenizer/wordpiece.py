"""BERT's WordPiece vocabularies (`tokenizer.ggml.model = "bert"`).

`BertModel.set_vocab`: the token-type count first, then the vocabulary in llama.cpp's "phantom space" form
(a word-initial token gets a leading "▁", a "##" continuation loses its "##"; control tokens stay as they
are), then the special vocabulary without merges.
"""

from __future__ import annotations

from pathlib import Path

from ..config import HFConfig
from ..kv import KV
from .fast import load_fast_tokenizer
from .pre_tokenizer import pre_tokenizer_name
from .special import load_special_vocab, write_special_vocab
from .vocab import TokenType, vocab_base


def write_wordpiece_vocab(kv: KV, folder: Path, hparams: HFConfig) -> None:
    tok = load_fast_tokenizer(folder, hparams.get("model_type"))
    tokens, types = vocab_base(tok, hparams.get("vocab_size"))
    kv.u32("tokenizer.ggml.token_type_count", hparams.get("type_vocab_size", 1))
    phantom = [
        t if ty == TokenType.CONTROL else t[2:] if t.startswith("##") else "\u2581" + t
        for t, ty in zip(tokens, types.tolist(), strict=True)
    ]
    kv.string("tokenizer.ggml.model", "bert")
    kv.string("tokenizer.ggml.pre", pre_tokenizer_name(tok, str(folder)))
    kv.strings("tokenizer.ggml.tokens", phantom)
    kv.int32s("tokenizer.ggml.token_type", types)
    special = load_special_vocab(folder, load_merges=False, n_vocab=len(phantom))
    write_special_vocab(kv, special, folder / "tokenizer_config.json")
