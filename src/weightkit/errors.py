"""The exceptions weightkit raises. Every failure caused by bad input is one of these."""

from __future__ import annotations

import os


class WeightkitError(Exception):
    """Base class of every error weightkit raises on purpose."""


class FormatError(WeightkitError, ValueError):
    """A file (or buffer) is malformed: says which file, at which byte, and what is wrong."""

    def __init__(self, path: str | os.PathLike[str] | None, offset: int | None, reason: str) -> None:
        self.path = None if path is None else os.fspath(path)
        self.offset = offset
        self.reason = reason
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path if self.path is not None else "<buffer>"
        if self.offset is not None:
            where = f"{where}: at byte {self.offset}"
        return f"{where}: {self.reason}"

    def __reduce__(self):  # keep pickling (multiprocessing, pytest-xdist) working
        return (type(self), (self.path, self.offset, self.reason))


class UnsupportedError(WeightkitError):
    """A well-formed input asks for something weightkit does not do (yet), e.g. a type with no kernel."""
