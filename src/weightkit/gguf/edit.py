"""Change a GGUF file's metadata without decoding its tensors: the tensor bytes are copied as they are.

The file written is the one gguf-py's `gguf_new_metadata.py` writes for the same edits: `general.architecture`
first, the other keys in their order with changed ones in place, a new chat template after them (every
`tokenizer.chat_template*` key it replaces dropped), then the new keys in the order given.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from ..errors import ArgumentError
from .constants import KEY_ARCHITECTURE, KEY_TOKENS, GGUFValueType
from .file import GGUFFile
from .values import Value, infer
from .writer import GGUFWriter, plan_tensor

_T = GGUFValueType

KEY_CHAT_TEMPLATE = "tokenizer.chat_template"

#: gguf_new_metadata.py's `--special-token` names, each setting `tokenizer.ggml.<name>_token_id` (gguf-py's
#: `Keys.Tokenizer`), as a UINT32.
SPECIAL_TOKENS = (
    "bos", "eos", "eot", "eom", "unknown", "seperator", "padding", "mask", "fim_pre", "fim_suf", "fim_mid",
    "fim_pad", "fim_rep", "fim_sep", "prefix", "suffix", "middle",
)  # fmt: skip

#: The value types `--set KEY=VALUE:TYPE` names, by their GGUF names in lower case.
TEXT_TYPES = {t.name.lower(): t for t in _T if t != _T.ARRAY}
_TRUE, _FALSE = ("true", "1"), ("false", "0")


class TextValue(NamedTuple):
    """A value as a command line gives it, `KEY=VALUE[:TYPE]`: read as `type`, else as the type the key has
    in the file, else as a STRING."""

    text: str
    type: GGUFValueType | None = None


def parse_assignment(text: str) -> tuple[str, TextValue]:
    """`--set KEY=VALUE[:TYPE]`: a suffix that is not one of `TEXT_TYPES` belongs to the value (a URL's port)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ArgumentError(f"--set {text!r}: give KEY=VALUE or KEY=VALUE:TYPE")
    body, colon, suffix = value.rpartition(":")
    if colon and suffix.lower() in TEXT_TYPES:
        return key, TextValue(body, TEXT_TYPES[suffix.lower()])
    return key, TextValue(value)


def _from_text(key: str, given: TextValue, current: Value | None) -> Value:
    """A `TextValue` as the typed value of `key`."""
    t = given.type or (current.type if current is not None else _T.STRING)
    if t == _T.ARRAY:
        raise ArgumentError(f"--set {key}: the key holds an array; --set sets single values")
    text = given.text.strip()
    try:
        if t == _T.STRING:
            return Value(given.text, t)
        if t == _T.BOOL:
            if text.lower() not in _TRUE + _FALSE:
                raise ValueError(text)
            return Value(text.lower() in _TRUE, t)
        return infer(float(text) if t in (_T.FLOAT32, _T.FLOAT64) else int(text), t, key)
    except ValueError as e:
        if isinstance(e, ArgumentError):
            raise
        raise ArgumentError(f"--set {key}={given.text!r}: not a {t.name} value") from None


def special_token_key(name: str) -> str:
    """The key a `--special-token` NAME sets."""
    return f"tokenizer.ggml.{name}_token_id"


def special_token_ids(old: GGUFFile, tokens: Iterable[tuple[str, str]]) -> dict[str, Value]:
    """`--special-token NAME TOKEN`: the key of each NAME (`SPECIAL_TOKENS`) set to the first id of TOKEN in
    the vocabulary, as gguf_new_metadata.py sets it (it ignores an unknown NAME; that is refused here)."""
    vocabulary = old.metadata.get(KEY_TOKENS) or []
    ids = {}
    for name, token in tokens:
        if name not in SPECIAL_TOKENS:
            raise ArgumentError(f"--special-token {name!r}: not one of {', '.join(SPECIAL_TOKENS)}")
        try:
            found = list(vocabulary).index(token)
        except ValueError:
            reason = f"{old.path} has no such token in {KEY_TOKENS}"
            raise ArgumentError(f"--special-token {name} {token!r}: {reason}") from None
        ids[special_token_key(name)] = Value(found, _T.UINT32)
    return ids


def edited_metadata(
    old: GGUFFile,
    set: Mapping[str, Any],
    remove: Iterable[str],
    *,
    chat_template: str | None = None,
    special_tokens: Iterable[tuple[str, str]] = (),
) -> dict[str, Value]:
    """`old`'s typed metadata with keys removed and set, in gguf_new_metadata.py's order (see the module); a
    key that exists keeps its GGUF type unless a `Value` or a `TextValue` with a type says otherwise, and every
    key not set keeps the very bytes the file holds (see `GGUFFile.value_bytes`)."""
    values = {
        key: dataclasses.replace(value, encoded=(old.byte_order, old.value_bytes(key)))
        for key, value in old.metadata.typed_items()
    }
    if KEY_ARCHITECTURE in values:
        values = {KEY_ARCHITECTURE: values.pop(KEY_ARCHITECTURE)} | values
    for key in remove:
        if key not in values:
            raise ArgumentError(f"{old.path}: no metadata key {key!r} to remove")
        del values[key]
    if chat_template is not None:
        values = {key: value for key, value in values.items() if not key.startswith(KEY_CHAT_TEMPLATE)}
        values[KEY_CHAT_TEMPLATE] = Value(chat_template, _T.STRING)
    for key, value in {**set, **special_token_ids(old, special_tokens)}.items():
        current = values.get(key)
        if isinstance(value, TextValue):
            values[key] = _from_text(key, value, current)
        else:
            keep = current is not None and not isinstance(value, Value)
            values[key] = infer(value, current.type if keep else None, key)
    return values


def edit_gguf(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    set: Mapping[str, Any] | None = None,
    remove: Iterable[str] = (),
    chat_template: str | None = None,
    special_tokens: Iterable[tuple[str, str]] = (),
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Value]:
    """Write `path` again (to `out`, or in place) with metadata keys set or removed, a chat template, special
    token ids (see `edited_metadata`); untouched keys are copied byte for byte. Returns the new metadata.

    Tensor data is streamed from the mapped file (`progress(done, total, name)` told of each tensor's bytes as
    they are written); the write is atomic, so editing in place is safe.
    """
    with GGUFFile(path) as old:
        values = edited_metadata(old, set or {}, remove, chat_template=chat_template, special_tokens=special_tokens)
        total = sum(info.nbytes for info in old.tensors.values())
        done = 0

        def data(name: str):
            nonlocal done
            done += old.tensors[name].nbytes
            if progress is not None:
                progress(done, total, name)
            return old.raw(name)

        with GGUFWriter(out if out is not None else path, values, byte_order=old.byte_order) as w:
            for name, info in old.tensors.items():
                w.add_planned(plan_tensor(name, info.shape, info.dtype, functools.partial(data, name)))
    return values
