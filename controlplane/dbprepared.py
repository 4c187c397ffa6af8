"""Server-side prepared statements, for the few statements on a hot path.

Django turns psycopg's automatic preparation off (prepare_threshold=None, so that a pooler in
transaction mode never meets a statement prepared on another server connection) and binds
parameters client-side, so every statement is planned at every execution. For most that costs
little; for one that joins many tables it is most of the cost: battles/next's claim
(evals/prepared.py) joins seven, plans in about 2 ms and then runs in 0.1 ms, and when 20 voters
ask at once the planning is what they queue behind (benchmarks/battles.py).

`prepared_cursor()` is a Django cursor (its errors, execute wrappers and query capture as any
other's) whose statements are prepared on their connection the first time and only executed
after: PostgreSQL keeps them for the session, psycopg remembers which (up to its prepared_max
per connection, the least used deallocated). Nothing else is prepared: automatic preparation
stays off.

BARREL_DB_PREPARE=0 turns it off, behind a pooler that cannot carry prepared statements across
server connections (PgBouncer in transaction mode before 1.21, or without max_prepared_statements).
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.conf import settings
from django.db import connection
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

# A threshold no statement reaches: only the statements asked to be are prepared.
NEVER = 2**31


class _LoggedPrepared(CursorDebugWrapper):
    """Where queries are logged (DEBUG, CaptureQueriesContext): the statement as written, since
    psycopg keeps no text of a prepared statement's execution for Django to show."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(sql, params):
            return CursorWrapper.execute(self, sql, params)


class _Preparing(psycopg.Cursor[Any]):
    """A server-side binding cursor that prepares every statement it executes."""

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> Any:
        return super().execute(query, params, prepare=True, binary=binary)


def prepared_cursor() -> Any:
    """A cursor of the default connection whose statements are prepared (or an ordinary one,
    with BARREL_DB_PREPARE=0)."""
    if not settings.DB_PREPARE:
        return connection.cursor()
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:
        raw.prepare_threshold = NEVER
        # Planned once: PostgreSQL's default plans the first five executions of each connection's
        # statement afresh before it settles on a generic plan, and a pool of connections shares
        # a few requests each. Only prepared statements follow this setting (Django's statements
        # are not; there are no PL/pgSQL functions); in a transaction that rolls back it is undone
        # (plans made afresh again: slower, not wrong).
        raw.execute("SET plan_cache_mode = force_generic_plan")
    cursor = _Preparing(raw)
    return _LoggedPrepared(cursor, connection) if connection.queries_logged else CursorWrapper(cursor, connection)
