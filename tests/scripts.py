"""The repository's scripts as modules for the tests: tests/data's recorders and model tables and tools/' oracles
are no package, so each is loaded from its file, once per test process, under the name of its file (registered,
as dataclasses look their module up)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_script(path: Path) -> ModuleType:
    """The module of the script at `path` (tests/data/memory_models.py, tools/llama_oracle.py, ...)."""
    name = path.stem
    if (loaded := sys.modules.get(name)) is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
