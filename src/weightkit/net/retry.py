"""Trying again after a dropped connection or a failing server (408, 429, 5xx): exponential backoff with
jitter, the server's Retry-After honoured up to a bound. The one retry policy of pulls, pushes and remote
reading."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ..errors import RemoteError
from .http import ExchangeFailed, Response

T = TypeVar("T")
MAX_WAIT = 30.0  # seconds of backoff at most
MAX_RETRY_AFTER = 60.0  # a server asking for a longer wait is not waited for: the error says what it asked


class Retries(Protocol):
    """`retries`: tries after the first, in a row; `backoff`: seconds before the first of them, doubled for
    each next (with jitter)."""

    @property
    def retries(self) -> int: ...

    @property
    def backoff(self) -> float: ...


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 5
    backoff: float = 1.0


DEFAULT = RetryPolicy()  # remote reading's, and RegistryOptions' defaults


def transient_status(status: int) -> bool:
    """Whether an HTTP status may go away when asked again: a timeout, too many requests, a server error."""
    return status >= 500 or status in (408, 429)


def retry_after(response: Response) -> float | None:
    """The seconds a response's Retry-After asks to wait (a number, or an HTTP date), if it says."""
    value = (response.header("Retry-After") or "").strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class Backoff:
    """Counts failures in a row: `failed` waits before the next try, or raises `error` when the failure is not
    transient, when `policy.retries` tries have failed in a row, or when the server asks to wait longer than
    MAX_RETRY_AFTER; `progressed` (bytes went through since the last failure) starts the count again."""

    def __init__(self, policy: Retries, error: type[RemoteError] = RemoteError) -> None:
        self._policy = policy
        self._error = error
        self._failures = 0

    def failed(self, failure: ExchangeFailed) -> None:
        if not failure.transient:
            raise self._error(str(failure)) from None
        asked = failure.retry_after
        if asked is not None and asked > MAX_RETRY_AFTER:
            raise self._error(f"{failure} (the server asks to try again in {asked:.0f} s)") from None
        if self._failures >= self._policy.retries:
            tries = self._failures + 1
            raise self._error(f"{failure} ({tries} tries)" if tries > 1 else str(failure)) from None
        wait = min(self._policy.backoff * 2**self._failures * random.uniform(0.5, 1.5), MAX_WAIT)
        if asked is not None:
            wait = max(wait, asked)
        self._failures += 1
        time.sleep(wait)

    def progressed(self) -> None:
        self._failures = 0


def retrying(action: Callable[[], T], policy: Retries, error: type[RemoteError] = RemoteError) -> T:
    """`action()`, tried again while it raises a transient ExchangeFailed (see Backoff)."""
    backoff = Backoff(policy, error)
    while True:
        try:
            return action()
        except ExchangeFailed as e:
            backoff.failed(e)
