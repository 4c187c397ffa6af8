"""When to try again after a send failed.

- ``backoff_delay``: exponential backoff with jitter, for every retry loop (client, replay, reporter).
- ``Backoff``: the reporter's schedule: failures in a row and the time of the next attempt.
  A ``Retry-After`` from the server is a hard wait, which flush() and close() do not cut short.
- ``error_pause_s``: the pause after a delivery round that raised (a bug, not a failed send).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable


def backoff_delay(failures: int, *, base_s: float, cap_s: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with "equal jitter": half fixed, half random, capped at ``cap_s``."""
    exp = min(cap_s, base_s * float(2 ** max(0, min(failures - 1, 30))))
    jitter: float = (rng or random).uniform(0, exp / 2)
    return exp / 2 + jitter


def error_pause_s(errors: int, *, cap_s: float) -> float:
    """Doubling from 0.2s up to ``cap_s``, so a round that keeps raising does not spin."""
    return float(min(cap_s, 0.1 * 2 ** min(errors, 10)))


class Backoff:
    """Failures in a row and when the next attempt is due (on the monotonic clock).

    Not thread-safe: the delivery loop calls it under its own lock.
    """

    def __init__(self, *, base_s: float, cap_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.base_s = base_s
        self.cap_s = cap_s
        self.failures = 0
        self.next_attempt_at = 0.0
        self.hard_wait = False  # the current wait was asked for by the server (Retry-After)
        self._clock = clock

    def due(self) -> bool:
        return self._clock() >= self.next_attempt_at

    def wait_s(self) -> float:
        """Seconds until the next attempt is due; 0 when it is."""
        return max(0.0, self.next_attempt_at - self._clock())

    def hurry(self) -> None:
        """Allow one prompt attempt (flush, close), unless the server asked for the wait."""
        if not self.hard_wait:
            self.next_attempt_at = min(self.next_attempt_at, self._clock())

    def succeeded(self) -> int:
        """Back to normal after an answer; returns how many attempts had failed in a row."""
        failures = self.failures
        self.failures = 0
        self.hard_wait = False
        return failures

    def failed(self, *, retry_after_s: float | None, blocked: bool) -> float:
        """Count a failure and schedule the next attempt; returns the delay.

        1. The server's ``Retry-After``, when it sent one (a hard wait).
        2. The longest delay when our token or URL is refused (``blocked``): hammering fixes neither.
        3. Otherwise exponential backoff with jitter.
        """
        self.failures += 1
        self.hard_wait = retry_after_s is not None
        if retry_after_s is not None:
            delay = retry_after_s
        elif blocked:
            delay = self.cap_s
        else:
            delay = backoff_delay(self.failures, base_s=self.base_s, cap_s=self.cap_s)
        self.next_attempt_at = self._clock() + delay
        return delay
