"""Trying again after a dropped connection or a failing server: exponential backoff with jitter."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from ..errors import RegistryConnectionError
from ..net.http import ExchangeFailed
from .options import RegistryOptions

T = TypeVar("T")
_MAX_WAIT = 30.0


class Backoff:
    """Counts failures in a row: `failed` waits before the next try, or raises RegistryConnectionError when
    the failure is not transient or `options.retries` tries have failed in a row; `progressed` (bytes went
    through since the last failure) starts the count again."""

    def __init__(self, options: RegistryOptions) -> None:
        self._options = options
        self._failures = 0

    def failed(self, error: ExchangeFailed) -> None:
        if not error.transient:
            raise RegistryConnectionError(str(error)) from None
        if self._failures >= self._options.retries:
            tries = self._failures + 1
            raise RegistryConnectionError(f"{error} ({tries} tries)" if tries > 1 else str(error)) from None
        wait = min(self._options.backoff * 2**self._failures * random.uniform(0.5, 1.5), _MAX_WAIT)
        if error.retry_after is not None:
            wait = max(wait, min(error.retry_after, 2 * _MAX_WAIT))
        self._failures += 1
        time.sleep(wait)

    def progressed(self) -> None:
        self._failures = 0


def retrying(action: Callable[[], T], options: RegistryOptions) -> T:
    """`action()`, tried again while it raises a transient ExchangeFailed (see Backoff)."""
    backoff = Backoff(options)
    while True:
        try:
            return action()
        except ExchangeFailed as e:
            backoff.failed(e)
