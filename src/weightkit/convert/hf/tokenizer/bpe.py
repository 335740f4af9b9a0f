"""GPT-2-style byte-level BPE vocabularies (`tokenizer.ggml.model = "gpt2"`): Llama 3, Qwen, GPT-2, ...

`TextModel._set_vocab_gpt2`: model, pre-tokenizer name, tokens, token types, then the special vocabulary
with the merges.
"""

from __future__ import annotations

from pathlib import Path

from ..config import HFConfig
from ..kv import KV
from .fast import load_fast_tokenizer
from .pre_tokenizer import pre_tokenizer_name
from .special import load_special_vocab, write_special_vocab
from .vocab import vocab_base


def write_bpe_vocab(kv: KV, folder: Path, hparams: HFConfig) -> None:
    tok = load_fast_tokenizer(folder, hparams.get("model_type"))
    tokens, types = vocab_base(tok, hparams.get("vocab_size"))
    kv.string("tokenizer.ggml.model", "gpt2")
    kv.string("tokenizer.ggml.pre", pre_tokenizer_name(tok, str(folder)))
    kv.strings("tokenizer.ggml.tokens", tokens)
    kv.int32s("tokenizer.ggml.token_type", types)
    write_special_vocab(kv, load_special_vocab(folder, load_merges=True), folder / "tokenizer_config.json")
