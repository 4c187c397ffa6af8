"""Statements run through dbprepared.prepared_cursor are prepared on their connection once and
executed as prepared after, with the same answers and errors as through Django's own cursor."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from django.db.utils import ProgrammingError
from django.test.utils import CaptureQueriesContext

from controlplane.dbprepared import prepared_cursor

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tag() -> str:
    """Marks this test's statements: a pooled connection keeps what earlier tests prepared."""
    return f"barrel-test-{uuid.uuid4().hex}"


def prepared(tag: str) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        return [row for row in cursor.fetchall() if tag in row[0]]


def test_a_statement_is_prepared_once_and_planned_once(tag: str) -> None:
    sql = f"SELECT %s::int + 1, '{tag}'"
    for n in range(8):
        with prepared_cursor() as cursor:
            cursor.execute(sql, [n])
            assert cursor.fetchone() == (n + 1, tag)
    [(statement, generic, custom)] = prepared(tag)
    # One generic plan from the first execution on, not five plans made afresh first.
    assert "$1" in statement and (generic, custom) == (8, 0)
    with connection.cursor() as cursor:  # Django's own statements are not prepared
        cursor.execute(f"SELECT '{tag}', 2")
    assert len(prepared(tag)) == 1


def test_its_errors_are_djangos_and_capture_shows_the_statement(tag: str) -> None:
    with pytest.raises(ProgrammingError), prepared_cursor() as cursor:
        cursor.execute("SELECT no_such_column FROM auth_user WHERE id = %s", [1])
    sql = f"SELECT %s::int, '{tag}'"
    with CaptureQueriesContext(connection) as queries, prepared_cursor() as cursor:
        cursor.execute(sql, [1])
    assert [q["sql"] for q in queries.captured_queries] == [sql]


def test_off_it_is_an_ordinary_cursor(settings: Any, tag: str) -> None:
    settings.DB_PREPARE = False
    with prepared_cursor() as cursor:
        cursor.execute(f"SELECT %s::int + 1, '{tag}'", [1])
        assert cursor.fetchone() == (2, tag)
    assert prepared(tag) == []
