"""Turning library objects into text and JSON for people and scripts."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from ..gguf.values import Value
from ..model import ModelFile

PREVIEW_ITEMS = 6
PREVIEW_CHARS = 60
#: Output to a pipe or file is laid out this wide (rich's default is 80), so a table keeps one row a line; a
#: terminal's own width, or $COLUMNS, wins.
PIPE_WIDTH = 160
#: Where the commands print their answers.
console = Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else PIPE_WIDTH)


def remote_json(model: ModelFile) -> dict[str, Any] | None:
    """What reading a remote model cost, for `--json`: bytes fetched, requests, and the model's file size."""
    if model.remote is None:
        return None
    client = model.remote
    return {"bytes_fetched": client.bytes_fetched, "requests": client.requests, "file_size": model.file_size}


def remote_note(model: ModelFile) -> str | None:
    """The same for people: "fetched 6.8 MiB of 241.4 MiB (2.8%) in 5 requests"."""
    doc = remote_json(model)
    if doc is None:
        return None
    share = 100 * doc["bytes_fetched"] / doc["file_size"] if doc["file_size"] else 0
    return (
        f"fetched {human_bytes(doc['bytes_fetched'])} of {human_bytes(doc['file_size'])} ({share:.1f}%) "
        f"in {doc['requests']} requests"
    )


def print_json(doc: Any) -> None:
    """A command's `--json` answer: the document alone on stdout, so scripts can parse it; `json.dump(doc,
    indent=1)`'s text, written once."""
    sys.stdout.write(_indented_json(doc, 0) + "\n")


def _indented_json(v: Any, depth: int) -> str:
    """`json.dumps(v, indent=1)` for a value `depth` containers deep, byte for byte, with each list of plain
    values encoded by json's C encoder in one call (json's `indent` takes its pure-Python encoder: seconds
    over a vocabulary's quarter million tokens and scores)."""
    inner, outer = " " * (depth + 1), " " * depth
    if isinstance(v, dict) and v:
        items = (f"{inner}{json.dumps(k if isinstance(k, str) else json.dumps(k))}: {_indented_json(x, depth + 1)}"
                 for k, x in v.items())  # fmt: skip
        return "{\n" + ",\n".join(items) + "\n" + outer + "}"
    if isinstance(v, (list, tuple)) and v:
        if any(issubclass(t, (dict, list, tuple)) for t in set(map(type, v))):
            return "[\n" + ",\n".join(inner + _indented_json(x, depth + 1) for x in v) + "\n" + outer + "]"
        return "[\n" + inner + json.dumps(v, separators=(",\n" + inner, ": "))[1:-1] + "\n" + outer + "]"
    return json.dumps(v)


@contextlib.contextmanager
def byte_progress(label: str, console: Console, as_json: bool) -> Iterator[Callable[..., None]]:
    """A transient bar of bytes done for long work; yields `update(done, total, description="")`. With
    `--json` it draws on stderr, so stdout holds the JSON answer alone; it draws nothing where its stream is
    not a terminal (a pipe, a log file)."""
    columns = (
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
    )
    target = Console(stderr=True) if as_json else console
    with Progress(*columns, console=target, transient=True, disable=not target.is_terminal) as bar:
        task = bar.add_task("", total=None)

        def update(done: int, total: int, description: str = "") -> None:
            bar.update(task, completed=done, total=total, description=description)

        yield update


def human_bytes(n: int | float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def human_count(n: int) -> str:
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.2f} {unit}"
    return str(n)


def printable(s: str) -> str:
    """A string safe for any terminal: undecodable bytes and control characters shown escaped."""
    s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s)


def _short(s: str) -> str:
    s = printable(s)
    return s if len(s) <= PREVIEW_CHARS else s[: PREVIEW_CHARS - 1] + "…"


def type_label(value: Value) -> str:
    if value.element is None:
        return value.type.name.lower()
    return f"{value.element.name.lower()}[{len(value.value)}]"


def preview(value: Value) -> str:
    """One line for a metadata value; long arrays and strings are cut short."""
    if value.element is None:
        return repr(_short(value.value)) if isinstance(value.value, str) else _scalar(value.value)
    items = value.value
    shown = [preview(v) if isinstance(v, Value) else _item(v) for v in items[:PREVIEW_ITEMS]]
    more = f", … ({len(items) - PREVIEW_ITEMS} more)" if len(items) > PREVIEW_ITEMS else ""
    return "[" + ", ".join(shown) + more + "]"


def _item(v: Any) -> str:
    return repr(_short(v)) if isinstance(v, str) else _scalar(v)


def _scalar(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    return str(v)


#: The types `json_value` returns unchanged.
_JSON_AS_IS = frozenset({str, int, bool, type(None)})


def json_value(v: Any) -> Any:
    """A value JSON can hold: arrays become lists; NaN and infinities become the strings JSON lacks."""
    if isinstance(v, Value):
        return json_value(v.plain())
    if isinstance(v, np.ndarray):
        if v.dtype.kind == "f" and not np.isfinite(v).all():
            return [json_value(float(x)) for x in v]
        return v.tolist()
    if isinstance(v, list):
        if set(map(type, v)) <= _JSON_AS_IS:  # a vocabulary's strings: no call for each
            return list(v)
        return [json_value(x) for x in v]
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return f
    if isinstance(v, np.generic):
        return v.item()
    return v
