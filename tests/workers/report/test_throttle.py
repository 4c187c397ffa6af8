"""Throttled warnings: the first, then every 100th, with the count."""

from __future__ import annotations

import logging
import threading

import pytest

from workers.report.throttle import EVERY, ThrottledWarnings

LOGGER = "barrel.test.throttle"


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_a_repeated_warning_is_logged_the_first_time_and_every_hundredth(caplog: pytest.LogCaptureFixture) -> None:
    warnings = ThrottledWarnings(logging.getLogger(LOGGER))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(2 * EVERY):
            warnings.warn("disk full")
    assert messages(caplog) == ["disk full", "disk full (seen 100 times)", "disk full (seen 200 times)"]


def test_warnings_with_one_key_are_counted_together(caplog: pytest.LogCaptureFixture) -> None:
    warnings = ThrottledWarnings(logging.getLogger(LOGGER))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for n in range(EVERY):
            warnings.warn(f"dropped {n} point(s)", key="drop")
        warnings.warn("another thing")
    assert messages(caplog) == ["dropped 0 point(s)", "dropped 99 point(s) (seen 100 times)", "another thing"]


def test_warn_once_logs_only_the_first_time(caplog: pytest.LogCaptureFixture) -> None:
    warnings = ThrottledWarnings(logging.getLogger(LOGGER))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3 * EVERY):
            warnings.warn_once("direct-spool", "spooling directly")
    assert messages(caplog) == ["spooling directly"]


def test_counts_from_many_threads_add_up(caplog: pytest.LogCaptureFixture) -> None:
    warnings = ThrottledWarnings(logging.getLogger(LOGGER))

    def hammer() -> None:
        for _ in range(EVERY):
            warnings.warn("busy")

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(messages(caplog)) == sorted(["busy"] + [f"busy (seen {n * EVERY} times)" for n in range(1, 5)])
