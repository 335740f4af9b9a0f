"""The optional dependencies some tests need, by the marker that says so, and the extra that installs each.

Where the package is missing, a test marked `needs_torch` or `needs_mlx` is skipped, naming the extra (the hook in
tests/conftest.py); a module that needs one at import time calls `need()` itself.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import pytest

#: marker -> (the module it needs, the weightkit extra that installs it)
NEEDS = {
    "needs_torch": ("torch", "torch"),
    "needs_mlx": ("mlx.core", "mlx"),
}


@functools.cache
def missing(marker: str) -> str | None:
    """Why a test marked `marker` cannot run here, naming the extra to install; None where its module imports."""
    module, extra = NEEDS[marker]
    try:
        importlib.import_module(module)
    except ImportError:
        return f"needs {module}: pip install 'weightkit[{extra}]'"
    return None


def need(marker: str) -> ModuleType:
    """The module `marker` stands for, imported; where it is missing, the calling test module is skipped."""
    __tracebackhide__ = True  # the skip reports the test module's line, not this one
    if reason := missing(marker):
        pytest.skip(reason, allow_module_level=True)
    return importlib.import_module(NEEDS[marker][0])
