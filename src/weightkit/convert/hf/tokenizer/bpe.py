"""GPT-2-style byte-level BPE vocabularies (`tokenizer.ggml.model = "gpt2"`): Llama 3, Qwen, GPT-2, ...

`TextModel._set_vocab_gpt2`: model, pre-tokenizer name, tokens, token types, then the special vocabulary
with the merges.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ....errors import FormatError
from ..config import HFConfig
from ..kv import KV
from .fast import TOKENIZER_JSON, load_fast_tokenizer
from .pre_tokenizer import pre_tokenizer_name
from .special import load_special_vocab, write_special_vocab
from .vocab import vocab_base


def write_bpe_vocab(kv: KV, folder: Path, hparams: HFConfig, named: Mapping[str, str] | None = None) -> None:
    """The vocabulary; `named` (special token type -> an added token's text) sets those types to the added
    tokens' ids where the files give none, as GLM's `_set_vocab_glm` does (its BOS is "[gMASK]")."""
    tok = load_fast_tokenizer(folder, hparams.get("model_type"))
    tokens, types = vocab_base(tok, hparams.get("vocab_size"))
    kv.string("tokenizer.ggml.model", "gpt2")
    kv.string("tokenizer.ggml.pre", pre_tokenizer_name(tok, str(folder)))
    kv.strings("tokenizer.ggml.tokens", tokens)
    kv.int32s("tokenizer.ggml.token_type", types)
    added = {t.content: i for i, t in tok.added_tokens().items()}
    if missing := [text for text in (named or {}).values() if text not in added]:
        raise FormatError(folder / TOKENIZER_JSON, None, f"no added token {missing[0]!r}")
    fallback = {typ: added[text] for typ, text in (named or {}).items()}
    special = load_special_vocab(folder, load_merges=True, fallback_ids=fallback)
    write_special_vocab(kv, special, folder / "tokenizer_config.json")
