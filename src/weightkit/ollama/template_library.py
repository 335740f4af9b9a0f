"""Ollama's template library (its template/ folder, bundled in `data/` with its license): the Go templates and
stop parameters Ollama stores for a GGUF imported without a TEMPLATE, chosen by the library's `template.Named`,
which finds the Jinja template in index.json nearest to the GGUF's `tokenizer.chat_template` by edit distance."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass
from importlib import resources

import numpy as np

from .modelfile import go_json

# template.Named's threshold: the nearest Jinja template is used only below this edit distance.
MATCH_DISTANCE = 100
# The length from which agnivade/levenshtein's uint16 cells can wrap (a cell reaches 65,535, plus one is 0).
GO_ROW_LIMIT = 65535


# A byte that is not UTF-8, as the GGUF reader keeps it (surrogateescape), and as Go's []rune reads it.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


@dataclass(frozen=True)
class LibraryTemplate:
    """One entry of index.json: its `name`, the Jinja `jinja` it is matched by, the Go template's bytes and
    the params layer Ollama writes beside it (None where the library has no <name>.json)."""

    name: str
    jinja: str
    template: bytes
    params: bytes | None


@functools.cache
def library() -> tuple[LibraryTemplate, ...]:
    """index.json's entries in its order (a name may appear under several Jinja templates)."""
    data = resources.files(__package__).joinpath("data")
    entries = []
    for entry in json.loads(data.joinpath("index.json").read_bytes()):
        name = entry["name"]
        template = data.joinpath(f"{name}.gotmpl").read_bytes().replace(b"\r\n", b"\n")
        params_file = data.joinpath(f"{name}.json")
        params = None
        if params_file.is_file():  # decoded into a struct holding only `stop`, encoded by json.Encoder
            stop = json.loads(params_file.read_bytes()).get("stop")
            params = (go_json({"stop": stop}) + "\n").encode()
        entries.append(LibraryTemplate(name, entry["template"], template, params))
    return tuple(entries)


def library_name(digest: str) -> str | None:
    """The library template whose bytes have this layer digest ("sha256:..."), if one has: what Ollama's
    create reports as "using autodetected template NAME"."""
    return next((e.name for e in library() if "sha256:" + hashlib.sha256(e.template).hexdigest() == digest), None)


def edit_distance(a: str, b: str, limit: int) -> int:
    """The Levenshtein distance between two strings' code points (agnivade/levenshtein's ComputeDistance),
    exact below `limit`; `limit` when it is at least that. Myers' bit-parallel algorithm (Hyyrö's form for
    the global distance): one column of the table is two bit vectors (Python ints) of vertical +1/-1 steps,
    a character of `b` a few integer operations. Go's cells are uint16s: where a string reaches
    `GO_ROW_LIMIT` code points its sums wrap, and `_go_wrapped_distance` is used."""
    if a == b:
        return 0
    if max(len(a), len(b)) >= GO_ROW_LIMIT:
        return min(_go_wrapped_distance(a, b), limit)
    if not a or not b or abs(len(a) - len(b)) >= limit:
        return min(max(len(a), len(b)), limit)
    masks: dict[str, int] = {}
    for i, ch in enumerate(a):
        masks[ch] = masks.get(ch, 0) | 1 << i
    full, top = (1 << len(a)) - 1, 1 << (len(a) - 1)
    up, down, score = full, 0, len(a)  # vertical +1 and -1 steps of the column, its last cell
    for k, ch in enumerate(b):
        eq = masks.get(ch, 0)
        xv = eq | down
        xh = (((eq & up) + up) ^ up) | eq
        right_up = down | (full & ~(xh | up))
        right_down = up & xh
        score += 1 if right_up & top else -1 if right_down & top else 0
        right_up = (right_up << 1 | 1) & full
        right_down = (right_down << 1) & full
        up = right_down | (full & ~(xv | right_up))
        down = right_up & xv
        if score - (len(b) - k - 1) >= limit:  # each character left lowers it by one at most
            return limit
    return min(score, limit)


def _codes(s: str) -> np.ndarray:
    return np.frombuffer(s.encode("utf-32-le", "surrogatepass"), "<u4")


def _go_wrapped_distance(a: str, b: str) -> int:
    """ComputeDistance in its uint16 arithmetic (each +1 wraps at 65,536), for strings long enough to wrap: the
    table by anti-diagonals (a cell needs the two before), each one vectorized over the whole short side (cells
    off the table are computed too, and no cell on it reads them) in three rotating rows and their values plus
    one, in place. Slow (a second for each library template), and only for chat templates of 65,535 code
    points or more."""
    short, long = (_codes(a), _codes(b)) if len(a) <= len(b) else (_codes(b), _codes(a))
    n, rows = len(short), len(long)
    pad = np.zeros(n, np.uint32)
    backwards = np.concatenate([pad, long, pad])[::-1].copy()  # diagonal d's code points of `long`: a slice
    size = len(backwards)
    cells = np.zeros((3, n + 1), np.uint16)  # diagonal d in row d % 3, by the short side's index
    cells[1, :2] = 1  # diagonal 1: (1, 0) and (0, 1)
    plus_one = cells + np.uint16(1)
    same = np.empty(n, bool)
    views = [(c, c[1:], c[:-1], p, p[1:], p[:-1]) for c, p in zip(cells, plus_one, strict=True)]
    for d in range(2, rows + n + 1):
        cur, inner, _, cur_plus_one, _, _ = views[d % 3]
        _, _, diag, _, _, diag_plus_one = views[(d - 2) % 3]
        _, _, _, _, up_plus_one, left_plus_one = views[(d - 1) % 3]
        np.minimum(diag_plus_one, left_plus_one, out=inner)
        np.minimum(inner, up_plus_one, out=inner)
        np.equal(short, backwards[size - d - n + 1 : size - d + 1], out=same)
        np.copyto(inner, diag, where=same)
        if d <= rows:
            cur[0] = d & 0xFFFF
        if d <= n:
            cur[d] = d & 0xFFFF
        np.add(cur, np.uint16(1), out=cur_plus_one)
    return int(cells[(rows + n) % 3, n])


def _lower_bound(a: str, counts: Counter, b: str) -> int:
    """A lower bound of the distance between `a` (whose `counts` these are) and `b`: the length difference,
    and the surplus characters of either side (an edit removes at most one from each side). None holds where
    Go's cells wrap."""
    if max(len(a), len(b)) >= GO_ROW_LIMIT:
        return 0
    other = Counter(b)
    return max(abs(len(a) - len(b)), (counts - other).total(), (other - counts).total())


def match_template(chat_template: str) -> LibraryTemplate | None:
    """template.Named: the first library entry at the least edit distance from `chat_template`, if that
    distance is below `MATCH_DISTANCE`; None otherwise (Ollama then stores no template). Entries are tried
    by their lower bounds, so the least distance is found early and the far entries are never computed."""
    entries, counts = library(), Counter(chat_template)
    bounds = sorted((_lower_bound(chat_template, counts, e.jinja), i) for i, e in enumerate(entries))
    score, distances = MATCH_DISTANCE, {}
    for bound, i in bounds:
        if bound > score:
            break
        distances[i] = edit_distance(chat_template, entries[i].jinja, score + 1)  # exact up to a tie
        score = min(score, distances[i])
    if score >= MATCH_DISTANCE:
        return None
    return entries[min(i for i, d in distances.items() if d == score)]


def detect_template(metadata: dict) -> LibraryTemplate | None:
    """detectChatTemplate's choice for a GGUF's metadata: `match_template` of its `tokenizer.chat_template`
    (a string only, each byte that is not UTF-8 read as U+FFFD, as Go does)."""
    chat_template = metadata.get("tokenizer.chat_template")
    if not isinstance(chat_template, str) or not chat_template:
        return None
    return match_template(_ESCAPED_BYTE.sub("\ufffd", chat_template))
