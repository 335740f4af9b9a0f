"""A checkpoint's config.json as llama.cpp's converter sees it.

The converter reads its hyperparameters through transformers' `AutoConfig` (pinned at 4.57.6), not from the
raw file: keys the file leaves out get the config class's defaults, and some values are derived (Llama's
`head_dim`, the key-value head count, the labels' integer keys). Those defaults change what is written
(`llama.attention.key_length` appears for a Llama-2 config that has no `head_dim`; `rope.freq_base` is written
when the file has no `rope_theta`), so they are reproduced: a `ConfigClass` per `model_type`, declared by its
family (`convert.families`), applied here.

A config saved by transformers 5.x (its `transformers_version`) is read as 5.x reads it: 5.x's `save_pretrained`
writes every value of its config class (`rope_parameters`, `dtype`, Qwen3-MoE's `num_local_experts`,
`layer_types`, ...) and its `AutoConfig` gives them back unchanged, so a class mirroring 4.57.6 is not applied to
it (only the bookkeeping every 5.x config carries is added); a class mirroring 5.x (`ConfigClass.transformers`,
the families new in 5.x) is applied to every config of its type, save a config saved by 4.x where 4.57.6 had its
own class for the type (`ConfigClass.before_5`: Qwen2.5-VL's and Qwen3-VL's, as published).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import FormatError, UnsupportedError

CONFIG_NAME = "config.json"
#: Mistral's own config file (its format, the converter's `--mistral-format`), which the converter reads as written
PARAMS_JSON = "params.json"
_MISSING = object()


class HFConfig(dict):
    """A checkpoint's config.json as the converter reads it (its hparams: merged with `text_config`, with
    transformers' defaults): a dict with the converter's "first of these keys present" lookup, and the
    converter's block count where a conversion adds blocks to the config's layers (`Conversion.blocks`)."""

    block_count: int | None = None

    def find(self, keys: Iterable[str], default: Any = _MISSING) -> Any:
        """The value of the first key present (even if None); `default` if none is, else a KeyError."""
        for key in keys:
            if key in self:
                return self[key]
        if default is _MISSING:
            raise KeyError(f"none of {tuple(keys)} in config.json")
        return default


@dataclass(frozen=True)
class ConfigClass:
    """One transformers config class: its constructor's defaults (those the converter can read) and the
    values it derives, applied in order after the file's values; a composite config names the `model_type`
    whose class makes its `text_config`, and its `vision_config`'s when that names none."""

    name: str
    defaults: Mapping[str, Any]
    derive: tuple[Callable[[dict[str, Any]], None], ...] = field(default=())
    text_config: str | None = None
    vision_config: str | None = None
    transformers: int = 4  # the major version whose class this mirrors (4: 4.57.6; 5: 5.25, for 5.x's families)
    #: where this class mirrors 5.x and 4.57.6 had its own for the model_type: that class, which reads a config
    #: saved by 4.x (as published: Qwen2.5-VL's text keys at the top level, its "mrope" rope type)
    before_5: ConfigClass | None = None


#: Sizes the converter computes with: when given, each must be a positive integer.
_SIZES = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
          "head_dim", "vocab_size", "max_position_embeddings", "type_vocab_size", "moe_intermediate_size")  # fmt: skip
#: Expert counts: when given, each must be an integer, 0 in a dense model of a family with experts (Granite 4.0-H
#: Micro); a mixture-of-experts class's tensors then do not have the shapes it implies.
_EXPERT_COUNTS = ("num_experts", "num_local_experts", "num_experts_per_tok")

#: What every config gets from `PretrainedConfig` (only what the converter can read).
_BASE_DEFAULTS = {"max_length": 20}
#: What a sub-config (`text_config`) saved by transformers 5.x gets from its `PretrainedConfig` when read (only
#: what the converter can read: merged into the top level, these replace the checkpoint's own).
_TF5_SUB_CONFIG = {"_name_or_path": "", "architectures": None, "dtype": None}


def saved_by_transformers_5(raw: Mapping[str, Any]) -> bool:
    """Whether config.json was written by transformers 5.x or later (its `transformers_version`)."""
    version = raw.get("transformers_version")
    major = version.split(".", 1)[0] if isinstance(version, str) else ""
    return major.isdigit() and int(major) >= 5


def read_json(path: Path, what: str) -> Any:
    """A JSON file, or a FormatError naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FormatError(path, None, f"no {what} here") from None
    except UnicodeDecodeError as e:
        raise FormatError(path, e.start, "not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(path, e.pos, f"not valid JSON ({e.msg})") from None
    except RecursionError:
        raise FormatError(path, None, "JSON nested too deeply") from None


def read_json_object(path: Path, what: str, *, shared: bool = False) -> dict[str, Any]:
    """A JSON file that must hold an object. `shared`: the caller only reads it, so within `parse_once` the file
    is parsed once and every such caller gets the same object (a tokenizer.json of 262k tokens takes a second)."""
    cache = _PARSED.get() if shared else None
    key = (str(path.resolve()), *_stat_key(path)) if cache is not None else None
    if cache is not None and key in cache:
        return cache[key]
    data = read_json(path, what)
    if not isinstance(data, dict):
        raise FormatError(path, 0, f"{what} is not a JSON object")
    if cache is not None:
        cache[key] = data
    return data


#: the files parsed for shared reading within `parse_once`, by path and state
_PARSED: ContextVar[dict[tuple, dict[str, Any]] | None] = ContextVar("weightkit_parsed_json", default=None)


def _stat_key(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


@contextmanager
def parse_once() -> Iterator[None]:
    """Within: a JSON file read with `shared=True` is parsed once (a conversion's tokenizer.json, read by several
    steps)."""
    token = _PARSED.set({})
    try:
        yield
    finally:
        _PARSED.reset(token)


def read_raw_config(folder: Path) -> dict[str, Any]:
    """config.json as written (the converter's metadata and special tokens read it this way)."""
    return read_json_object(folder / CONFIG_NAME, "config.json (not a Hugging Face checkpoint folder?)")


def load_config(folder: Path, classes: Mapping[str, ConfigClass]) -> HFConfig:
    """config.json as `AutoConfig.from_pretrained(folder).to_dict()` gives it (`classes`: transformers' config
    classes by `model_type`): the sub-configs nested, as a projector's converter reads it (its `global_config`)."""
    return HFConfig(_with_class_defaults(read_raw_config(folder), folder, classes))


def load_hparams(folder: Path, classes: Mapping[str, ConfigClass]) -> HFConfig:
    """`load_config`, with `text_config` merged into the top level as the converter's text models do."""
    hparams = load_config(folder, classes)
    text = hparams.get("text_config")
    if isinstance(text, dict):
        hparams = {**hparams, **text}
    return HFConfig(hparams)


def _with_class_defaults(raw: dict[str, Any], folder: Path, classes: Mapping[str, ConfigClass]) -> dict[str, Any]:
    model_type = raw.get("model_type")
    if model_type is None:
        raise UnsupportedError(
            f"{folder / CONFIG_NAME}: no 'model_type'; transformers would guess the config class from the folder's "
            "path, which weightkit does not"
        )
    tf5 = saved_by_transformers_5(raw)
    cls = _config_class(model_type, folder, classes, tf5)
    h = _apply_class(cls, json.loads(json.dumps(raw)), folder, tf5)  # a deep copy: derivations must not touch raw
    if cls.text_config is not None:  # the sub-config is made by its own class (and saved with its defaults)
        text = h.get("text_config") or {}
        if not isinstance(text, dict):
            raise FormatError(folder / CONFIG_NAME, None, "text_config is not an object")
        h["text_config"] = _apply_class(_config_class(cls.text_config, folder, classes, tf5), text, folder, tf5)
    if cls.vision_config is not None:  # made by the class of its own model_type (`AutoConfig`)
        vision = h.get("vision_config") or {}
        if not isinstance(vision, dict):
            raise FormatError(folder / CONFIG_NAME, None, "vision_config is not an object")
        kind = vision.get("model_type", cls.vision_config)
        if kind == model_type:  # 4.x saved Qwen-VL's vision config under its parent's model_type
            kind = cls.vision_config
        h["vision_config"] = _apply_class(_config_class(kind, folder, classes, tf5), vision, folder, tf5)
    if tf5 and isinstance(h.get("text_config"), dict):
        h["text_config"] = {**h["text_config"], **_TF5_SUB_CONFIG}
    h["id2label"] = _labels(raw, folder)
    h["_name_or_path"] = str(folder)
    return h


def _config_class(model_type: Any, folder: Path, classes: Mapping[str, ConfigClass], tf5: bool) -> ConfigClass:
    """The class of `model_type` in the transformers that saved the config (`tf5`: 5.x)."""
    cls = classes.get(model_type)
    if cls is None:
        known = ", ".join(sorted(classes))
        raise UnsupportedError(f"{folder / CONFIG_NAME}: model_type {model_type!r} is not supported (known: {known})")
    return cls if tf5 or cls.before_5 is None else cls.before_5


def positive_integer(h: HFConfig, key: str, folder: Path) -> int:
    """config.json's `key` as a size: a positive integer, else a FormatError naming the key."""
    value = h.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise FormatError(folder / CONFIG_NAME, None, f"{key} is {value!r}, not a positive integer")
    return value


def _apply_class(cls: ConfigClass, h: dict[str, Any], folder: Path, tf5: bool) -> dict[str, Any]:
    """The class's defaults under the given values, the sizes checked, then its derivations; a config saved by
    transformers 5.x (`tf5`) only has its sizes checked unless the class mirrors 5.x."""
    if tf5 and cls.transformers < 5:
        _check_sizes(h, folder)
        return h
    base = {} if tf5 else _BASE_DEFAULTS  # 5.x's PretrainedConfig has no max_length
    for key, value in (base | dict(cls.defaults)).items():
        h.setdefault(key, copy.deepcopy(value))  # a default dict (GPT-OSS's rope_scaling) is changed later
    _check_sizes(h, folder)
    try:
        for step in cls.derive:
            step(h)
    except FormatError as e:
        raise FormatError(folder / CONFIG_NAME, None, e.reason) from None
    return h


def _check_sizes(h: dict[str, Any], folder: Path) -> None:
    for key in _SIZES:
        if isinstance(value := h.get(key), list):  # one per layer (Gemma 3n's intermediate_size)
            for size in value:
                positive_integer(HFConfig({key: size}), key, folder)
        elif value is not None:
            positive_integer(h, key, folder)
    for key in _EXPERT_COUNTS:
        value = h.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise FormatError(folder / CONFIG_NAME, None, f"{key} is {value!r}, not a count of experts")


def _labels(raw: dict[str, Any], folder: Path) -> dict[int, Any]:
    """`PretrainedConfig`'s labels: the file's (keys made ints), or LABEL_i for `num_labels` (default 2)."""
    given = raw.get("id2label")
    if isinstance(given, dict):
        try:
            return {int(k): v for k, v in given.items()}
        except ValueError:
            raise FormatError(folder / CONFIG_NAME, None, "id2label has a key that is not an integer") from None
    n = raw.get("num_labels", 2)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise FormatError(folder / CONFIG_NAME, None, f"num_labels {n!r} is not a count")
    return {i: f"LABEL_{i}" for i in range(n)}
