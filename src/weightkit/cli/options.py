"""Options more than one command takes, declared once: --remote with --insecure, --store, comma lists,
`Flag` tables that add a tool's flags to a command (llama-quantize's, llama-server's), and options that take
two values (`paired_options`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from ..errors import ArgumentError

RemoteOption = Annotated[
    bool,
    typer.Option(
        "--remote",
        help="The model name is a registry's (registry.ollama.ai, or the host it names; http://host/... for plain "
        "HTTP): read its manifest and GGUF header from there, not from the local store.",
    ),
]
InsecureOption = Annotated[
    bool, typer.Option("--insecure", help="Speak plain HTTP to the registry (a local one without TLS).")
]
StoreOption = Annotated[
    Path | None, typer.Option("--store", help="The model store (default: $OLLAMA_MODELS, else ~/.ollama/models).")
]


def command_app() -> typer.Typer:
    """The Typer app a command module declares its commands on (`weightkit.cli.COMMANDS` names them)."""
    return typer.Typer(add_completion=False)


def check_insecure(remote: bool, insecure: bool) -> None:
    """--insecure is for a registry's model name, which --remote reads."""
    if insecure and not remote:
        raise ArgumentError("--insecure applies to a registry's model name: give --remote too")


def comma_list(values: Iterable[str] | None) -> list[str]:
    """A repeatable flag's values, each of which may be a comma list: `--gpu 24GiB,24GiB` is `--gpu 24GiB --gpu
    24GiB`. Empty items are dropped."""
    return [item.strip() for value in values or () for item in value.split(",") if item.strip()]


@dataclass(frozen=True)
class Flag:
    """A flag of a tool weightkit follows, declared once for every command that takes it: its parameter name
    (the field of the option object it fills), its type on the command line (bool: a switch; list: repeatable),
    its spellings and help, and how its text becomes the field's value (`parse`)."""

    name: str
    kind: Any
    names: tuple[str, ...]
    help: str
    parse: Callable[[Any], Any] | None = None

    @property
    def spelling(self) -> str:
        return self.names[0]

    def value(self, given: Any) -> Any:
        return given if self.parse is None else self.parse(given)

    def parameter(self) -> inspect.Parameter:
        default = False if self.kind is bool else None
        kind = self.kind if self.kind is bool else self.kind | None
        annotation = Annotated[kind, typer.Option(*self.names, help=self.help)]
        return inspect.Parameter(self.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def takes_flags(flags: Sequence[Flag], into: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the options `flags`, in place of its parameter `into`, which receives those given (a
    dict of name to value, in table order; a switch left off or a flag not given is absent)."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        params: list[inspect.Parameter] = []
        for p in signature.parameters.values():
            params += [f.parameter() for f in flags] if p.name == into else [p.replace(kind=p.KEYWORD_ONLY)]

        @functools.wraps(command)
        def with_flags(**kwargs: Any) -> None:
            given = {f.name: value for f in flags if (value := kwargs.pop(f.name)) not in (None, False, [])}
            command(**kwargs, **{into: given})

        with_flags.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        with_flags.__annotations__ = {p.name: p.annotation for p in params}
        return with_flags

    return decorate


#: What joins the two values of a paired option on their way to the command (no argument can hold a NUL).
PAIR_JOINER = "\0"


def paired_options(*names: str) -> type[TyperCommand]:
    """A command class whose options `names` take two values each, `--special-token NAME TOKEN`, as argparse's
    `nargs=2` does (Typer cannot declare repeatable pairs): declare them `list[str]`; each pair arrives as one
    string joined by `PAIR_JOINER`, which `split_pairs` takes apart."""

    class PairedCommand(TyperCommand):
        def parse_args(self, ctx, args: list[str]) -> list[str]:
            joined: list[str] = []
            i = 0
            while i < len(args):
                if args[i] in names:
                    if len(args) - i < 3:
                        raise ArgumentError(f"{args[i]} takes two values")
                    joined += [args[i], args[i + 1] + PAIR_JOINER + args[i + 2]]
                    i += 3
                else:
                    joined.append(args[i])
                    i += 1
            return super().parse_args(ctx, joined)

    return PairedCommand


def split_pairs(values: list[str] | None) -> list[tuple[str, str]]:
    """A paired option's values (see `paired_options`) as (first, second) pairs."""
    return [tuple(value.split(PAIR_JOINER, 1)) for value in values or []]  # type: ignore[misc]
