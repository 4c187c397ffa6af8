"""Binary COPY rows laid out by numpy (controlplane.metrics.storage.copy)."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from controlplane.metrics.storage import copy

ROW = np.dtype([("fields", ">i2"), ("a_len", ">i4"), ("a", ">i8"), ("b_len", ">i4"), ("b", ">f8")])


def test_binary_rows_fill_in_the_field_count_and_each_length() -> None:
    rows = copy.binary_rows(ROW, 3)
    assert rows["fields"].tolist() == [2, 2, 2]
    assert rows["a_len"].tolist() == [8, 8, 8] and rows["b_len"].tolist() == [8, 8, 8]


@pytest.mark.django_db
def test_rows_copied_in_binary_read_back_as_written() -> None:
    rows = copy.binary_rows(ROW, 3)
    rows["a"], rows["b"] = [1, -(2**62), 2**63 - 1], [0.5, -1e300, float("inf")]
    with connection.cursor() as cur:
        cur.execute("CREATE TEMP TABLE copied (a int8, b float8)")
        copy.copy_rows(cur, "copied", "a, b", rows)
        cur.execute("SELECT a, b FROM copied ORDER BY a")
        assert cur.fetchall() == [(-(2**62), -1e300), (1, 0.5), (2**63 - 1, float("inf"))]


@pytest.mark.django_db
def test_numerics_read_back_as_the_decimals_they_were_written_from() -> None:
    text = np.array([b"0", b"-12.5", b"1E+20", b"NaN", b"-Infinity"], dtype=np.bytes_)
    numerics = copy.numerics(text)
    row = np.dtype([("fields", ">i2"), ("n_len", ">i4"), ("n", numerics.dtype)])
    rows = copy.binary_rows(row, len(text))
    rows["n"] = numerics
    with connection.cursor() as cur:
        cur.execute("CREATE TEMP TABLE copied_numerics (n numeric)")
        copy.copy_rows(cur, "copied_numerics", "n", rows)
        cur.execute("SELECT n::text FROM copied_numerics")
        assert [value for (value,) in cur.fetchall()] == ["0", "-12.5", "100000000000000000000", "NaN", "-Infinity"]
