"""Ollama's Modelfile: the grammar of its parser (parser/parser.go, a rune-by-rune state machine, ported
with its quirks and its error messages), the request `ollama create` builds from it (`CreateRequest`:
FROM, DRAFT, ADAPTER, TEMPLATE, SYSTEM, LICENSE, MESSAGE, RENDERER, PARSER, REQUIRES and the typed
PARAMETERs of api.FormatParams), the JSON bytes of the params and messages layers as Go writes them, and
the Modelfile `ollama show --modelfile` prints back."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError
from .names import ModelName, parse_name
from .store import MEDIA, Store

# api.Options' fields (with its Runner's) by their JSON names: what PARAMETER accepts and the Go kind each
# value is parsed as (FormatParams: strconv.ParseInt, ParseFloat(.., 32), ParseBool, or a list of strings).
INT, FLOAT, BOOL, STRINGS = "int", "float", "bool", "strings"
PARAMETER_KINDS = {
    "num_ctx": INT, "num_batch": INT, "num_gpu": INT, "main_gpu": INT, "use_mmap": BOOL, "num_thread": INT,
    "draft_num_predict": INT, "num_keep": INT, "seed": INT, "num_predict": INT, "top_k": INT, "top_p": FLOAT,
    "min_p": FLOAT, "typical_p": FLOAT, "repeat_last_n": INT, "temperature": FLOAT, "repeat_penalty": FLOAT,
    "presence_penalty": FLOAT, "frequency_penalty": FLOAT, "stop": STRINGS,
}  # fmt: skip
# Parameters Ollama warns about and drops (parser.go's deprecatedParameters).
DEPRECATED_PARAMETERS = ("penalize_newline", "low_vram", "f16_kv", "logits_all", "vocab_only", "use_mlock",
                         "mirostat", "mirostat_tau", "mirostat_eta")  # fmt: skip
COMMANDS = ("from", "license", "template", "system", "adapter", "draft", "renderer", "parser", "parameter",
            "message", "requires")  # fmt: skip
MESSAGE_ROLES = ("system", "user", "assistant")

ERR_INVALID_COMMAND = ('command must be one of "from", "license", "template", "system", "adapter", "draft", '
                       '"renderer", "parser", "parameter", "message", or "requires"')  # fmt: skip
ERR_INVALID_ROLE = 'message role must be one of "system", "user", or "assistant"'
ERR_UNEXPECTED_EOF = "unexpected EOF"
ERR_MISSING_FROM = "no FROM line"


class ModelfileError(FormatError):
    """A Modelfile Ollama's parser rejects; `reason` is Ollama's own message."""


@dataclass(frozen=True)
class Command:
    """One command: `name` is "model" for FROM, the lower-cased keyword, or a PARAMETER's name."""

    name: str
    args: str

    def __str__(self) -> str:
        if self.name == "model":
            return f"FROM {self.args}"
        if self.name in ("license", "template", "system", "adapter", "renderer", "parser", "requires", "draft"):
            return f"{self.name.upper()} {_quote(self.args)}"
        if self.name == "message":
            role, _, message = self.args.partition(": ")
            return f"MESSAGE {role} {_quote(message)}"
        return f"PARAMETER {self.name} {_quote(self.args)}"


@dataclass(frozen=True)
class Modelfile:
    commands: tuple[Command, ...]

    def __str__(self) -> str:
        return "".join(f"{c}\n" for c in self.commands)


def _quote(s: str) -> str:
    if "\n" in s or s.startswith(" ") or s.endswith(" "):
        return f'"""{s}"""' if '"' in s else f'"{s}"'
    return s


def _unquote(s: str) -> tuple[str, bool]:
    if s[:3] == '"""':
        return (s[3:-3], True) if len(s) >= 6 and s.endswith('"""') else ("", False)
    if s[:1] == '"':
        return (s[1:-1], True) if len(s) >= 2 and s.endswith('"') else ("", False)
    return s, True


# Go's unicode.IsSpace, which strings.TrimSpace trims.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"  # noqa: E501


def _is_print(ch: str) -> bool:
    """Go's strconv.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space."""
    return ch == " " or (ch.isprintable() and not ch.isspace())


def _decode(data: bytes) -> str:
    """The text as the parser reads it: unicode.BOMOverride (a UTF-16 BOM decodes UTF-16, a UTF-8 BOM is
    dropped), else UTF-8 with each invalid byte a U+FFFD."""
    if data[:2] == b"\xfe\xff":
        return data[2:].decode("utf-16-be", "replace")
    if data[:2] == b"\xff\xfe":
        return data[2:].decode("utf-16-le", "replace")
    if data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    return data.decode("utf-8", "replace")


_NIL, _NAME, _VALUE, _PARAMETER, _MESSAGE, _COMMENT = range(6)


def _next_state(ch: str, state: int) -> tuple[int, str, str | None]:
    """parseRuneForState: the next state, the rune to keep ("" for none) and an error."""
    alpha = ch.isascii() and ch.isalpha()
    space = ch in " \t"
    newline = ch in "\r\n"
    if state == _NIL:
        if ch == "#":
            return _COMMENT, "", None
        return (_NIL, "", None) if space or newline else (_NAME, ch, None)
    if state == _NAME:
        if alpha:
            return _NAME, ch, None
        return (_VALUE, "", None) if space else (_NIL, "", ERR_INVALID_COMMAND)
    if state == _VALUE:
        return (_NIL, ch, None) if newline or space else (_VALUE, ch, None)
    if state == _PARAMETER:
        if alpha or ch in "0123456789_":
            return _PARAMETER, ch, None
        return (_VALUE, "", None) if space else (_NIL, "", ERR_UNEXPECTED_EOF)
    if state == _MESSAGE:
        if alpha:
            return _MESSAGE, ch, None
        return (_VALUE, "", None) if space else (_NIL, "", ERR_UNEXPECTED_EOF)
    return (_NIL, "", None) if newline else (_COMMENT, "", None)


def parse_modelfile(data: bytes | str, path: str | os.PathLike[str] | None = None) -> Modelfile:
    """Parse a Modelfile as Ollama's parser.ParseFile does; a rejected one raises `ModelfileError` with
    Ollama's message (its "(line N): " prefix included)."""
    text = data if isinstance(data, str) else _decode(data)
    commands: list[Command] = []
    name = role = ""
    state, line, buf = _NIL, 1, []

    def fail(reason: str, at_line: int | None = None) -> ModelfileError:
        return ModelfileError(path, None, reason if at_line is None else f"(line {at_line}): {reason}")

    for ch in text:
        if ch in "\r\n":
            line += 1
        nxt, kept, err = _next_state(ch, state)
        if err == ERR_UNEXPECTED_EOF:
            raise fail(f"{ERR_UNEXPECTED_EOF}: {''.join(buf)}")
        if err is not None:
            raise fail(err, line)
        ch = kept
        if nxt != state:
            word = "".join(buf)
            if state == _NAME:
                if word.lower() not in COMMANDS:
                    raise fail(ERR_INVALID_COMMAND, line)
                keyword = word.lower()
                if keyword == "from":
                    name = "model"
                elif keyword == "parameter":
                    nxt = _PARAMETER
                else:
                    name = keyword
                    if keyword == "message":
                        nxt = _MESSAGE
            elif state == _PARAMETER:
                name = word
            elif state == _MESSAGE:
                if word not in MESSAGE_ROLES:
                    raise fail(ERR_INVALID_ROLE, line)
                role = word
            elif state == _VALUE:
                value, ok = _unquote(word.strip(_GO_SPACE))
                if not ok or ch in " \t":
                    buf.append(ch)
                    continue
                if role:
                    value, role = f"{role}: {value}", ""
                commands.append(Command(name, value))
            buf = []
            state = nxt
        if ch and _is_print(ch):
            buf.append(ch)

    if state == _VALUE:
        value, ok = _unquote("".join(buf).strip(_GO_SPACE))
        if not ok:
            raise fail(ERR_UNEXPECTED_EOF)
        commands.append(Command(name, f"{role}: {value}" if role else value))
    elif state not in (_NIL, _COMMENT):
        raise fail(ERR_UNEXPECTED_EOF)
    if not any(c.name == "model" for c in commands):
        raise fail(ERR_MISSING_FROM)
    return Modelfile(tuple(commands))


# --- the request ---------------------------------------------------------------------------------------


@dataclass
class CreateRequest:
    """What `ollama create` sends for a Modelfile (parser.Modelfile.CreateRequest): FROM is a local
    `path` (a GGUF file or a folder) when one exists, else a model `name`; parameters typed."""

    from_name: str = ""
    from_path: Path | None = None
    draft_path: Path | None = None
    adapter_path: Path | None = None
    template: str = ""
    system: str = ""
    licenses: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    messages: list[tuple[str, str]] = field(default_factory=list)
    renderer: str = ""
    parser: str = ""
    requires: str = ""
    warnings: list[str] = field(default_factory=list)
    modelfile: str | None = None  # where it was read from, for errors


def expand_path(arg: str, relative_dir: Path) -> Path:
    """parser.expandPath: absolute, `~` and `~user` expanded, else relative to the Modelfile's folder."""
    if arg.startswith(("/", "\\")):
        return Path(os.path.abspath(arg))
    if arg.startswith("~"):
        return Path(os.path.abspath(os.path.expanduser(arg)))
    return Path(os.path.abspath(relative_dir / arg))


_SEMVER = re.compile(
    r"v(0|[1-9]\d*)(\.(0|[1-9]\d*)(\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?)?)?"
)


def _valid_semver(v: str) -> bool:
    """golang.org/x/mod/semver.IsValid: vMAJOR[.MINOR[.PATCH[-PRE][+BUILD]]], numeric identifiers of the
    prerelease without leading zeros."""
    m = _SEMVER.fullmatch(v)
    if not m:
        return False
    pre = m.group(6)
    return not pre or all(not (p.isdigit() and len(p) > 1 and p[0] == "0") for p in pre[1:].split("."))


def create_request(
    modelfile: Modelfile, relative_dir: str | os.PathLike[str], path: str | None = None
) -> CreateRequest:
    """The request Ollama's client builds from a parsed Modelfile, its paths relative to `relative_dir`."""
    req = CreateRequest(modelfile=path)
    relative_dir = Path(relative_dir)
    for c in modelfile.commands:
        if c.name == "model":
            local = expand_path(c.args, relative_dir)
            if local.exists():
                if req.draft_path is not None and local.resolve() == req.draft_path.resolve():
                    raise ModelfileError(path, None, f"DRAFT must not reference the same local path as FROM: {local}")
                req.from_path = local
            else:
                req.from_name = c.args
        elif c.name in ("draft", "adapter"):
            local = expand_path(c.args, relative_dir)
            if not local.exists():
                raise ModelfileError(path, None, f"stat {local}: no such file or directory")
            if c.name == "draft":
                if req.from_path is not None and local.resolve() == req.from_path.resolve():
                    raise ModelfileError(path, None, f"DRAFT must not reference the same local path as FROM: {local}")
                req.draft_path = local
            else:
                req.adapter_path = local
        elif c.name in ("template", "system", "renderer", "parser"):
            setattr(req, c.name, c.args)
        elif c.name == "license":
            req.licenses.append(c.args)
        elif c.name == "requires":
            version = c.args if c.args.startswith("v") else "v" + c.args
            if not _valid_semver(version):
                raise ModelfileError(path, None, "requires must be a valid semver (e.g. 0.14.0)")
            req.requires = version[1:]
        elif c.name == "message":
            role, _, content = c.args.partition(": ")
            req.messages.append((role, content))
        elif c.name in DEPRECATED_PARAMETERS:
            req.warnings.append(f"warning: parameter {c.name} is deprecated")
        else:
            value = parameter_value(c.name, c.args, path)
            if isinstance(value, list) and isinstance(req.parameters.get(c.name), list):
                req.parameters[c.name] += value
            else:
                req.parameters[c.name] = value
    return req


_GO_INT = re.compile(r"[+-]?[0-9]+")
_GO_FLOAT = re.compile(r"[+-]?([0-9_]+\.?[0-9_]*|\.[0-9_]+)([eE][+-]?[0-9_]+)?|[+-]?(inf|infinity|nan)", re.I)


def parameter_value(name: str, text: str, path: str | None = None) -> Any:
    """One PARAMETER as api.FormatParams types it: an int, a float32 (a numpy float32), a bool or a list."""
    kind = PARAMETER_KINDS.get(name)
    if kind is None:
        raise ModelfileError(path, None, f"unknown parameter '{name}'")
    if kind == STRINGS:
        return [text]
    if kind == BOOL:
        if text in ("1", "t", "T", "TRUE", "true", "True"):
            return True
        if text in ("0", "f", "F", "FALSE", "false", "False"):
            return False
    elif kind == INT:
        if _GO_INT.fullmatch(text) and -(2**63) <= int(text) < 2**63:
            return int(text)
    else:
        value = _go_parse_float32(text)
        if value is not None:
            return value
    raise ModelfileError(path, None, f"invalid {kind} value [{text}]")


def _go_parse_float32(text: str) -> np.float32 | None:
    """strconv.ParseFloat(text, 32): decimal or hexadecimal, inf and nan; None where Go errs (out of range
    included)."""
    try:
        if re.fullmatch(r"[+-]?0[xX][0-9a-fA-F_.]*[pP][+-]?[0-9]+", text):
            value = float.fromhex(text.replace("_", ""))
        elif _GO_FLOAT.fullmatch(text):
            value = float(text)  # Python's underscores between digits are Go's
        else:
            return None
    except (ValueError, OverflowError):
        return None
    with np.errstate(over="ignore"):
        f32 = np.float32(value)
    if math.isinf(f32) and not math.isinf(value):
        return None
    return f32


# --- Go's JSON -----------------------------------------------------------------------------------------

_GO_HTML_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def go_json(value: Any) -> str:
    """A JSON value (strings, lists, dicts, bools, ints) as Go's encoding/json writes it: compact, HTML-safe
    escaping, non-ASCII as is. Keys stay in the order given (Go sorts a map's; a struct has its own)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in _GO_HTML_ESCAPES:
        text = text.replace(raw, escaped)
    return text


def go_json_float(value: float, bits: int = 64) -> str:
    """A float as encoding/json writes a float32 or float64: shortest digits, 'e' form below 1e-6 or from
    1e21 up, its exponent without a leading zero."""
    if not math.isfinite(value):
        raise ValueError(f"json: unsupported value: {'NaN' if math.isnan(value) else '+Inf' if value > 0 else '-Inf'}")
    f = np.float32(value) if bits == 32 else np.float64(value)
    a = abs(float(f))
    if a != 0 and (a < 1e-6 or a >= 1e21):
        text = np.format_float_scientific(f, unique=True, trim="-", exp_digits=1)
        return text
    return np.format_float_positional(f, unique=True, trim="-")


def _json_value(v: Any, through_server: bool) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ",".join(go_json(s) for s in v) + "]"
    if isinstance(v, str):
        return go_json(v)
    if isinstance(v, np.float32):
        text = go_json_float(float(v), 32)  # the client's json.Marshal of a float32
        return go_json_float(float(text)) if through_server else text
    if isinstance(v, int):
        return go_json_float(float(v)) if through_server else str(v)
    return go_json_float(float(v))  # a number read back from a params layer: Go decodes it as a float64


def params_json(parameters: dict[str, Any], *, through_server: bool = True) -> bytes:
    """The params layer: the typed parameters as json.Encoder writes the map (keys sorted, a newline
    after). `through_server`: the server's path, whose values went through JSON to the server and back
    as float64s (ints included); x/create's client encodes its typed values directly."""
    items = ",".join(f"{go_json(k)}:{_json_value(parameters[k], through_server)}" for k in sorted(parameters))
    return ("{" + items + "}\n").encode()


def messages_json(messages: list[tuple[str, str]]) -> bytes:
    """The messages layer: []api.Message as json.Encoder writes it."""
    items = ",".join(f'{{"role":{go_json(r)},"content":{go_json(c)}}}' for r, c in messages)
    return ("[" + items + "]\n").encode()


# --- ollama show --modelfile ---------------------------------------------------------------------------


def go_format_value(v: Any) -> str:
    """fmt's %v of a value decoded from JSON: float64s as %g with shortest digits (the exponent form when
    the decimal exponent is below -4 or from 6 up), bools and strings as they are."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        f = float(v)
        if f == 0 or -4 <= int(np.format_float_scientific(np.float64(f), unique=True).partition("e")[2]) < 6:
            return np.format_float_positional(np.float64(f), unique=True, trim="-")
        mantissa, _, exp = np.format_float_scientific(np.float64(f), unique=True, trim="-").partition("e")
        return f"{mantissa}e{exp[0]}{int(exp[1:]):02d}"
    return str(v)


def stored_modelfile(store: Store, name: ModelName | str) -> str:
    """What `ollama show NAME --modelfile` prints (server/images.go's Model.String under routes.go's
    header): FROM the model blob's path (or, for a safetensors model, the model's name), its adapters,
    draft and projectors, the TEMPLATE ("{{ .Prompt }}" when it has none), SYSTEM, RENDERER, PARSER, the
    PARAMETERs as fmt's %v prints what Go decoded (in key order: Go's own order is a map's, random),
    each LICENSE and MESSAGE."""
    name = parse_name(name) if isinstance(name, str) else name
    manifest = store.manifest(name)
    config = json.loads(store.blob_path(manifest.config.digest).read_bytes()) if manifest.config.digest else {}
    model_path, template, system = "", "{{ .Prompt }}", ""
    adapters, projectors, licenses, draft = [], [], [], ""
    options: dict[str, Any] = {}
    messages: list[dict] = []
    for layer in manifest.layers:
        blob = store.blob_path(layer.digest)
        kind = layer.media_type.removeprefix(MEDIA)
        if kind == "model":
            model_path = str(blob)
        elif kind == "draft":
            draft = str(blob)
        elif kind == "adapter":
            adapters.append(str(blob))
        elif kind == "projector":
            projectors.append(str(blob))
        elif kind in ("prompt", "template"):
            template = blob.read_text("utf-8", "replace")
        elif kind == "system":
            system = blob.read_text("utf-8", "replace")
        elif kind == "params":
            options = json.loads(blob.read_bytes())
        elif kind == "messages":
            messages = json.loads(blob.read_bytes())
        elif kind == "license":
            licenses.append(blob.read_text("utf-8", "replace"))
    commands = [Command("model", model_path), *(Command("adapter", a) for a in adapters)]
    commands += [Command("draft", draft)] if draft else []
    commands += [Command("model", p) for p in projectors]
    commands.append(Command("template", template))
    commands += [Command("system", system)] if system else []
    commands += [Command(k, config[k]) for k in ("renderer", "parser") if config.get(k)]
    for key in sorted(options):
        values = options[key] if isinstance(options[key], list) else [options[key]]
        commands += [Command(key, go_format_value(v)) for v in values]
    commands += [Command("license", text) for text in licenses]
    commands += [Command("message", f"{m.get('role', '')}: {m.get('content', '')}") for m in messages]
    body = str(Modelfile(tuple(commands)))
    header = '# Modelfile generated by "ollama show"\n'
    if config.get("model_format") == "safetensors":
        return f"{header}FROM {name.short}\n{body.partition(chr(10))[2]}"
    return f"{header}# To build a new Modelfile based on this, replace FROM with:\n# FROM {name.short}\n\n{body}"
