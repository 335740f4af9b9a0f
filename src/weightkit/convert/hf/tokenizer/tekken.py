"""Mistral's tekken tokenizer (`tekken.json`): the reference's `_set_vocab_mistral` over `mistral_common`'s
`MistralTokenizer.from_file`, read here without `mistral_common`.

tekken.json is tiktoken-style byte-level BPE: `vocab` holds the ranks (token bytes in base64; ranks 0..255 the
single bytes), `special_tokens` the control tokens before them (filled up to `default_num_special_tokens` with
`<SPECIAL_n>`), and `default_vocab_size` cuts the ranks. The GGUF gets the special tokens then the ranks as
GPT-2 byte-level strings, the merges rebuilt from the ranks, and the chat template llama.cpp has for the
tokenizer's version: a name, or for v11 and v13 the text of one of its templates (bundled in `data/`).
"""

from __future__ import annotations

import base64
import binascii
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ....errors import FormatError, UnsupportedError
from ..config import read_json_object
from ..kv import KV
from .vocab import TokenType

TEKKEN_JSON = "tekken.json"

#: `Tekkenizer.DEPRECATED_SPECIAL_TOKENS`: the control tokens of a file of version v7 or older without its own list
_DEPRECATED_SPECIAL_TOKENS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)  # fmt: skip
#: `TokenizerVersion`: the versions mistral_common loads
_VERSIONS = ("v1", "v2", "v3", "v7", "v11", "v13", "v15")
#: the special tokens each version's instruct tokenizer looks up when loaded (`InstructTokenizerV2` .. `V15`),
#: with the ids every tokenizer has (`bos_id`, `eos_id`, `unk_id`, `pad_id`)
_REQUIRED_BY_VERSION = (
    ("v1", ("<s>", "</s>", "<unk>", "<pad>")),
    ("v2", ("[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]",
            "[TOOL_CALLS]", "[PREFIX]", "[SUFFIX]")),
    ("v7", ("[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]")),
    ("v11", ("[ARGS]", "[CALL_ID]")),
    ("v15", ("[MODEL_SETTINGS]", "[/MODEL_SETTINGS]")),
)  # fmt: skip
#: `load_image_encoder`'s tokens, for a file with an image config
_IMAGE_TOKENS = ("[IMG]", "[IMG_BREAK]", "[IMG_END]")
#: `ImageConfig`'s fields, whether each is required (each a positive number)
_IMAGE_FIELDS = {"image_patch_size": True, "max_image_size": True, "spatial_merge_size": False}
#: `MistralModel.get_community_chat_template` for tekken: llama.cpp's template name for the version, or ...
_TEMPLATE_NAMES = {"v1": "mistral-v1", "v3": "mistral-v3-tekken", "v7": "mistral-v7-tekken"}
#: ... the file it reads from its models/templates (bundled in data/, Apache-2.0: see data/mistral-templates-NOTICE)
_TEMPLATE_FILES = {
    "v11": "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    "v13": "unsloth-mistral-Devstral-Small-2507.jinja",
}


def has_tekken_only(folder: Path) -> bool:
    """`LlamaModel.set_vocab`'s test: a tekken.json and no tokenizer.json."""
    return (folder / TEKKEN_JSON).is_file() and not (folder / "tokenizer.json").is_file()


def byte_level_chars() -> list[str]:
    """GPT-2's byte -> character table (`bytes_to_unicode`): printable Latin-1 bytes as themselves, the others
    as the characters from U+0100 on, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table: dict[int, str] = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return [table[b] for b in range(256)]


class Tekken:
    """tekken.json as `MistralTokenizer.from_file` loads it, with its checks: the special tokens by position,
    the ranks (token bytes) cut to the vocabulary size, the version."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data = read_json_object(path, TEKKEN_JSON)
        config = data.get("config")
        if not isinstance(config, dict):
            raise FormatError(path, None, "no 'config' object")
        self.version = config.get("version")
        if self.version not in _VERSIONS:
            raise FormatError(path, None, f"config.version {self.version!r} is not one of {', '.join(_VERSIONS)}")
        self.specials, self.special_ids = self._special_tokens(data)
        vocab_size, num_special = (self._count(config, k) for k in ("default_vocab_size", "default_num_special_tokens"))
        vocab = data.get("vocab")
        if not isinstance(vocab, list):
            raise FormatError(path, None, "no 'vocab' list")
        if len(self.specials) > num_special:
            raise FormatError(path, None, f"{len(self.specials)} special tokens, more than "
                              f"config.default_num_special_tokens {num_special}")  # fmt: skip
        self.specials += [f"<SPECIAL_{i}>" for i in range(len(self.specials), num_special)]
        if len(set(self.specials)) != num_special:
            raise FormatError(path, None, "a filler <SPECIAL_n> token is also listed in special_tokens")
        inner = vocab_size - num_special
        if not 0 <= inner <= len(vocab):
            raise FormatError(path, None, f"config.default_vocab_size {vocab_size} is not between the "
                              f"{num_special} special tokens and those plus the {len(vocab)} ranks")  # fmt: skip
        self.ranks = self._ranks(vocab[:inner])
        self._check_required(data)

    def _count(self, config: dict[str, Any], key: str) -> int:
        value = config.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise FormatError(self.path, None, f"config.{key} {value!r} is not a count")
        return value

    def _special_tokens(self, data: dict[str, Any]) -> tuple[list[str], dict[str, int]]:
        """The listed special tokens' texts by position, and their ids by text (their `rank`, by which the
        reference looks them up); a file of v7 or older may list none (the deprecated 20)."""
        listed = data.get("special_tokens")
        if listed is None:
            if _VERSIONS.index(self.version) > _VERSIONS.index("v7"):
                raise FormatError(self.path, None, f"no special_tokens: a {self.version} tokenizer must list them")
            return list(_DEPRECATED_SPECIAL_TOKENS), {t: i for i, t in enumerate(_DEPRECATED_SPECIAL_TOKENS)}
        if not isinstance(listed, list) or not all(
            isinstance(t, dict) and isinstance(t.get("token_str"), str) and isinstance(t.get("rank"), int)
            for t in listed
        ):
            raise FormatError(self.path, None, "special_tokens is not a list of {rank, token_str} objects")
        texts = [t["token_str"] for t in listed]
        if len(set(texts)) != len(texts):
            raise FormatError(self.path, None, "special_tokens lists a token twice")
        return texts, {t["token_str"]: t["rank"] for t in listed}

    def _ranks(self, vocab: list[Any]) -> dict[bytes, int]:
        """`_reload_mergeable_ranks`: entry i has rank i, and ranks 0..255 are the bytes 0..255."""
        ranks: dict[bytes, int] = {}
        for i, entry in enumerate(vocab):
            if not isinstance(entry, dict) or entry.keys() != {"rank", "token_bytes", "token_str"}:
                raise FormatError(self.path, None, f"vocab[{i}] is not a {{rank, token_bytes, token_str}} object")
            if entry["rank"] != i:
                raise FormatError(self.path, None, f"vocab[{i}] has rank {entry['rank']!r}")
            try:
                token = base64.b64decode(entry["token_bytes"])
            except (TypeError, ValueError, binascii.Error):
                raise FormatError(self.path, None, f"vocab[{i}].token_bytes is not base64") from None
            if i < 256 and token != bytes([i]):
                raise FormatError(self.path, None, f"vocab[{i}] is not the byte {i}")
            if token in ranks:
                raise FormatError(self.path, None, f"vocab[{i}] repeats rank {ranks[token]}'s bytes")
            ranks[token] = i
        return ranks

    def _check_required(self, data: dict[str, Any]) -> None:
        """What loading the file looks up (special tokens by version; the image tokens) or refuses."""
        version = _VERSIONS.index(self.version)
        needed = [t for since, tokens in _REQUIRED_BY_VERSION if version >= _VERSIONS.index(since) for t in tokens]
        image = data.get("multimodal") or data.get("image")
        if data.get("multimodal") and version > _VERSIONS.index("v11"):
            raise FormatError(self.path, None, f"a {self.version} tokenizer names its image config 'image'")
        if image:
            self._check_image(image)
        if image and version < _VERSIONS.index("v3"):
            raise FormatError(self.path, None, f"an image config needs a tokenizer of v3 or later, not {self.version}")
        if data.get("audio"):
            raise UnsupportedError(f"{self.path}: tekken.json's audio config is not supported")
        if data.get("model_settings_builder") is not None and version < _VERSIONS.index("v15"):
            raise FormatError(self.path, None, f"model_settings_builder needs a v15 tokenizer, not {self.version}")
        for token in needed + (list(_IMAGE_TOKENS) if image else []):
            if token not in self.special_ids:
                raise FormatError(self.path, None, f"no special token {token} (a {self.version} tokenizer has it)")

    def _check_image(self, image: Any) -> None:
        """`ImageConfig(**image)`: its fields only, the required ones present, each a positive number."""
        if not isinstance(image, dict):
            raise FormatError(self.path, None, "the image config is not an object")
        if unknown := sorted(set(image) - set(_IMAGE_FIELDS)):
            raise FormatError(self.path, None, f"the image config has no field {unknown[0]!r}")
        for field, required in _IMAGE_FIELDS.items():
            if field not in image and not required:
                continue
            value = image.get(field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise FormatError(self.path, None, f"the image config's {field} {value!r} is not a positive number")

    def tokens(self) -> list[str]:
        """`MistralVocab._tekken_tokens`: the special tokens, then each rank's bytes as byte-level characters."""
        return self.specials + self._rank_texts()

    def _rank_texts(self) -> list[str]:
        chars = byte_level_chars()
        return ["".join([chars[b] for b in token]) for token in self.ranks]

    def merges(self) -> list[str]:
        """`MistralVocab.extract_vocab_merges_from_model`: for each rank from 256 on, every split of its bytes into
        two ranked tokens, by the parts' ranks; refused where a rank has none."""
        texts = self._rank_texts()
        ranks = self.ranks
        merges = []
        for token, rank in ranks.items():
            if rank < 256:
                continue
            splits = sorted(
                (left, right)
                for j in range(1, len(token))
                if (left := ranks.get(token[:j])) is not None and (right := ranks.get(token[j:])) is not None
            )
            if not splits:
                raise FormatError(self.path, None, f"vocab[{rank}] is no merge of two ranked tokens")
            merges += [f"{texts[left]} {texts[right]}" for left, right in splits]
        return merges

    def chat_template(self) -> str:
        """The template llama.cpp's converter writes for a tekken tokenizer of this version."""
        if self.version in _TEMPLATE_NAMES:
            return _TEMPLATE_NAMES[self.version]
        if self.version in _TEMPLATE_FILES:
            return resources.files(__package__).joinpath("data", _TEMPLATE_FILES[self.version]).read_text("utf-8")
        raise UnsupportedError(f"{self.path}: llama.cpp's converter has no chat template for a tekken "
                               f"{self.version} tokenizer")  # fmt: skip


def write_tekken_vocab(kv: KV, folder: Path) -> None:
    """`TextModel._set_vocab_mistral` for tekken.json: model, pre-tokenizer, merges, the special ids, tokens with
    zero scores (written as INT32, as the reference's int zeros are), the vocabulary size again, BOS added and
    EOS not, and the version's chat template."""
    tekken = Tekken(folder / TEKKEN_JSON)
    template = tekken.chat_template()
    tokens = tekken.tokens()
    types = np.full(len(tokens), TokenType.NORMAL, dtype=np.int32)
    types[: len(tekken.specials)] = TokenType.CONTROL
    kv.string("tokenizer.ggml.model", "gpt2")
    kv.string("tokenizer.ggml.pre", "tekken")
    kv.strings("tokenizer.ggml.merges", tekken.merges())
    for key, text in (("bos", "<s>"), ("eos", "</s>"), ("unknown", "<unk>"), ("padding", "<pad>")):
        kv.u32(f"tokenizer.ggml.{key}_token_id", tekken.special_ids[text])
    kv.strings("tokenizer.ggml.tokens", tokens)
    kv.int32s("tokenizer.ggml.scores", np.zeros(len(tokens), dtype=np.int32))
    kv.int32s("tokenizer.ggml.token_type", types)
    kv.u32(f"{kv.architecture}.vocab_size", len(tokens))
    kv.bool("tokenizer.ggml.add_bos_token", True)
    kv.bool("tokenizer.ggml.add_eos_token", False)
    kv.string("tokenizer.chat_template", template)
