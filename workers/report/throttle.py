"""Warnings that a hot training loop cannot turn into a flood of log lines.

Each warning has a key (by default its text). ``warn`` logs the first time and every 100th
time after, with the count; ``warn_once`` logs the first time only. Thread-safe: log() calls
it from the training thread while the delivery threads call it too.

(Named ``throttle``, not ``warnings``, so it never shadows the standard library's module.)
"""

from __future__ import annotations

import logging
import threading

# A repeated warning is logged again every this many times.
EVERY = 100


class ThrottledWarnings:
    """Counts per key, so each warning is logged a bounded number of times."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}

    def warn(self, message: str, *, key: str | None = None, exc: bool = False) -> None:
        """Log ``message`` the first time and then every ``EVERY``-th time its key comes."""
        key = key or message
        with self._lock:
            count = self._seen.get(key, 0) + 1
            self._seen[key] = count
        if count == 1 or count % EVERY == 0:
            suffix = f" (seen {count} times)" if count > 1 else ""
            self._log.warning("%s%s", message, suffix, exc_info=exc)

    def warn_once(self, key: str, message: str) -> None:
        """Log ``message`` only the first time ``key`` comes."""
        with self._lock:
            seen = key in self._seen
            self._seen[key] = 1
        if not seen:
            self._log.warning("%s", message)
