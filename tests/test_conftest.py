"""tests/conftest.py marks e2e every test that needs the stack, so the fast loop starts none."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import E2E_DIR, STACK_FIXTURES, pytest_collection_modifyitems


@dataclass
class StubItem:
    path: Path
    fixturenames: list[str]
    marks: list[str] = field(default_factory=list)

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.marks.append(marker.name)


def test_tests_under_e2e_and_users_of_a_stack_fixture_are_marked_e2e_and_no_others():
    journey = StubItem(E2E_DIR / "test_loop.py", ["db"])
    on_ray = StubItem(E2E_DIR.parent / "controlplane" / "runs" / "test_dispatch.py", ["ray_address", "db"])
    unit = StubItem(E2E_DIR.parent / "controlplane" / "runs" / "test_api.py", ["db", "live_url", "owner"])
    items: list[Any] = [journey, on_ray, unit]
    pytest_collection_modifyitems(items)
    assert (journey.marks, on_ray.marks, unit.marks) == (["e2e"], ["e2e"], [])


def test_every_test_of_this_session_that_needs_the_stack_carries_the_e2e_marker(request: pytest.FixtureRequest):
    """In the fast loop (`-m "not e2e and not browser"`) this means that none of them was selected."""
    unmarked = [
        item.nodeid
        for item in request.session.items
        if (item.path.is_relative_to(E2E_DIR) or STACK_FIXTURES.intersection(getattr(item, "fixturenames", ())))
        and item.get_closest_marker("e2e") is None
    ]
    assert unmarked == []
