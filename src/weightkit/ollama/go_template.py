"""A parse check of Go's text/template syntax, as Ollama runs it on a Modelfile's TEMPLATE (template.Parse:
missingkey=zero, its functions, then its Vars walk): the lexer and parser of text/template/parse, ported for
their verdicts and error messages only (no tree is kept). `check_template` raises `TemplateError` with Go's message."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import NoReturn

from ..errors import ArgumentError

# text/template's builtins, plus the functions Ollama's template package adds.
FUNCTIONS = frozenset(
    ("and", "call", "html", "index", "slice", "js", "len", "not", "or", "print", "printf", "println", "urlquery",
     "eq", "ge", "gt", "le", "lt", "ne", "json", "currentDate", "yesterdayDate", "toTypeScriptType")
)  # fmt: skip
KEYWORDS = ("block", "break", "continue", "define", "else", "end", "if", "range", "nil", "template", "with")

# item types (the keywords are their own names)
EOF, ERROR, TEXT, LEFT, RIGHT, SPACE, ASSIGN, DECLARE, PIPE, CHAR, LPAREN, RPAREN = (
    "EOF", "error", "text", "{{", "}}", "space", "=", ":=", "|", "char", "(", ")"
)  # fmt: skip
STRING, RAW, CHARCONST, NUMBER, COMPLEX, VARIABLE, FIELD, DOT, BOOL, IDENT = (
    "string", "raw", "charconst", "number", "complex", "variable", "field", "dot", "bool", "identifier"
)  # fmt: skip
_OPERANDS = (BOOL, CHARCONST, COMPLEX, DOT, FIELD, IDENT, NUMBER, "nil", RAW, STRING, VARIABLE, LPAREN)


class TemplateError(ArgumentError):
    """A template Go's text/template does not parse; the message is Go's (with Ollama's prefix)."""


@dataclass
class _Item:
    typ: str
    val: str
    line: int

    def __str__(self) -> str:
        if self.typ == EOF:
            return "EOF"
        if self.typ == ERROR:
            return self.val
        if self.typ in KEYWORDS or self.typ == DOT:  # "." is a keyword item in Go's lexer
            return f"<{self.val}>"
        if len(self.val) > 10:
            return _go_quote(self.val[:10]) + "..."
        return _go_quote(self.val)


def _go_quote(s: str) -> str:
    """strconv.Quote."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append("\\" + "abfnrtv"["\a\b\f\n\r\t\v".index(ch)])
        elif ch == " " or (ch.isprintable() and not ch.isspace()):
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _is_alnum(ch: str) -> bool:
    return ch == "_" or (ch != "" and (ch.isalpha() or unicodedata.category(ch) == "Nd"))


def _lex(src: str) -> list[_Item]:
    """text/template/parse's lexer with "{{" "}}" and comments dropped: every item up to EOF or an error."""
    items: list[_Item] = []
    pos, n, paren = 0, len(src), 0

    def line_at(i: int) -> int:
        return src.count("\n", 0, i) + 1

    def emit(typ: str, start: int, end: int) -> None:
        items.append(_Item(typ, src[start:end], line_at(start)))

    def error(msg: str, start: int) -> list[_Item]:
        items.append(_Item(ERROR, msg, line_at(start)))
        return items

    def at_right(i: int) -> tuple[bool, bool]:
        if src[i : i + 1] in (" ", "\t", "\r", "\n") and src[i + 1 : i + 2] == "-" and src.startswith("}}", i + 2):
            return True, True
        return src.startswith("}}", i), False

    def left_trim(i: int) -> int:
        while i < n and src[i] in " \t\r\n":
            i += 1
        return i

    def at_terminator(i: int) -> bool:
        ch = src[i : i + 1]
        return ch in ("", " ", "\t", "\r", "\n", ".", ",", "|", ":", ")", "(") or src.startswith("}}", i)

    while True:
        # lexText
        x = src.find("{{", pos)
        if x < 0:
            if pos < n:
                emit(TEXT, pos, n)
            items.append(_Item(EOF, "", line_at(n)))
            return items
        trim = src[x + 2 : x + 3] == "-" and src[x + 3 : x + 4] in (" ", "\t", "\r", "\n")
        end = x
        if trim:
            while end > pos and src[end - 1] in " \t\r\n":
                end -= 1
        if end > pos:
            emit(TEXT, pos, end)
        # lexLeftDelim
        start = x
        pos = x + 2 + (2 if trim else 0)
        if src.startswith("/*", pos):
            close = src.find("*/", pos + 2)
            if close < 0:
                return error("unclosed comment", start)
            pos = close + 2
            delim, trim_right = at_right(pos)
            if not delim:
                return error("comment ends before closing delimiter", start)
            pos += 2 + (2 if trim_right else 0)
            if trim_right:
                pos = left_trim(pos)
            continue
        items.append(_Item(LEFT, "{{", line_at(start)))
        paren = 0
        # lexInsideAction
        while True:
            delim, trim_right = at_right(pos)
            if delim:
                if paren:
                    return error("unclosed left paren", pos)
                pos += 2 + (2 if trim_right else 0)
                items.append(_Item(RIGHT, "}}", line_at(pos)))
                if trim_right:
                    pos = left_trim(pos)
                break
            start = pos
            if pos >= n:
                return error("unclosed action", start)
            ch = src[pos]
            pos += 1
            if ch in " \t\r\n":
                pos -= 1
                spaces = 0
                while pos < n and src[pos] in " \t\r\n":
                    pos += 1
                    spaces += 1
                if src[pos - 1 : pos + 2] in (" -}", "\t-}", "\r-}", "\n-}") and src.startswith("}}", pos + 1):
                    pos -= 1
                    if spaces == 1:
                        continue
                emit(SPACE, start, pos)
            elif ch == "=":
                emit(ASSIGN, start, pos)
            elif ch == ":":
                if src[pos : pos + 1] != "=":
                    return error("expected :=", start)
                pos += 1
                emit(DECLARE, start, pos)
            elif ch == "|":
                emit(PIPE, start, pos)
            elif ch in "\"'":
                while True:
                    c = src[pos : pos + 1]
                    pos += 1
                    if c == "\\":
                        c = src[pos : pos + 1]
                        pos += 1
                        if c not in ("", "\n"):
                            continue
                    if c in ("", "\n"):
                        what = "quoted string" if ch == '"' else "character constant"
                        return error(f"unterminated {what}", start)
                    if c == ch:
                        break
                emit(STRING if ch == '"' else CHARCONST, start, pos)
            elif ch == "`":
                close = src.find("`", pos)
                if close < 0:
                    return error("unterminated raw quoted string", start)
                pos = close + 1
                emit(RAW, start, pos)
            elif ch == "$" or (ch == "." and pos < n and not (src[pos].isascii() and src[pos].isdigit())):
                if at_terminator(pos):
                    emit(VARIABLE if ch == "$" else DOT, start, pos)
                    continue
                while pos < n and _is_alnum(src[pos]):
                    pos += 1
                if not at_terminator(pos):
                    return error(f"bad character {_go_rune(src[pos])}", start)
                emit(VARIABLE if ch == "$" else FIELD, start, pos)
            elif ch in "+-." or (ch.isascii() and ch.isdigit()):
                pos -= 1
                pos, ok = _scan_number(src, pos)
                typ = NUMBER
                if ok and src[pos : pos + 1] in ("+", "-"):
                    pos, ok = _scan_number(src, pos)
                    ok = ok and src[pos - 1] == "i"
                    typ = COMPLEX
                if not ok:
                    return error(f"bad number syntax: {_go_quote(src[start:pos])}", start)
                emit(typ, start, pos)
            elif _is_alnum(ch):
                while pos < n and _is_alnum(src[pos]):
                    pos += 1
                if not at_terminator(pos):
                    return error(f"bad character {_go_rune(src[pos])}", start)
                word = src[start:pos]
                typ = word if word in KEYWORDS else BOOL if word in ("true", "false") else IDENT
                emit(typ, start, pos)
            elif ch == "(":
                paren += 1
                emit(LPAREN, start, pos)
            elif ch == ")":  # emitted before the check, as the recorded Go does
                emit(RPAREN, start, pos)
                paren -= 1
                if paren < 0:
                    return error("unexpected right paren U+0029 ')'", start)
            elif ch.isascii() and ch.isprintable():
                emit(CHAR, start, pos)
            else:
                return error(f"unrecognized character in action: {_go_rune(ch)}", start)


def _go_rune(ch: str) -> str:
    """fmt's %#U."""
    code = f"U+{ord(ch):04X}"
    return f"{code} '{ch}'" if ch == " " or (ch.isprintable() and not ch.isspace()) else code


def _scan_number(src: str, pos: int) -> tuple[int, bool]:
    def accept(chars: str) -> bool:
        nonlocal pos
        if src[pos : pos + 1] and src[pos] in chars:
            pos += 1
            return True
        return False

    def run(chars: str) -> None:
        while accept(chars):
            pass

    accept("+-")
    digits = "0123456789_"
    if accept("0"):
        if accept("xX"):
            digits = "0123456789abcdefABCDEF_"
        elif accept("oO"):
            digits = "01234567_"
        elif accept("bB"):
            digits = "01_"
    run(digits)
    if accept("."):
        run(digits)
    if len(digits) == 11 and accept("eE"):
        accept("+-")
        run("0123456789_")
    if len(digits) == 23 and accept("pP"):
        accept("+-")
        run("0123456789_")
    accept("i")
    if pos < len(src) and _is_alnum(src[pos]):
        return pos + 1, False
    return pos, True


_GO_INT = re.compile(r"[+-]?(0[xX](_?[0-9a-fA-F])+|0[oO](_?[0-7])+|0[bB](_?[01])+|0(_?[0-7])*|[1-9](_?[0-9])*)")
_GO_FLOAT = re.compile(
    r"[+-]?(([0-9](_?[0-9])*\.?([0-9](_?[0-9])*)?|\.[0-9](_?[0-9])*)([eE][+-]?[0-9](_?[0-9])*)?"
    r"|0[xX](_?[0-9a-fA-F])*\.?([0-9a-fA-F](_?[0-9a-fA-F])*)?[pP][+-]?[0-9](_?[0-9])*)"
)


def _number_error(text: str, typ: str) -> str | None:
    """parse.newNumber's complaint about a literal, None where it takes it (an integer, a float or a
    complex number)."""
    if typ == CHARCONST:  # strconv.UnquoteChar of the body, which must be all of it
        body = text[1:-1]
        m = re.match(r"\\([abfnrtv\\']|[0-7]{3}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})|[^\\']", body)
        if not m or (m.group(0)[1:2] in tuple("01234567") and int(m.group(0)[1:], 8) > 255):
            return "invalid syntax"
        return None if m.end() == len(body) else f"malformed character constant: {text}"
    if _valid_number(text, typ):
        return None
    if not re.search(r"[.eEpP]", text) and _GO_FLOAT.fullmatch(text.removesuffix("i")):
        return f"integer overflow: {_go_quote(text)}"
    return f"illegal number syntax: {_go_quote(text)}"


def _valid_number(text: str, typ: str) -> bool:
    if typ == COMPLEX:  # fmt.Sscan of a complex128: two floats
        m = re.fullmatch(r"(.+?)([+-][^+-]*)i", text) or re.fullmatch(r"(.+?)((?<=[eEpP])?[+-].*)i", text)
        return bool(m) and all(_float_ok(p) for p in m.groups())
    if text.endswith("i"):  # an imaginary constant: its float
        return _float_ok(text[:-1])
    if _GO_INT.fullmatch(text):
        digits = text.lstrip("+-").replace("_", "")
        value = int(digits, 8) if re.fullmatch(r"0[0-7]+", digits) else int(digits, 0)
        return value < 2**64 if not text.startswith("-") else value <= 2**63
    if not re.search(r"[.eEpP]", text):
        return False  # integer-looking but no integer: Go's "integer overflow"
    return _float_ok(text)


def _float_ok(text: str) -> bool:
    """strconv.ParseFloat's syntax: decimal or hexadecimal (with its p exponent), underscores between digits."""
    if not _GO_FLOAT.fullmatch(text) or re.search(r"[0-9a-fA-F]", text) is None:
        return False
    return not (text.lstrip("+-")[:2] in ("0x", "0X") and "_" in text and text.lstrip("+-")[2:3] == ".")


class _Parser:
    """text/template/parse's Tree, for one parse: the same decisions, the same errors."""

    def __init__(self, items: list[_Item]) -> None:
        self.items, self.i = items, 0
        self.lexed = 0  # the furthest item read: Go's token[0], whose line errorf reports
        self.vars = ["$"]
        self.range_depth = 0
        self.action_line = 0
        self.defined: dict[str, bool] = {}  # tree name -> its root is non-empty
        self.bare_template = False  # a {{template "name"}} without a pipeline: Ollama's Vars refuses it

    # tokens: next / backup / peek over the item list; `last` is Go's token[0], the line of errorf
    def next(self) -> _Item:
        item = self.items[min(self.i, len(self.items) - 1)]
        self.lexed = max(self.lexed, min(self.i, len(self.items) - 1))
        self.i += 1
        return item

    def backup(self, k: int = 1) -> None:
        self.i -= k

    def peek(self) -> _Item:
        return self.items[min(self.i, len(self.items) - 1)]

    def next_non_space(self) -> _Item:
        tok = self.next()
        while tok.typ == SPACE:
            tok = self.next()
        return tok

    def peek_non_space(self) -> _Item:
        tok = self.next_non_space()
        self.backup()
        return tok

    def errorf(self, msg: str) -> NoReturn:
        raise TemplateError(f"template error: template: :{self.items[self.lexed].line}: {msg}")

    def unexpected(self, tok: _Item, context: str) -> NoReturn:
        if tok.typ == ERROR:
            extra = ""
            if self.action_line and self.action_line != tok.line:
                extra = f" in action started at :{self.action_line}"
                if tok.val.endswith(" action"):
                    extra = extra[len(" in action") :]
            self.errorf(f"{tok}{extra}")
        self.errorf(f"unexpected {tok} in {context}")

    def expect(self, typ: str, context: str) -> _Item:
        tok = self.next_non_space()
        if tok.typ != typ:
            self.unexpected(tok, context)
        return tok

    # the grammar
    def parse(self) -> None:
        nonempty = False
        while self.peek().typ != EOF:
            if self.peek().typ == LEFT:
                self.next()
                if self.next_non_space().typ == "define":
                    self.definition()
                    continue
                self.i = self._back_to_left()
            node = self.text_or_action()
            if node in ("end", "else"):
                self.errorf(f"unexpected {{{{{node}}}}}")
            nonempty = nonempty or node != "empty"
        self.add("", nonempty)

    def _back_to_left(self) -> int:
        i = self.i - 1
        while self.items[i].typ != LEFT:
            i -= 1
        return i

    def add(self, name: str, nonempty: bool) -> None:
        if self.defined.get(name) and nonempty:
            self.errorf(f"template: multiple definition of template {_go_quote(name)}")
        self.defined[name] = self.defined.get(name, False) or nonempty

    def definition(self) -> None:
        tok = self.next_non_space()
        if tok.typ not in (STRING, RAW):
            self.unexpected(tok, "define clause")
        name = self.unquote(tok)
        self.expect(RIGHT, "define clause")
        outer = (self.vars, self.range_depth)
        self.vars, self.range_depth = ["$"], 0
        nonempty, end = self.item_list()
        if end != "end":
            self.errorf(f"unexpected {{{{{end}}}}} in define clause")
        self.vars, self.range_depth = outer
        self.add(name, nonempty)

    def item_list(self) -> tuple[bool, str]:
        nonempty = False
        while self.peek_non_space().typ != EOF:
            node = self.text_or_action()
            if node in ("end", "else"):
                return nonempty, node
            nonempty = nonempty or node not in ("empty",)
        self.errorf("unexpected EOF")

    def text_or_action(self) -> str:
        tok = self.next_non_space()
        if tok.typ == TEXT:
            return "text"
        if tok.typ == LEFT:
            saved = self.action_line
            self.action_line = tok.line
            try:
                return self.action()
            finally:
                self.action_line = saved
        self.unexpected(tok, "input")
        return ""

    def action(self) -> str:
        tok = self.next_non_space()
        typ = tok.typ
        if typ == "block":
            self.block()
            return "template"
        if typ in ("break", "continue"):
            tok = self.next_non_space()
            if tok.typ != RIGHT:
                self.unexpected(tok, f"{{{{{typ}}}}}")
            if self.range_depth == 0:
                self.errorf(f"{{{{{typ}}}}} outside {{{{range}}}}")
            return typ
        if typ == "else":
            if self.peek_non_space().typ not in ("if", "with"):
                self.expect(RIGHT, "else")
            return "else"
        if typ == "end":
            self.expect(RIGHT, "end")
            return "end"
        if typ in ("if", "range", "with"):
            self.control(typ)
            return typ
        if typ == "template":
            tok = self.next_non_space()
            if tok.typ not in (STRING, RAW):
                self.unexpected(tok, "template clause")
            self.unquote(tok)
            if self.next_non_space().typ != RIGHT:
                self.backup()
                self.pipeline("template clause", RIGHT)
            else:
                self.bare_template = True
            return "template"
        self.backup()
        self.pipeline("command", RIGHT)
        return "action"

    def block(self) -> None:
        tok = self.next_non_space()
        if tok.typ not in (STRING, RAW):
            self.unexpected(tok, "block clause")
        name = self.unquote(tok)
        self.pipeline("block clause", RIGHT)
        outer = (self.vars, self.range_depth)
        self.vars, self.range_depth = ["$"], 0
        nonempty, end = self.item_list()
        if end != "end":
            self.errorf(f"unexpected {{{{{end}}}}} in block clause")
        self.vars, self.range_depth = outer
        self.add(name, nonempty)

    def control(self, context: str) -> None:
        depth = len(self.vars)
        self.pipeline(context, RIGHT)
        if context == "range":
            self.range_depth += 1
        _, nxt = self.item_list()
        if context == "range":
            self.range_depth -= 1
        if nxt == "else":
            if context in ("if", "with") and self.peek().typ == context:
                self.next()
                self.control(context)
            else:
                _, nxt = self.item_list()
                if nxt != "end":
                    self.errorf(f"expected end; found {{{{{nxt}}}}}")
        del self.vars[depth:]

    def pipeline(self, context: str, end: str) -> None:
        decls = 0
        cmds: list[str] = []
        while True:  # the declarations
            v = self.peek_non_space()
            if v.typ != VARIABLE:
                break
            self.next_non_space()
            nxt = self.peek_non_space()
            if nxt.typ in (ASSIGN, DECLARE):
                self.next_non_space()
                self.vars.append(v.val)
                break
            if nxt.typ == CHAR and nxt.val == ",":
                self.next_non_space()
                self.vars.append(v.val)
                decls += 1
                if context == "range" and decls < 2:
                    if self.peek_non_space().typ in (VARIABLE, RIGHT, RPAREN):
                        continue
                    self.errorf("range can only initialize variables")
                self.errorf(f"too many declarations in {context}")
            self.i = self._back_to(v)
            break
        while True:
            tok = self.next_non_space()
            if tok.typ == end:
                if not cmds:
                    self.errorf(f"missing value for {context}")
                for k, first in enumerate(cmds[1:]):
                    if first in (BOOL, DOT, "nil", NUMBER, STRING):
                        self.errorf(f"non executable command in pipeline stage {k + 2}")
                return
            if tok.typ in _OPERANDS:
                self.backup()
                cmds.append(self.command())
            else:
                self.unexpected(tok, context)

    def _back_to(self, item: _Item) -> int:
        i = self.i - 1
        while self.items[i] is not item:
            i -= 1
        return i

    def command(self) -> str:
        first = ""
        while True:
            self.peek_non_space()
            operand = self.operand()
            if operand and not first:
                first = operand
            tok = self.next()
            if tok.typ == SPACE:
                continue
            if tok.typ in (RIGHT, RPAREN):
                self.backup()
            elif tok.typ != PIPE:
                self.unexpected(tok, "operand")
            break
        if not first:
            self.errorf("empty command")
        return first

    def operand(self) -> str:
        node = self.term()
        if node and self.peek().typ == FIELD:
            while self.peek().typ == FIELD:
                self.next()
            if node[0] in (BOOL, STRING, NUMBER, "nil", DOT):
                self.errorf(f"unexpected . after term {_go_quote(node[1])}")
            return "chain" if node[0] not in (FIELD, VARIABLE) else node[0]
        return node[0] if node else ""

    def term(self) -> tuple[str, str] | None:
        tok = self.next_non_space()
        typ = tok.typ
        if typ == IDENT:
            if tok.val not in FUNCTIONS:
                self.errorf(f"function {_go_quote(tok.val)} not defined")
            return IDENT, tok.val
        if typ == DOT:
            return DOT, "."
        if typ == "nil":
            return "nil", "nil"
        if typ == VARIABLE:
            name = tok.val
            if name not in self.vars:
                self.errorf(f"undefined variable {_go_quote(name)}")
            return VARIABLE, name
        if typ == FIELD:
            return FIELD, tok.val
        if typ == BOOL:
            return BOOL, tok.val
        if typ in (CHARCONST, COMPLEX, NUMBER):
            complaint = _number_error(tok.val, typ)
            if complaint:
                self.errorf(complaint)
            return NUMBER, tok.val
        if typ == LPAREN:
            self.pipeline("parenthesized pipeline", RPAREN)
            return "pipe", "("
        if typ in (STRING, RAW):
            self.unquote(tok)
            return STRING, tok.val
        self.backup()
        return None

    def unquote(self, tok: _Item) -> str:
        """strconv.Unquote of a string literal; Go's "invalid syntax" where an escape is bad."""
        if tok.typ == RAW:
            return tok.val[1:-1].replace("\r", "")
        body = tok.val[1:-1]
        esc = r"\\([abfnrtv\\\"]|[0-7]{3}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})"
        if not re.fullmatch(rf'([^\\"\n]|{esc})*', body):
            self.errorf("invalid syntax")
        return body


def check_template(text: str) -> None:
    """Raise `TemplateError` (Go's message, after Ollama's "template error: ") if Go's text/template, as
    Ollama configures it, does not parse `text`, or if Ollama's template.Parse then refuses it: its `Vars`
    walk finds a {{template "name"}} without a pipeline (a TemplateNode whose Pipe is nil)."""
    parser = _Parser(_lex(text))
    parser.parse()
    if parser.bare_template:
        raise TemplateError("template error: undefined template specified")
