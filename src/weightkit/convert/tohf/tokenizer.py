"""The tokenizer files of an HF folder, from a GGUF's `tokenizer.ggml.*` keys.

`tokenizer.json` is the tokenizer the model was made with, as its own tokenizer.json has it, built on
transformers' GGUF loader (`integrations/ggml.py` of transformers 4.57.6) where that is right: byte-level
BPE (`tokenizer.ggml.model = gpt2`, with merges) pre-tokenized as `tokenizer.ggml.pre` says (the loader
gives Llama 3 GPT-2's split); SentencePiece vocabularies (`tokenizer.ggml.model = llama`) as byte-fallback
BPE with merges rebuilt from the scores (Llama, Mistral, Phi-3; Gemma as transformers converts Gemma's
tokenizer, where the loader makes a Unigram). The post-processor adds BOS/EOS as
`tokenizer.ggml.add_{bos,eos}_token` say. Control tokens are special added tokens, user-defined ones plain
added tokens, as llama.cpp treats them.

Also unlike transformers' loader: Phi-3 gets Llama's SentencePiece tokenizer (transformers' GGUF Phi-3
tokenizer has no normalizer and no byte fallback), and the EOS token is `eos_token_id`'s (its Llama
converter names the BOS token for both). tests/data/make_tohf_tokenizer_golden.py checks each family's
folder against its source tokenizer under transformers 5.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FormatError, UnsupportedError
from ..hf.tokenizer.fast import _tokenizers
from ..hf.tokenizer.sentencepiece import write_sentencepiece_model
from ..hf.tokenizer.vocab import TokenType


@dataclass(frozen=True)
class ByteLevelPre:
    """The pre-tokenization of a byte-level BPE tokenizer.json, as the model's own tokenizer has it."""

    split: str | None  # the regex split before the byte-level mapping; None: GPT-2's, the ByteLevel step's own
    ignore_merges: bool = False  # a word that is a token is taken whole (Llama 3's BPE), as llama.cpp does
    nfc: bool = False  # NFC-normalized first (Qwen2's)
    #: control tokens in the text read as text (`split_special_tokens`), as the model's own tokenizer does
    #: (mistral_common's tekken: special tokens only come from its chat requests)
    specials_as_text: bool = False


#: `tokenizer.ggml.pre` -> its model's pre-tokenization (the regexes are llama.cpp's "original regex from
#: tokenizer.json" for that pre-tokenizer in llama-vocab.cpp)
BYTE_LEVEL_PRE: dict[str, ByteLevelPre] = {
    "gpt-2": ByteLevelPre(None),
    "llama-bpe": ByteLevelPre(
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
        r"|\s+(?!\S)|\s+",
        ignore_merges=True,
    ),
    "qwen2": ByteLevelPre(
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
        r"|\s+(?!\S)|\s+",
        nfc=True,
    ),
    # Mistral's tekken.json (its `config.pattern`): a word split before an upper-case run; a vocabulary of
    # tiktoken ranks, so a word that is a token is taken whole
    "tekken": ByteLevelPre(
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
        r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ignore_merges=True,
        specials_as_text=True,
    ),
    # Qwen2's, with combining marks kept in their word
    "qwen35": ByteLevelPre(
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+",
        nfc=True,
    ),
}
_SPIECE = "▁"
#: transformers' tokenizer class per tokenizer family: one that takes tokenizer.json as it is. Not Llama's:
#: transformers 5's `LlamaTokenizer` rebuilds its pipeline around the merges (a Metaspace pre-tokenizer that
#: loses a run of leading spaces, none of Llama 3's); `PreTrainedTokenizerFast` loads the file in 4.x and 5.x
TOKENIZER_CLASS_BY_FAMILY = {
    "llama": "PreTrainedTokenizerFast",
    "qwen2": "Qwen2TokenizerFast",
    "gemma": "GemmaTokenizerFast",
}
_SPECIAL = ("bos", "eos", "unk", "pad")
_GGUF_IDS = {"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "pad": "padding_token_id"}


class GGUFVocab:
    """The `tokenizer.ggml.*` keys of one file, checked."""

    def __init__(self, meta: Mapping[str, Any], path: Path) -> None:
        self.path = path
        self.model = meta.get("tokenizer.ggml.model")
        tokens = meta.get("tokenizer.ggml.tokens")
        if self.model is None or tokens is None:
            raise UnsupportedError(f"{path}: no tokenizer in the file (tokenizer.ggml.model and .tokens)")
        self.tokens: list[str] = list(tokens)
        n = len(self.tokens)
        self.scores = [float(s) for s in meta.get("tokenizer.ggml.scores", [0.0] * n)]
        self.types = [int(t) for t in meta.get("tokenizer.ggml.token_type", [TokenType.NORMAL] * n)]
        if len(self.scores) != n or len(self.types) != n:
            raise FormatError(path, None, f"{n} tokens but {len(self.scores)} scores and {len(self.types)} types")
        self.merges: list[str] | None = meta.get("tokenizer.ggml.merges")
        self.pre: str | None = meta.get("tokenizer.ggml.pre")
        self.ids: dict[str, int] = {}
        for role in _SPECIAL:
            token_id = meta.get(f"tokenizer.ggml.{_GGUF_IDS[role]}")
            if token_id is not None:
                if not 0 <= int(token_id) < n:
                    raise FormatError(path, None, f"tokenizer.ggml.{_GGUF_IDS[role]} {token_id} is not one of {n}")
                self.ids[role] = int(token_id)
        self.add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", False))
        self.add_eos = bool(meta.get("tokenizer.ggml.add_eos_token", False))
        self.add_space_prefix: bool | None = meta.get("tokenizer.ggml.add_space_prefix")
        self.chat_template: str | None = meta.get("tokenizer.chat_template")

    def token(self, role: str) -> str | None:
        return self.tokens[self.ids[role]] if role in self.ids else None

    def merge_pairs(self) -> list[tuple[str, str]]:
        """The merges: the file's, else rebuilt from the scores (`score_merges`)."""
        if self.merges is not None:
            pairs = [tuple(m.split(" ")) for m in self.merges]
            if any(len(p) != 2 for p in pairs):
                raise FormatError(self.path, None, "a tokenizer.ggml.merges entry is not two tokens")
            return pairs  # type: ignore[return-value]
        return score_merges(self.tokens, self.scores)


#: the base of the polynomial hashes `score_merges` finds a piece's halves by (odd: arithmetic mod 2**64)
_HASH_BASE = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True)
class _SameLength:
    """The pieces of one length: their indices, their code points (a row each), the hashes of every prefix
    of each (column i: the first i characters), and their rows in the order of their whole hashes, and those."""

    index: np.ndarray
    codes: np.ndarray
    prefix: np.ndarray
    by_hash: np.ndarray
    sorted_hashes: np.ndarray

    @classmethod
    def of(cls, words: list[str], index: np.ndarray, length: int) -> _SameLength:
        codes = np.array([words[k] for k in index.tolist()], f"<U{length}").view(np.uint32).reshape(len(index), -1)
        prefix = np.zeros((len(index), length + 1), np.uint64)
        with np.errstate(over="ignore"):
            for i in range(length):
                prefix[:, i + 1] = prefix[:, i] * _HASH_BASE + codes[:, i] + np.uint64(1)
        by_hash = np.argsort(prefix[:, -1])
        return cls(index, codes, prefix, by_hash, prefix[by_hash, -1])

    def find(self, hashes: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which rows of `codes` (strings of this length, with their `hashes`) are pieces: those rows, and
        the pieces' indices. Hashes only narrow the search; the code points decide."""
        asked = np.argsort(hashes)  # searched in order: several times faster
        low, high = (np.searchsorted(self.sorted_hashes, hashes[asked], side) for side in ("left", "right"))
        count = high - low
        row = np.repeat(asked, count)
        at = self.by_hash[np.arange(count.sum()) + np.repeat(low - (np.cumsum(count) - count), count)]
        same = (self.codes[at] == codes[row]).all(axis=1)
        return row[same], self.index[at[same]]


def score_merges(pieces: list[str], scores: list[float]) -> list[tuple[str, str]]:
    """A SentencePiece vocabulary's merges, rebuilt from its scores as transformers' `GGUFTokenizerSkeleton`
    does: each piece's splits into two pieces, best-scored pieces first, then all by the piece's score. Found
    with numpy (a 262k-piece vocabulary has over a million places to split): the pieces grouped by length, a
    split's halves looked up by hash among the pieces of their lengths and compared character by character."""
    score = dict(zip(pieces, scores, strict=True))  # a repeated piece: its first place, its last score
    words = list(score)
    values = np.fromiter(score.values(), np.float64, len(words))
    lengths = np.fromiter(map(len, words), np.int64, len(words))
    groups = {
        n: _SameLength.of(words, np.flatnonzero(lengths == n), n) for n in np.unique(lengths[lengths > 0]).tolist()
    }
    found = [(np.zeros(0, np.int64),) * 4]  # (piece, split, head, tail) per piece length and split
    for n, group in groups.items():
        for i in range(1, n):
            if i not in groups or n - i not in groups:
                continue
            row, head = groups[i].find(group.prefix[:, i], group.codes[:, :i])
            with np.errstate(over="ignore"):
                tails = group.prefix[row, n] - group.prefix[row, i] * _HASH_BASE ** np.uint64(n - i)
            kept, tail = groups[n - i].find(tails, group.codes[row, i:])
            found.append((group.index[row[kept]], np.full(len(kept), i), head[kept], tail))
    piece, split, head, tail = (np.concatenate(c) for c in zip(*found, strict=True))
    place = np.empty(len(words), np.int64)
    place[np.argsort(-values, kind="stable")] = np.arange(len(words))  # the pieces, best first, stably
    order = np.lexsort((split, -values[tail], -values[head], place[piece]))
    texts = np.array(words, dtype=object)
    return list(zip(texts[head[order]].tolist(), texts[tail[order]].tolist(), strict=True))


def _spm_pieces(vocab: GGUFVocab) -> list[str]:
    """The SentencePiece pieces of a `llama` vocabulary: llama.cpp's converter writes the spaces of
    user-defined pieces as spaces, SentencePiece (and so the source's tokenizer) as "▁"."""
    return [t.replace(" ", _SPIECE) if k == TokenType.USER_DEFINED else t
            for t, k in zip(vocab.tokens, vocab.types, strict=True)]  # fmt: skip


def _added_tokens(tok: Any, vocab: GGUFVocab, spelled: list[str] | None = None) -> None:
    """Control tokens as special added tokens, user-defined ones as plain added tokens, each under the name
    the model's vocabulary gives it (`spelled`, when the tokenizer renames pieces)."""
    added = _tokenizers().AddedToken
    names = vocab.tokens if spelled is None else spelled
    control = [added(t, normalized=False, special=True) for t, k in zip(names, vocab.types, strict=True)
               if k == TokenType.CONTROL]  # fmt: skip
    user = [added(t, normalized=False, special=False) for t, k in zip(names, vocab.types, strict=True)
            if k == TokenType.USER_DEFINED]  # fmt: skip
    if control:
        tok.add_special_tokens(control)
    if user:
        tok.add_tokens(user)


def _template(vocab: GGUFVocab) -> Any:
    """`LlamaTokenizerFast.update_post_processor` (Gemma's is the same): BOS and EOS around each sequence."""
    processors = _tokenizers().processors
    bos, eos = vocab.token("bos"), vocab.token("eos")
    add_bos, add_eos = vocab.add_bos and bos is not None, vocab.add_eos and eos is not None
    single = f"{f'{bos}:0 ' if add_bos else ''}$A:0{f' {eos}:0' if add_eos else ''}"
    pair = f"{single}{f' {bos}:1' if add_bos else ''} $B:1{f' {eos}:1' if add_eos else ''}"
    special = ([(bos, vocab.ids["bos"])] if add_bos else []) + ([(eos, vocab.ids["eos"])] if add_eos else [])
    return processors.TemplateProcessing(single=single, pair=pair, special_tokens=special)


def _byte_level(vocab: GGUFVocab) -> Any:
    """A byte-level BPE vocabulary's tokenizer as its model's own tokenizer.json has it: the merges,
    pre-tokenized as `tokenizer.ggml.pre` says, control and user-defined tokens added, decoded byte-level."""
    tk = _tokenizers()
    pre = BYTE_LEVEL_PRE.get(vocab.pre)  # type: ignore[arg-type]
    if pre is None:
        raise UnsupportedError(f"{vocab.path}: tokenizer.ggml.pre {vocab.pre!r} is not supported for a byte-level "
                               f"BPE vocabulary (supported: {', '.join(BYTE_LEVEL_PRE)})")  # fmt: skip
    if vocab.merges is None:
        raise UnsupportedError(f"{vocab.path}: a byte-level BPE vocabulary needs tokenizer.ggml.merges")
    ids = {t: i for i, t in enumerate(vocab.tokens)}
    tok = tk.Tokenizer(tk.models.BPE(ids, vocab.merge_pairs(), fuse_unk=False, byte_fallback=False,
                                     ignore_merges=pre.ignore_merges))  # fmt: skip
    tok.normalizer = tk.normalizers.NFC() if pre.nfc else tk.normalizers.Sequence([])
    byte_level = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=pre.split is None)
    split = [] if pre.split is None else [tk.pre_tokenizers.Split(tk.Regex(pre.split), behavior="isolated")]
    tok.pre_tokenizer = tk.pre_tokenizers.Sequence([*split, byte_level])
    tok.decoder = tk.decoders.ByteLevel()
    _added_tokens(tok, vocab)
    return tok


def _llama(vocab: GGUFVocab) -> tuple[Any, dict[str, Any]]:
    """`GGUFLlamaConverter` for a `llama` vocabulary: byte-fallback BPE, SentencePiece-style (prepend and
    replace spaces); a `gpt2` one (Llama 3) is byte-level (`_byte_level`), BOS/EOS added after the byte-level
    step as Llama 3's tokenizer.json does."""
    tk = _tokenizers()
    settings = {"add_bos_token": vocab.add_bos, "add_eos_token": vocab.add_eos}
    if vocab.model == "gpt2":
        tok = _byte_level(vocab)
        tok.post_processor = tk.processors.Sequence([tk.processors.ByteLevel(trim_offsets=False), _template(vocab)])
        return tok, {**settings, "clean_up_tokenization_spaces": True, "legacy": False}
    prefix = True if vocab.add_space_prefix is None else vocab.add_space_prefix
    ids = {t: i for i, t in enumerate(vocab.tokens)}
    tok = tk.Tokenizer(tk.models.BPE(ids, vocab.merge_pairs(), unk_token=vocab.token("unk"), fuse_unk=True,
                                     byte_fallback=True))  # fmt: skip
    _added_tokens(tok, vocab)
    steps = [tk.normalizers.Prepend(_SPIECE)] if prefix else []
    tok.normalizer = tk.normalizers.Sequence([*steps, tk.normalizers.Replace(" ", _SPIECE)])
    decoders = [tk.decoders.ByteFallback(), tk.decoders.Fuse(), tk.decoders.Replace(_SPIECE, " ")]
    tok.decoder = tk.decoders.Sequence([*decoders, *([tk.decoders.Strip(" ", 1, 0)] if prefix else [])])
    tok.post_processor = _template(vocab)
    return tok, {**settings, "clean_up_tokenization_spaces": False}


def _qwen2(vocab: GGUFVocab) -> tuple[Any, dict[str, Any]]:
    """`GGUFQwen2Converter`: byte-level BPE (`_byte_level`: NFC and Qwen2's split)."""
    tok = _byte_level(vocab)
    tok.post_processor = _tokenizers().processors.ByteLevel(trim_offsets=False)
    return tok, {"clean_up_tokenization_spaces": False}


def _gemma(vocab: GGUFVocab) -> tuple[Any, dict[str, Any]]:
    """Gemma's own tokenizer.json (what transformers' `GemmaConverter` makes of its tokenizer.model, and what
    transformers 5's `GemmaTokenizer` rebuilds whatever the file holds): byte-fallback BPE over the pieces with
    merges rebuilt from the scores, split on spaces; user-defined pieces spelled with "▁" again."""
    tk = _tokenizers()
    pieces = _spm_pieces(vocab)
    ids = {t: i for i, t in enumerate(pieces)}
    merges = score_merges(pieces, vocab.scores)
    tok = tk.Tokenizer(tk.models.BPE(ids, merges, unk_token=vocab.token("unk"), fuse_unk=True, byte_fallback=True))
    tok.normalizer = tk.normalizers.Replace(" ", _SPIECE)
    tok.pre_tokenizer = tk.pre_tokenizers.Split(" ", "merged_with_previous")
    tok.decoder = tk.decoders.Sequence([tk.decoders.Replace(_SPIECE, " "), tk.decoders.ByteFallback(),
                                        tk.decoders.Fuse()])  # fmt: skip
    _added_tokens(tok, vocab, pieces)
    tok.post_processor = _template(vocab)
    return tok, {"add_bos_token": vocab.add_bos, "add_eos_token": vocab.add_eos, "clean_up_tokenization_spaces": False}


_BUILDERS = {"llama": _llama, "qwen2": _qwen2, "gemma": _gemma}
_MODELS = {"llama": ("llama", "gpt2"), "qwen2": ("gpt2",), "gemma": ("llama",)}


def tokenizer_files(meta: Mapping[str, Any], family: str, path: Path,
                    byte_level_class: str | None = None) -> dict[str, Any]:  # fmt: skip
    """tokenizer.json (as a JSON string), tokenizer_config.json and special_tokens_map.json (as objects), and
    for a SentencePiece vocabulary tokenizer.model (bytes). `byte_level_class`, if given, is the tokenizer
    class named for a byte-level BPE (`gpt2`) vocabulary instead of the family's."""
    vocab = GGUFVocab(meta, path)
    if vocab.model not in _MODELS[family]:
        raise UnsupportedError(f"{path}: tokenizer.ggml.model {vocab.model!r} is not supported for this architecture "
                               f"(supported: {', '.join(_MODELS[family])})")  # fmt: skip
    tok, settings = _BUILDERS[family](vocab)
    special = {f"{role}_token": vocab.token(role) for role in _SPECIAL if role in vocab.ids}
    named = byte_level_class if vocab.model == "gpt2" and byte_level_class else TOKENIZER_CLASS_BY_FAMILY[family]
    config: dict[str, Any] = {"tokenizer_class": named, **special, **settings}
    if vocab.model == "gpt2" and BYTE_LEVEL_PRE[vocab.pre].specials_as_text:  # type: ignore[index]
        config["split_special_tokens"] = True
    if vocab.chat_template is not None:
        config["chat_template"] = vocab.chat_template
    spelled = {k: {"content": v, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
               for k, v in special.items()}  # fmt: skip
    files = {"tokenizer.json": tok.to_str(), "tokenizer_config.json": config, "special_tokens_map.json": spelled}
    if vocab.model == "llama":
        files["tokenizer.model"] = sentencepiece_model(vocab, unigram=family == "gemma")
    return files


def sentencepiece_model(vocab: GGUFVocab, *, unigram: bool) -> bytes:
    """tokenizer.model for a SentencePiece vocabulary: the pieces, scores and types as the file has them, with
    what llama.cpp's converter changed undone (the unknown piece's type, which Gemma's GGUFs mark otherwise, and
    the spaces of user-defined pieces, which are SentencePiece's "▁"); Unigram for Gemma, BPE otherwise, byte
    fallback when the file has the 256 byte pieces, the dummy prefix as `tokenizer.ggml.add_space_prefix`."""
    unk = vocab.ids.get("unk", vocab.tokens.index("<unk>") if "<unk>" in vocab.tokens else None)
    spelled = zip(_spm_pieces(vocab), vocab.scores, vocab.types, strict=True)
    pieces = [(t, s, TokenType.UNKNOWN if i == unk else k) for i, (t, s, k) in enumerate(spelled)]
    byte_fallback = sum(k == TokenType.BYTE for k in vocab.types) == 256
    prefix = True if vocab.add_space_prefix is None else bool(vocab.add_space_prefix)
    return write_sentencepiece_model(pieces, byte_fallback=byte_fallback, model_type=1 if unigram else 2,
                                     add_dummy_prefix=prefix)  # fmt: skip


__all__ = ["TOKENIZER_CLASS_BY_FAMILY", "GGUFVocab", "sentencepiece_model", "tokenizer_files"]
