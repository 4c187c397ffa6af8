"""Test defaults: the machine's PostgreSQL and Redis, on a Redis database of the tests' own.

CI and `make test` export DATABASE_URL and REDIS_URL; these defaults let a bare `pytest` work too.
"""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/barrel")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
# The mlflow client (tracking API tests) would otherwise start a telemetry thread at import.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
