"""The `general.*` keys: name, organization, license, base models, sampling defaults, size label.

llama.cpp's converter derives them (gguf-py's `metadata.py`) from, in order of precedence, the model card's
YAML front matter (README.md), config.json's `_name_or_path`, and the folder's name, split into basename,
size, fine-tune and version by a set of heuristics; sampling defaults come from generation_config.json.
The same rules are applied here, so the folder's name matters: `Llama-3-8B-Instruct` gives
`general.basename = "Llama-3"`, `general.finetune = "Instruct"` and, when the parameter count agrees,
`general.size_label = "8B"`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import FormatError, UnsupportedError
from .config import read_json
from .kv import KV

# (model card key, Metadata field), in the order the converter tries them; a field keeps the first value found
_CARD_FIELDS = (
    ("name", "name"), ("author", "author"), ("version", "version"), ("organization", "organization"),
    ("description", "description"), ("finetune", "finetune"), ("basename", "basename"),
    ("size_label", "size_label"), ("url", "source_url"), ("doi", "source_doi"), ("uuid", "source_uuid"),
    ("repo_url", "source_repo_url"),
    ("model_name", "name"), ("model_author", "author"), ("model_version", "version"),
    ("model_organization", "organization"), ("model_description", "description"),
    ("model_finetune", "finetune"), ("model_basename", "basename"), ("model_size_label", "size_label"),
    ("model_url", "source_url"), ("model_doi", "source_doi"), ("model_uuid", "source_uuid"),
    ("model_repo_url", "source_repo_url"),
    ("model_name", "name"), ("model_creator", "author"), ("model_type", "basename"),
)  # fmt: skip

# (generation_config.json key, GGUF key suffix, GGUF type)
_SAMPLING = (
    ("sequence", "sequence", "string"), ("top_k", "top_k", "i32"), ("top_p", "top_p", "f32"),
    ("min_p", "min_p", "f32"), ("xtc_probability", "xtc_probability", "f32"),
    ("xtc_threshold", "xtc_threshold", "f32"), ("temperature", "temp", "f32"),
    ("penalty_last_n", "penalty_last_n", "i32"), ("penalty_repeat", "penalty_repeat", "f32"),
    ("mirostat", "mirostat", "i32"), ("mirostat_tau", "mirostat_tau", "f32"),
    ("mirostat_eta", "mirostat_eta", "f32"),
)  # fmt: skip

# Written in this order after general.name, each when set: (field, GGUF key).
_AUTHORSHIP = (
    ("author", "author"), ("version", "version"), ("organization", "organization"), ("finetune", "finetune"),
    ("basename", "basename"), ("description", "description"), ("size_label", "size_label"),
)  # fmt: skip
_SOURCES = (
    ("license_name", "license.name"), ("license_link", "license.link"), ("source_url", "source.url"),
    ("source_doi", "source.doi"), ("source_uuid", "source.uuid"), ("source_repo_url", "source.repo_url"),
)  # fmt: skip
_ENTRY_FIELDS = ("name", "author", "version", "organization", "description", "url", "doi", "uuid", "repo_url")
_HF_URL = re.compile(r"https?://huggingface.co/([^/]+/[^/]+)$")


@dataclass
class Metadata:
    """What the heuristics found; None means "not found" (and is not written)."""

    name: Any = None
    author: Any = None
    version: Any = None
    organization: Any = None
    finetune: Any = None
    basename: Any = None
    description: Any = None
    size_label: Any = None
    source_url: Any = None
    source_doi: Any = None
    source_uuid: Any = None
    source_repo_url: Any = None
    license: Any = None
    license_name: Any = None
    license_link: Any = None
    base_models: list[Any] | None = None
    datasets: list[Any] | None = None
    tags: list[Any] | None = None
    languages: list[Any] | None = None
    sampling: dict[str, Any] = field(default_factory=dict)

    def fill(self, **values: Any) -> None:
        """Set each field that is still None to its value, when that is not None."""
        for key, value in values.items():
            if getattr(self, key) is None and value is not None:
                setattr(self, key, value)


def read_model_card(folder: Path) -> dict[str, Any]:
    """README.md's YAML front matter (PyYAML's safe_load, after the converter's two text patches), or {}."""
    path = folder / "README.md"
    if not path.is_file():
        return {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise FormatError(path, e.start, "not UTF-8 text") from None
    if not lines or lines[0] != "---":
        return {}
    body: list[str] = []
    for line in lines[1:]:
        if line == "---":
            break
        body.append(line)
    text = ("\n".join(body) + "\n").replace("- no\n", '- "no"\n').replace("\t", "  ")  # Norway; tabs
    try:
        import yaml
    except ImportError:
        raise UnsupportedError(f"{path}: reading the model card needs PyYAML: pip install weightkit[convert]") from None
    try:
        card = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise FormatError(path, None, f"the YAML front matter does not parse ({mark or e})") from None
    return card if isinstance(card, dict) else {}


def read_generation_config(folder: Path) -> dict[str, Any]:
    """generation_config.json, or {} when absent or not JSON (as the converter treats it)."""
    path = folder / "generation_config.json"
    if not path.is_file():
        return {}
    try:
        config = read_json(path, "generation_config.json")
    except FormatError:
        return {}
    if not isinstance(config, dict):
        raise FormatError(path, 0, "generation_config.json is not a JSON object")
    return config


def id_to_title(text: str) -> str:
    """`Metadata.id_to_title`: words in lower case get a capital, unless they are versions or numbers."""
    return " ".join(
        w.title() if w.islower() and not re.match(r"^(v\d+(?:\.\d+)*|\d.*)$", w) else w
        for w in text.strip().replace("-", " ").split()
    )


@dataclass
class ModelId:
    """A model id (`org/Name-7B-Instruct-v0.2`) split by `Metadata.get_model_id_components`."""

    name: str | None = None
    organization: str | None = None
    basename: str | None = None
    finetune: str | None = None
    version: str | None = None
    size_label: str | None = None


def parse_model_id(model_id: str, total_params: int) -> ModelId:
    """The converter's heuristic: each dash-separated part is a version, a quantization type, a size (if it
    agrees with the parameter count, else it is a context length and part of the fine-tune), a known
    fine-tune word, or part of the basename (the leading words) or fine-tune (the rest)."""
    if " " in model_id:
        return ModelId(model_id)
    org, full = model_id.split("/", 1) if "/" in model_id else ("", model_id)
    organization = None if not org or org[0] == "." else org
    parts = [p for p in full.split("-") if p]
    types: list[set[str]] = [set() for _ in parts]
    for i, part in enumerate(parts):
        if re.fullmatch(r"(v|iter)?\d+([.]\d+)*", part, re.IGNORECASE):
            types[i].add("version")
        elif re.fullmatch(r"i?q\d(_\w)*|b?fp?(16|32)", part, re.IGNORECASE):
            types[i].add("type")
            parts[i] = part.upper()
        elif i > 0 and re.fullmatch(
            r"(([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl)", part, re.IGNORECASE
        ):
            parts[i] = _size_part(part, total_params, types[i])
        elif i > 0 and re.fullmatch(r"chat|instruct|vision|lora", part, re.IGNORECASE):
            types[i].add("type" if total_params < 0 and part.lower() == "lora" else "finetune")
    if any(c.isdecimal() for n, t in zip(parts, types, strict=True) if "size_label" in t for c in n):
        for n, t in zip(parts, types, strict=True):
            if "size_label" in t and all(c.isalpha() for c in n):
                t.remove("size_label")
    at_start = True
    for part, t in zip(parts, types, strict=True):
        if at_start and ((not t and part[0].isalpha()) or "version" in t):
            t.add("basename")
        else:
            at_start = False
            if not t:
                t.add("finetune")
    for t in reversed(types):  # a trailing version is the version, not part of the basename
        if "basename" in t and len(t) > 1:
            t.remove("basename")
        else:
            break

    def joined(kind: str, exclude: str | None = None) -> str | None:
        chosen = [n for n, t in zip(parts, types, strict=True) if kind in t and exclude not in t]
        return "-".join(dict.fromkeys(chosen) if kind == "size_label" else chosen) or None

    result = ModelId(full, organization, joined("basename"), joined("finetune"), joined("version", "basename"),
                     joined("size_label"))  # fmt: skip
    if result.size_label is None and result.finetune is None and result.version is None:
        result.basename = None  # too ambiguous
    return result


def _size_part(part: str, total_params: int, kinds: set[str]) -> str:
    """A size-like name part, normalized (`7b1` -> `7.1B`); marked a fine-tune when far from the real size."""
    part = part.replace("_", ".")
    if part[-1].isdecimal():  # bloom's 7b1
        part = part[:-2] + "." + part[-1] + part[-2]
    if len(part) > 1 and part[-2].isdecimal() and part[-1] in "kmbt":
        part = part[:-1] + part[-1].upper()
    if total_params != 0:
        try:
            label = float(part[:-1]) * pow(1000, " KMBT".find(part[-1]))
        except ValueError:
            label = None
        if label is not None and (
            (total_params < 0 and label < abs(total_params) // 8)
            or (total_params > 0 and abs(label - total_params) > 7 * total_params // 8)
        ):
            kinds.add("finetune")  # likely a context length
            part = part[:-1] + part[-1].lower()
    if not kinds:
        kinds.add("size_label")
    return part


def _entries(values: list[Any], total_params: int) -> list[Any]:
    """Base models or datasets from the card: URLs, Hugging Face ids, or dicts taken as they are."""
    out: list[Any] = []
    for value in values:
        entry: dict[str, Any] = {}
        if isinstance(value, str):
            url = value.startswith(("http://", "https://", "ssh://"))
            match = _HF_URL.match(value) if url and "huggingface.co" in value else None
            if url:
                entry["repo_url"] = value
            if match or not url:
                parsed = parse_model_id(match.group(1) if match else value, total_params)
                if parsed.name is not None:
                    entry["name"] = id_to_title(parsed.name)
                if parsed.organization is not None:
                    entry["organization"] = id_to_title(parsed.organization)
                if parsed.version is not None:
                    entry["version"] = parsed.version
                if not url and parsed.organization is not None and parsed.name is not None:
                    entry["repo_url"] = f"https://huggingface.co/{parsed.organization}/{parsed.name}"
        elif isinstance(value, dict):
            entry = value
        out.append(entry)  # anything else is an empty entry, as the converter makes it
    return out


def _card_list(card: dict[str, Any], *keys: str) -> list[Any]:
    """The first of `keys` present in the card, as a list (a string alone is one item)."""
    value = next((card[k] for k in keys if k in card), None)
    return [value] if isinstance(value, str) else list(value) if isinstance(value, list) else []


def derive_metadata(folder: Path, raw_config: dict[str, Any], total_params: int,
                    fallback_name: str | None = None) -> Metadata:  # fmt: skip
    """`Metadata.load` with no override file and no --model-name, then the converter's fallbacks: the name is
    `fallback_name` (the LoRA converter's base folder) or the folder's where nothing gave one."""
    card = read_model_card(folder)
    m = Metadata()
    for card_key, name in _CARD_FIELDS:
        if card_key in card:
            m.fill(**{name: card[card_key]})
    for keys, attr in ((("base_model", "base_models", "base_model_sources"), "base_models"),
                       (("datasets", "dataset", "dataset_sources"), "datasets")):  # fmt: skip
        if any(k in card for k in keys):
            setattr(m, attr, _entries(_card_list(card, *keys), total_params))
    for card_key in ("license", "license_name", "license_link"):
        if card_key in card:
            m.fill(**{card_key: card[card_key]})
    for attr, keys in (("tags", ("tags", "pipeline_tag")), ("languages", ("languages", "language"))):
        for key in keys:
            value = card.get(key)
            if isinstance(value, (str, list)):
                setattr(m, attr, (getattr(m, attr) or []) + _card_list(card, key))
            elif value is not None:
                setattr(m, attr, getattr(m, attr) or [])
    name_or_path = raw_config.get("_name_or_path")
    ids = [name_or_path] if isinstance(name_or_path, str) and name_or_path.count("/") <= 1 else []
    for model_id in [*ids, folder.name]:
        p = parse_model_id(model_id, total_params)
        m.fill(name=p.name and id_to_title(p.name), organization=p.organization and id_to_title(p.organization),
               basename=p.basename, finetune=p.finetune, version=p.version, size_label=p.size_label)  # fmt: skip
    generation = read_generation_config(folder)
    for key, gguf_key, kind in _SAMPLING:
        value = generation.get("repetition_penalty") if key == "penalty_repeat" else None
        value = generation.get(key, value)
        if value is not None:
            m.sampling[gguf_key] = (kind, value)
    m.fill(name=fallback_name or folder.name)
    return m


def size_label(total: int, shared: int, expert: int, expert_count: int) -> str:
    """gguf-py's `size_label`: "23M", "8.0B", or "8x7.2B" for mixtures of experts."""
    return f"{expert_count}x{_rounded(abs(shared) + abs(expert))}" if expert_count > 0 else _rounded(abs(total))


def _rounded(n: int) -> str:
    steps = ((1e12, 1e-12, "T"), (1e9, 1e-9, "B"), (1e6, 1e-6, "M"), (-float("inf"), 1e-3, "K"))
    scale, suffix = next((scale, suffix) for limit, scale, suffix in steps if n > limit)
    x = n * scale
    fix = max(2 - len(str(round(x)).lstrip("0")), 0)
    return f"{x:.{fix}f}{suffix}"


def write_metadata(kv: KV, m: Metadata, sources: tuple[Path, Path]) -> None:
    """`Metadata.set_gguf_meta_model`: sampling, authorship, license, sources, base models, datasets, tags,
    languages. `sources` (README.md, generation_config.json) name the file in errors."""
    card, generation = sources
    for gguf_key, (kind, value) in m.sampling.items():
        key = f"general.sampling.{gguf_key}"
        _typed(kv, key, kind, value, generation)
    _typed(kv, "general.name", "string", m.name, card)
    for attr, key in _AUTHORSHIP:
        if getattr(m, attr) is not None:
            _typed(kv, f"general.{key}", "string", getattr(m, attr), card)
    if m.license is not None:
        value = m.license
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        _typed(kv, "general.license", "string", value, card)
    for attr, key in _SOURCES:
        if getattr(m, attr) is not None:
            _typed(kv, f"general.{key}", "string", getattr(m, attr), card)
    for entries, prefix in ((m.base_models, "base_model"), (m.datasets, "dataset")):
        if entries is None:
            continue
        kv.u32(f"general.{prefix}.count", len(entries))
        for i, entry in enumerate(entries):
            for name in _ENTRY_FIELDS:
                if name in entry:
                    _typed(kv, f"general.{prefix}.{i}.{name}", "string", entry[name], card)
    for attr, key in (("tags", "general.tags"), ("languages", "general.languages")):
        if getattr(m, attr) is not None:
            kv.array(key, getattr(m, attr), str(card))


def _typed(kv: KV, key: str, kind: str, value: Any, source: Path) -> None:
    """One value of the type gguf-py's writer method gives it, or a FormatError naming the file."""
    if kind == "string" and not value:
        return  # gguf-py's add_string writes nothing for an empty value
    if not isinstance(value, str if kind == "string" else int if kind == "i32" else (int, float)):
        raise FormatError(source, None, f"{key}: {value!r} is not a {'string' if kind == 'string' else 'number'}")
    getattr(kv, kind)(key, value)
