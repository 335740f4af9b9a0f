"""A checkpoint's tokenizer as transformers' `AutoTokenizer` would build it, on Hugging Face's `tokenizers`.

llama.cpp's converter reads BPE and WordPiece vocabularies through `AutoTokenizer.from_pretrained`, which
starts from tokenizer.json and then changes it: tokens named in tokenizer_config.json are added (or their
flags updated), every special token is marked special, and some tokenizer classes rebuild a part of the
pipeline from their settings (BERT's normalizer, Llama's post-processor, a pre-tokenizer's
`add_prefix_space`). Those steps are reproduced here with the same `tokenizers` calls transformers makes,
for the tokenizer classes in `FAST_TOKENIZER_CLASSES`; another class is refused rather than guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ....errors import FormatError, UnsupportedError
from ..config import CONFIG_NAME, read_json_object, saved_by_transformers_5

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
_SPECIAL_ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise UnsupportedError(
            "reading a BPE or WordPiece tokenizer needs Hugging Face's tokenizers library: "
            "pip install weightkit[convert]"
        ) from None
    return tokenizers


def _sync_bert_normalizer(tok: Any, settings: Mapping[str, Any], where: Path) -> None:
    """`BertTokenizerFast.__init__`: rebuild the normalizer when its flags differ from the settings."""
    normalizers = _tokenizers().normalizers
    lower = settings.get("do_lower_case", True)
    strip = settings.get("strip_accents")
    chinese = settings.get("tokenize_chinese_chars", True)
    state = json.loads(tok.normalizer.__getstate__())
    wanted = {"lowercase": lower, "strip_accents": strip, "handle_chinese_chars": chinese}
    if any(state.get(key, value) != value for key, value in wanted.items()):
        cls = getattr(normalizers, state.pop("type"))
        tok.normalizer = cls(**{**state, **wanted})


def _llama_post_processor(tok: Any, settings: Mapping[str, Any], where: Path) -> None:
    """`LlamaTokenizerFast.__init__`: no `add_prefix_space` (that rebuilds the tokenizer from its SentencePiece
    model), then the post-processor as Gemma's."""
    if settings.get("add_prefix_space") is not None:
        raise UnsupportedError(f"{where}: a LlamaTokenizer with add_prefix_space is rebuilt from its SentencePiece "
                               "model, which is not supported")  # fmt: skip
    _bos_eos_post_processor(tok, settings, where)


def _bos_eos_post_processor(tok: Any, settings: Mapping[str, Any], where: Path) -> None:
    """`update_post_processor` of Llama's and Gemma's fast tokenizers: BOS (and EOS) added by a template built
    from the settings."""
    processors = _tokenizers().processors
    add_bos, add_eos = settings.get("add_bos_token", True), settings.get("add_eos_token", False)
    bos, eos = _content(settings.get("bos_token")), _content(settings.get("eos_token"))
    if (add_bos and bos is None) or (add_eos and eos is None):
        raise FormatError(where, None, "add_bos_token/add_eos_token without the token")
    single = f"{(bos + ':0 ') if add_bos else ''}$A:0{(' ' + eos + ':0') if add_eos else ''}"
    pair = f"{single}{(' ' + bos + ':1') if add_bos else ''} $B:1{(' ' + eos + ':1') if add_eos else ''}"
    special = [(t, tok.token_to_id(t)) for t, on in ((bos, add_bos), (eos, add_eos)) if on]
    tok.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=special)


@dataclass(frozen=True)
class TokenizerClass:
    """A transformers fast tokenizer class: its special-token defaults, the default of `add_prefix_space` it
    passes on, and what its constructor changes in the backend afterwards."""

    special_defaults: Mapping[str, str] = field(default_factory=dict)
    add_prefix_space: bool | None = False
    adjust: Callable[[Any, Mapping[str, Any], Path], None] | None = None  # (backend, settings, tokenizer_config)


_GPT2 = TokenizerClass({"unk_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})

#: By the name tokenizer_config.json gives (without "Fast").
FAST_TOKENIZER_CLASSES: dict[str, TokenizerClass] = {
    "PreTrainedTokenizer": TokenizerClass(),
    "TokenizersBackend": TokenizerClass(),  # transformers 5.x's name for a tokenizer.json without a model class
    "GPT2Tokenizer": _GPT2,
    "Qwen2Tokenizer": TokenizerClass(
        {"unk_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}
    ),
    "BertTokenizer": TokenizerClass(
        {
            "unk_token": "[UNK]",
            "sep_token": "[SEP]",
            "pad_token": "[PAD]",
            "cls_token": "[CLS]",
            "mask_token": "[MASK]",
        },
        adjust=_sync_bert_normalizer,
    ),
    "LlamaTokenizer": TokenizerClass(
        {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}, None, _llama_post_processor
    ),
    "GemmaTokenizer": TokenizerClass(
        {"unk_token": "<unk>", "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
        adjust=_bos_eos_post_processor,
    ),
}

#: transformers' tokenizer class for a config's model_type, when tokenizer_config.json names none.
CLASS_BY_MODEL_TYPE = {
    "llama": "LlamaTokenizer",
    "mistral": "LlamaTokenizer",
    "qwen2": "Qwen2Tokenizer",
    "qwen3": "Qwen2Tokenizer",
    "bert": "BertTokenizer",
    "gemma3": "GemmaTokenizer",
    "gemma3_text": "GemmaTokenizer",
}


def _content(token: Any) -> str | None:
    """A special token's text, whether tokenizer_config.json gives it as a string or a serialized AddedToken."""
    if isinstance(token, dict):
        token = token.get("content")
    return token if isinstance(token, str) else None


@dataclass
class FastTokenizer:
    """The backend tokenizer after transformers' loading steps, and the settings it was loaded with."""

    backend: Any
    settings: dict[str, Any]
    #: `tokenizer.all_special_tokens`: the special tokens' texts, bos_token first, without repeats
    special_tokens: list[str]

    def vocab(self) -> dict[str, int]:
        """`tokenizer.vocab`: every token, added ones included."""
        return self.backend.get_vocab(with_added_tokens=True)

    def base_size(self) -> int:
        """`tokenizer.vocab_size`: the model's vocabulary, without added tokens."""
        return self.backend.get_vocab_size(with_added_tokens=False)

    def added_tokens(self) -> dict[int, Any]:
        """`tokenizer.added_tokens_decoder`: id -> AddedToken (with `.content`, `.special`, `.normalized`)."""
        return dict(sorted(self.backend.get_added_tokens_decoder().items()))

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def round_trip(self, text: str) -> str:
        """`decode(encode(text, add_special_tokens=False))`, with transformers' optional clean-up."""
        out = self.backend.decode(self.encode(text, add_special_tokens=False), skip_special_tokens=False)
        if self.settings.get("clean_up_tokenization_spaces", False):
            for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                                  (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):  # fmt: skip
                out = out.replace(before, after)
        return out


def load_fast_tokenizer(folder: Path, model_type: str | None) -> FastTokenizer:
    """tokenizer.json with tokenizer_config.json applied as `AutoTokenizer.from_pretrained(folder)` does."""
    tokenizers = _tokenizers()
    path = folder / TOKENIZER_JSON
    if not path.is_file():
        raise FormatError(path, None, "no tokenizer.json here (a BPE or WordPiece tokenizer is read from it)")
    try:
        backend = tokenizers.Tokenizer.from_file(str(path))
    except Exception as e:  # the library raises plain Exceptions for malformed files
        raise FormatError(path, None, f"not a tokenizer the tokenizers library reads ({e})") from None
    config_path = folder / TOKENIZER_CONFIG
    settings = read_json_object(config_path, "tokenizer_config.json") if config_path.is_file() else {}
    name = settings.get("tokenizer_class") or CLASS_BY_MODEL_TYPE.get(model_type or "")
    if _saved_by_transformers_5(folder):  # its tokenizer.json is what its class builds: read as written
        name = "TokenizersBackend"
    cls = FAST_TOKENIZER_CLASSES.get(str(name).removesuffix("Fast"))
    if cls is None:
        known = ", ".join(sorted(FAST_TOKENIZER_CLASSES))
        raise UnsupportedError(f"{config_path}: tokenizer class {name!r} is not supported (known: {known})")
    backend.no_truncation()  # transformers' encode() turns both off
    backend.no_padding()
    specials = _add_configured_tokens(backend, settings, cls, tokenizers.AddedToken, config_path)
    prefix_space = settings.get("add_prefix_space", cls.add_prefix_space)
    if prefix_space is not None:
        _sync_add_prefix_space(backend, bool(prefix_space), tokenizers.pre_tokenizers)
    if cls.adjust is not None:
        cls.adjust(backend, {**cls.special_defaults, **settings}, config_path)
    return FastTokenizer(backend, settings, specials)


def _saved_by_transformers_5(folder: Path) -> bool:
    """transformers 5.x saves a tokenizer class's tokenizer.json as the class builds it (normalizer, pre-tokenizer,
    post-processor) and no longer writes the settings 4.x rebuilt them from (`add_bos_token`), so a checkpoint
    whose config.json 5.x wrote is read as its `TokenizersBackend` reads tokenizer.json, whatever the class."""
    path = folder / CONFIG_NAME
    return path.is_file() and saved_by_transformers_5(read_json_object(path, "config.json"))


def _added_token(spec: Any, AddedToken: type, where: Path) -> Any:
    """A serialized AddedToken (tokenizer_config.json's form) as the library's object."""
    if isinstance(spec, str):
        return spec
    if not isinstance(spec, dict) or not isinstance(spec.get("content"), str):
        raise FormatError(where, None, f"{spec!r} is not a token")
    flags = {k: spec[k] for k in ("single_word", "lstrip", "rstrip", "normalized", "special") if k in spec}
    return AddedToken(spec["content"], **flags)


def _add_configured_tokens(backend: Any, settings: dict[str, Any], cls: TokenizerClass, AddedToken: type,
                           where: Path) -> list[str]:  # fmt: skip
    """`PreTrainedTokenizerFast.__init__`'s added tokens: tokenizer_config's `added_tokens_decoder` entries
    the backend lacks (or has with other flags), then every special token, marked special. Returns the
    special tokens' texts in transformers' order."""
    declared = settings.get("added_tokens_decoder") or {}
    if not isinstance(declared, dict):
        raise FormatError(where, None, "added_tokens_decoder is not an object")
    try:
        by_id = sorted((int(k), _added_token(v, AddedToken, where)) for k, v in declared.items())
    except ValueError:
        raise FormatError(where, None, "added_tokens_decoder has a key that is not an integer") from None
    known = {repr(t) for t in backend.get_added_tokens_decoder().values()}
    to_add = [t for _, t in by_id if repr(t) not in known]
    by_content = {t.content: t for _, t in by_id}
    specials: list[Any] = []
    seen: dict[str, None] = {}
    values = [settings.get(a, cls.special_defaults.get(a)) for a in _SPECIAL_ATTRIBUTES]
    for value in [*values, *_more_special_tokens(settings)]:
        token = _added_token(value, AddedToken, where) if value is not None else None
        text = token if isinstance(token, str) else getattr(token, "content", None)
        if text is None or text in seen:
            continue
        seen[text] = None
        specials.append(by_content.get(text, token))  # transformers swaps in the declared AddedToken
    encoder = [t.content for t in backend.get_added_tokens_decoder().values()] + [t.content for t in to_add]
    to_add += [t for t in specials if (t not in encoder if isinstance(t, str) else all(t is not x for x in to_add))]
    tokens = []
    for t in to_add:
        if isinstance(t, str):
            tokens.append(AddedToken(t, special=t in seen))
        else:
            t.special = t.special or t.content in seen
            tokens.append(t)
    if tokens:
        backend.add_tokens(tokens)
    return list(seen)


def _more_special_tokens(settings: Mapping[str, Any]) -> list[Any]:
    """The special tokens beyond the standard attributes, in transformers' order. Saved by transformers 5 (its
    tokenizer_config.json has `backend`), that is each other `*_token` key with a token, then the
    `extra_special_tokens` (a mapping of named ones goes first); else `additional_special_tokens`."""
    if "backend" not in settings:
        extra = settings.get("additional_special_tokens") or []
        return extra if isinstance(extra, list) else []
    named = [v for k, v in settings.items() if k.endswith("_token") and k not in _SPECIAL_ATTRIBUTES
             and isinstance(v, (str, dict))]  # fmt: skip
    extra = settings.get("extra_special_tokens") or settings.get("additional_special_tokens") or []
    if isinstance(extra, dict):
        return [*extra.values(), *named]
    return [*named, *(extra if isinstance(extra, list) else [])]


def _sync_add_prefix_space(backend: Any, value: bool, pre_tokenizers: Any) -> None:
    """The end of `PreTrainedTokenizerFast.__init__`: a pre-tokenizer with its own `add_prefix_space` is
    rebuilt with the tokenizer's (errors are ignored there, and so here)."""
    try:
        state = json.loads(backend.pre_tokenizer.__getstate__())
        if state.get("add_prefix_space", value) != value:
            cls = getattr(pre_tokenizers, state.pop("type"))
            backend.pre_tokenizer = cls(**{**state, "add_prefix_space": value})
    except Exception:  # no pre-tokenizer, or one that cannot be rebuilt this way
        return
