"""Special tokens, merges, the chat template and normalizer flags, as gguf-py's `SpecialVocab` finds them.

The order of the keys written depends on the order they are found in, which is part of the algorithm:
tokenizer.json's post-processor decides `add_bos`/`add_eos`/`add_sep` before tokenizer_config.json's flags;
token ids come from tokenizer_config.json (looked up among tokenizer.json's added tokens) before config.json's
`*_token_id`, and the first found wins.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from string import ascii_letters, digits
from typing import Any

from ....errors import FormatError
from ..config import CONFIG_NAME, read_json_object
from ..kv import KV
from .fast import TOKENIZER_CONFIG, TOKENIZER_JSON

DEFAULT_TYPES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")
_ID_KEYS = {
    "bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "sep": "seperator_token_id",
    "pad": "padding_token_id", "mask": "mask_token_id", "eot": "eot_token_id", "eom": "eom_token_id",
}  # fmt: skip
_ADD_FLAGS = ("bos", "eos", "sep")  # the add_*_token flags GGUF has keys for


@dataclass
class SpecialVocab:
    """What was found; `ids` and `add` keep the order of discovery."""

    merges: list[str] = field(default_factory=list)
    ids: dict[str, int] = field(default_factory=dict)
    add: dict[str, bool] = field(default_factory=dict)
    chat_template: str | list[Any] | None = None
    lowercase: bool | None = None
    strip_accents: bool | None = None


class _Loader:
    def __init__(self, folder: Path, load_merges: bool, n_vocab: int | None, types: tuple[str, ...]) -> None:
        self.folder = folder
        self.load_merges = load_merges
        self.n_vocab = n_vocab
        self.types = types
        self.found = SpecialVocab()

    def set_id(self, typ: str, value: Any) -> None:
        """`_set_special_token`: ints only (lists are ignored), in range, the first one found wins."""
        if not isinstance(value, int):
            return
        if value < 0:
            raise FormatError(self.folder, None, f"special token {typ} has the negative id {value}")
        if (self.n_vocab is None or value < self.n_vocab) and typ not in self.found.ids:
            self.found.ids[typ] = value

    def normalizer(self, spec: Any) -> None:
        if not isinstance(spec, dict):
            return
        kind = spec.get("type")
        if kind == "Lowercase":
            self.found.lowercase = True
        elif kind == "StripAccents":
            self.found.strip_accents = True
        elif kind == "BertNormalizer":
            if "lowercase" in spec:
                self.found.lowercase = spec["lowercase"]
            if "strip_accents" in spec:
                self.found.strip_accents = spec["strip_accents"]
        elif kind == "Sequence":
            for inner in spec.get("normalizers", []):
                self.normalizer(inner)

    def merges(self, model: Any, path: Path) -> None:
        merges = model.get("merges") if isinstance(model, dict) else None
        if not isinstance(merges, list) or not merges:
            return
        if isinstance(merges[0], str):
            self.found.merges = merges
        elif isinstance(merges[0], list) and len(merges[0]) == 2 and isinstance(merges[0][0], str):
            try:  # the pair form (transformers >= 4.45): spaces inside a part become U+0120 (where there are any)
                if " " in "".join(itertools.chain.from_iterable(merges)):
                    self.found.merges = [" ".join([p.replace(" ", "\u0120") for p in pair]) for pair in merges]
                else:
                    self.found.merges = [" ".join(pair) for pair in merges]
            except (TypeError, AttributeError):
                raise FormatError(path, None, "model.merges mixes strings and pairs") from None
        else:
            raise FormatError(path, None, "model.merges is neither a list of strings nor of pairs")

    def from_tokenizer_files(self) -> None:
        tokenizer_path = self.folder / TOKENIZER_JSON
        tokenizer: dict[str, Any] | None = None
        added: list[Any] = []
        if tokenizer_path.is_file():
            tokenizer = read_json_object(tokenizer_path, "tokenizer.json", shared=True)
            if self.load_merges:
                self.merges(tokenizer.get("model", {}), tokenizer_path)
            if tokenizer.get("normalizer"):
                self.normalizer(tokenizer["normalizer"])
            added = tokenizer.get("added_tokens") or []
        config_path = self.folder / TOKENIZER_CONFIG
        config = read_json_object(config_path, "tokenizer_config.json") if config_path.is_file() else None
        if tokenizer:
            self.post_processor(tokenizer.get("post_processor"), config)
        if not config:
            return
        self.chat_template(config, config_path)
        for typ in self.types:
            flag = config.get(f"add_{typ}_token")
            if isinstance(flag, bool) and typ not in self.add:
                self.add[typ] = flag
            entry = config.get(f"{typ}_token")
            content = entry.get("content") if isinstance(entry, dict) else entry
            if isinstance(content, str):
                self.set_id(typ, next((t.get("id") for t in added if t.get("content") == content), None))

    @property
    def add(self) -> dict[str, bool]:
        return self.found.add

    def post_processor(self, post: Any, config: dict[str, Any] | None) -> None:
        """The add_* flags (and sometimes bos/eos/eot names) from tokenizer.json's post-processor."""
        tc = config or {}
        bos, cls, eos, sep = (tc.get(k) for k in ("bos_token", "cls_token", "eos_token", "sep_token"))
        if not bos and cls and config:
            config["bos_token"] = bos = cls
        if not eos and sep and config:
            config["eos_token"] = eos = sep
        if not post:
            return
        for proc in post.get("processors", [post]):
            kind = proc.get("type")
            if kind == "ByteLevel":
                self.add.setdefault("bos", False)
                self.add.setdefault("eos", False)
            elif kind == "RobertaProcessing":
                self.add.update(bos=True, eos=True, sep=True)
                if not cls and config:
                    config["cls_token"] = cls = proc.get("cls", [bos])[0]
                if not sep and config:
                    config["sep_token"] = sep = proc.get("sep", [eos])[0]
            elif kind == "TemplateProcessing":
                bos, cls, eos, sep = self.template(proc, config, bos, cls, eos, sep)

    def template(self, proc: dict[str, Any], config: dict[str, Any] | None, bos: Any, cls: Any, eos: Any,
                 sep: Any) -> tuple[Any, Any, Any, Any]:  # fmt: skip
        """The converter's crude reading of a TemplateProcessing: leading BOS/CLS, trailing EOS, separators."""
        single, pair = proc.get("single", []), proc.get("pair", [])
        first = last = None
        if len(single) > 1:
            if first := single[0].get("SpecialToken", {}).get("id"):
                if not config:
                    bos = first
                elif first not in (bos, cls):
                    if not bos:
                        config["bos_token"] = bos = first
                    if not cls:
                        config["cls_token"] = cls = first
                self.add["bos"] = first in (bos, cls)
            if last := single[-1].get("SpecialToken", {}).get("id"):
                if not config:
                    eos = last
                elif last != eos:
                    for extra in ("eot", "eom"):
                        if extra not in self.types:
                            self.types = (*self.types, extra)
                            config[f"{extra}_token"] = eos
                            break
                    config["eos_token"] = eos = last
                self.add["eos"] = last == eos
        if pair:
            start = 1 if first and pair[0].get("SpecialToken", {}).get("id") == first else 0
            stop = -1 if last and pair[-1].get("SpecialToken", {}).get("id") == last else None
            middle = pair[slice(start, stop)]
            if middle:
                a, b = middle[0].get("Sequence", {}).get("id"), middle[-1].get("Sequence", {}).get("id")
                if a == "A" and b == "B" and (middle := middle[1:-1]):
                    add_sep = False
                    entry = middle[0].get("SpecialToken", {}).get("id")
                    if entry and entry in (sep, eos) and not last:
                        add_sep = True
                    if len(middle) == 2:
                        entry = middle[1].get("SpecialToken", {}).get("id")
                        if entry and entry in (sep, eos):
                            add_sep = True
                    self.add["sep"] = add_sep
                    if add_sep and not sep and config:
                        config["sep_token"] = eos
        return bos, cls, eos, sep

    def chat_template(self, config: dict[str, Any], config_path: Path) -> None:
        """tokenizer_config's template, else chat_template.jinja (+ additional_chat_templates/), else
        chat_template.json's."""
        alternative: str | list[Any] | None = None
        jinja = self.folder / "chat_template.jinja"
        if jinja.is_file():
            alternative = _read_text(jinja)
            extra = sorted((self.folder / "additional_chat_templates").glob("*.jinja"))
            if extra:
                alternative = [{"name": "default", "template": alternative}]
                alternative += [{"name": p.stem, "template": _read_text(p)} for p in extra]
        elif (self.folder / "chat_template.json").is_file():
            alternative = read_json_object(self.folder / "chat_template.json", "chat_template.json").get(
                "chat_template"
            )
        template = config.get("chat_template", alternative)
        if template is None or isinstance(template, (str, list)):
            self.found.chat_template = template

    def from_config_json(self) -> None:
        path = self.folder / CONFIG_NAME
        if not path.is_file():
            return
        config = read_json_object(path, "config.json")
        text = config.get("text_config")
        for typ in self.types:
            value = config.get(f"{typ}_token_id")
            if value is None and isinstance(text, dict):
                value = text.get(f"{typ}_token_id")
            self.set_id(typ, value)

    def from_merges_txt(self) -> None:
        path = self.folder / "merges.txt"
        if not path.is_file():
            return
        lines = _read_text(path).splitlines()
        if lines and lines[0].strip().startswith("#"):
            lines = lines[1:]
        merges = []
        for line in lines:
            parts = line.strip().split(None, 3)
            if len(parts) == 2:
                merges.append(f"{parts[0]} {parts[1]}")
        self.found.merges = merges


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(path, e.start, "not UTF-8 text") from None


def load_special_vocab(folder: Path, *, load_merges: bool, n_vocab: int | None = None,
                       types: tuple[str, ...] = DEFAULT_TYPES, fallback_ids: Mapping[str, int] | None = None
                       ) -> SpecialVocab:  # fmt: skip
    """`gguf.SpecialVocab(folder, load_merges, types, n_vocab)`, then `_set_special_token` for each of
    `fallback_ids` (ids the files did not give)."""
    loader = _Loader(folder, load_merges, n_vocab, types)
    loader.from_tokenizer_files()
    loader.from_config_json()
    if load_merges and not loader.found.merges:
        loader.from_merges_txt()
    for typ, token_id in (fallback_ids or {}).items():
        loader.set_id(typ, token_id)
    return loader.found


def write_special_vocab(kv: KV, special: SpecialVocab, source: Path) -> None:
    """`SpecialVocab.add_to_gguf`: merges, token ids, add_* flags, chat template(s), normalizer flags."""
    kv.strings("tokenizer.ggml.merges", special.merges)
    for typ, token_id in special.ids.items():
        if typ in _ID_KEYS:  # the others (cls, ...) have no GGUF key; the converter skips them too
            kv.u32(f"tokenizer.ggml.{_ID_KEYS[typ]}", token_id)
    for typ, value in special.add.items():
        if typ in _ADD_FLAGS:
            kv.bool(f"tokenizer.ggml.add_{typ}_token", value)
    _write_chat_template(kv, special.chat_template, source)
    if special.lowercase is not None:
        kv.bool("tokenizer.ggml.normalizer.lowercase", special.lowercase)
    if special.strip_accents is not None:
        kv.bool("tokenizer.ggml.normalizer.strip_accents", special.strip_accents)


def _write_chat_template(kv: KV, template: str | list[Any] | None, source: Path) -> None:
    """`add_chat_template`: a string, or named templates (`default` is the main one)."""
    if template is None:
        kv.remove("tokenizer.chat_template")
        return
    if isinstance(template, list):
        default = None
        names: list[str] = []
        for choice in template:
            if not isinstance(choice, dict):
                raise FormatError(source, None, f"chat template entry {choice!r} is not a mapping")
            name = "".join(c if c in ascii_letters + digits else "_" for c in choice.get("name", ""))
            text = choice.get("template")
            if name and text is not None:
                if name == "default":
                    default = text
                else:
                    names.append(name)
                    kv.string(f"tokenizer.chat_template.{name}", text)
        kv.strings("tokenizer.chat_templates", list(dict.fromkeys(names)))
        if default is None:
            return
        template = default
    kv.string("tokenizer.chat_template", template)
