"""Functions of Linux's C library that Python does not wrap, looked up once and typed."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable


def libc_function(name: str, argtypes: tuple[type, ...]) -> Callable[..., int] | None:
    """The C library's `name` taking `argtypes` and returning an int, or None off Linux or where the library
    has no such function."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function
