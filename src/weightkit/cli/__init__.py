"""The `weightkit` command: thin subcommands that call the library and render its answers. Each lives in its
own module with its options and their checks (`COMMANDS`), imported when it runs, so a command loads only
the part of the library it uses."""

from __future__ import annotations

import importlib
import sys

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup
from typer.main import get_command

from ..errors import ArgumentError, WeightkitError

#: Each subcommand, in the order the help lists them, and the module of `weightkit.cli` that declares it.
COMMANDS = {
    "inspect": "inspect", "quantize": "quantize", "convert": "convert", "estimate": "estimate", "create": "store",
    "ls": "store", "show": "store", "rm": "store", "verify": "store", "prune": "store", "pull": "registry",
    "push": "registry", "cp": "registry", "split": "tools", "merge": "tools", "edit": "tools",
    "demo": "demo",
}  # fmt: skip
_stderr = Console(stderr=True)


class _Subcommands(TyperGroup):
    """The subcommands of `COMMANDS`, each built from its module's Typer app when it is asked for."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: typer.Context, cmd_name: str):
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(f"{__name__}.{COMMANDS[cmd_name]}")
        command = get_command(module.app)
        return command.get_command(ctx, cmd_name) if isinstance(command, TyperGroup) else command


app = typer.Typer(
    name="weightkit",
    cls=_Subcommands,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _weightkit() -> None:
    """Inspect, convert, quantize and plan memory for GGUF, safetensors and Ollama models."""


def main(argv: list[str] | None = None) -> None:
    """Entry point. Errors a user can cause become one line on stderr, never a traceback: status 2 for a
    usage error (an unknown option, a bad value), 1 for a bad file or a failed job, 130 when interrupted;
    no arguments at all print the help, with status 2."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if args:
            status = app(args=args, prog_name="weightkit", standalone_mode=False)
        else:
            app(args=["--help"], prog_name="weightkit", standalone_mode=False)
            status = 2
    except typer.TyperException as e:  # click's usage errors: unknown option, missing argument, bad value
        where = f" (see '{e.ctx.command_path} --help')" if getattr(e, "ctx", None) else ""
        status = _fail(e.format_message() + where, getattr(e, "exit_code", 2))
    except ArgumentError as e:
        status = _fail(str(e), 2)
    except MemoryError:
        status = _fail("out of memory", 1)
    except WeightkitError as e:
        status = _fail(str(e), 1)
    except OSError as e:
        status = _fail(f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e), 1)
    except (KeyboardInterrupt, typer.Abort):
        status = 130
    sys.exit(status if isinstance(status, int) else 0)


def _fail(message: str, status: int) -> int:
    """Print `message` as the one line of an error and return the exit status."""
    line = " ".join(message.split())
    _stderr.print(f"[red]error:[/red] {escape(line)}", markup=True, highlight=False, soft_wrap=True)
    return status
