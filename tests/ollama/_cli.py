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
    command = [sys.executable, "-m", "weightkit", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
