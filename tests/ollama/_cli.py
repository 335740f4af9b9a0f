"""The `weightkit` command in a subprocess, running the code these tests imported (not whatever is installed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import weightkit

SRC = str(Path(weightkit.__file__).resolve().parents[1])


def cli_env(**extra: str) -> dict[str, str]:
    """A bare environment whose Python finds the weightkit under test first."""
    return {"PYTHONPATH": SRC, "COLUMNS": "150", "PATH": "", **extra}


def run(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(_command(args), capture_output=True, text=True, env=env, timeout=120)


def start(*args: str | Path, env: dict[str, str]) -> subprocess.Popen:
    """The command running in the background, its output piped."""
    return subprocess.Popen(_command(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _command(args: tuple[str | Path, ...]) -> list[str]:
    return [sys.executable, "-m", "weightkit", *map(str, args)]
