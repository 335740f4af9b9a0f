"""Every exception weightkit raises on purpose, in one place.

The contract: anything a caller can cause (a malformed file, a bad argument, a model that does not fit)
raises a `WeightkitError` subclass with a message that names the file and byte offset, or the argument,
and what is wrong. The command line prints that message on one line and exits with status 2 for a usage
error (`ArgumentError`) and 1 for everything else. Any other exception is a bug in weightkit.

The classes that callers also catch by Python's own categories keep them: `FormatError` and
`ArgumentError` are `ValueError`s, `ArgumentTypeError` is also a `TypeError`, `StateError` a `RuntimeError`.
"""

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


class ArgumentError(WeightkitError, ValueError):
    """An argument or option has a value weightkit cannot use; the message names the argument."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument is of a type weightkit cannot use (a complex array to quantize, a str for a dict)."""


class StateError(WeightkitError, RuntimeError):
    """A call made out of order: writing to a closed writer, changing the header after data was written."""


class UnsupportedError(WeightkitError):
    """A well-formed input asks for something weightkit does not do (yet), e.g. a type with no kernel."""


class RemoteError(WeightkitError):
    """A remote model could not be read: no connection, a refusal, or a server that misbehaves (answers a
    range request with the whole file, sends fewer bytes than promised). A malformed remote file is a
    `FormatError`, as a local one is. Messages name the URL, never a credential."""


class HTTPStatusError(RemoteError):
    """The server answered with an error status (`status`: 401, 404, 500, ...)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status

    def __reduce__(self):
        return (type(self), (self.args[0], self.status))


class InvalidName(ArgumentError):
    """A model name Ollama would not accept (it could also escape the store's folders)."""


class ModelNotFound(WeightkitError):
    """No manifest in the store for that name."""


class RegistryError(RemoteError):
    """A registry refused a request or answered something weightkit cannot use; the message says which
    registry, what was asked, and the registry's own words (never a credential)."""


class RegistryAuthError(RegistryError):
    """A registry wants credentials weightkit does not have, or refused the ones it has."""


class RegistryConnectionError(RegistryError):
    """A registry could not be reached (refused, unknown host, TLS failure), or kept failing after retries."""


class DigestMismatch(RegistryError):
    """Downloaded bytes do not hash to the digest that names them: nothing of them was stored."""


class LayoutInputError(ArgumentError):
    """The numbers given to the layout functions are inconsistent (e.g. negative sizes)."""


class FullFitRequired(WeightkitError):
    """The model must load entirely (require-full mode) and does not: Ollama's ``ErrLoadRequiredFull``.

    Ollama's scheduler reacts by evicting another model and retrying. ``reason`` says whether the
    GPUs (``"gpu"``) or system memory (``"system"``) fell short.
    """

    def __init__(self, message: str, reason: str = "gpu") -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):
        return (type(self), (self.args[0], self.reason))


class SystemMemoryExceeded(WeightkitError):
    """What stays on the CPU is larger than free RAM plus free swap (Ollama refuses the load).

    Ollama makes this check on Linux and Windows only; macOS has dynamic swap.
    """

    def __init__(self, required: int, available: int) -> None:
        super().__init__(f"model requires more system memory ({required} bytes) than is available ({available} bytes)")
        self.required = required
        self.available = available

    def __reduce__(self):
        return (type(self), (self.required, self.available))
