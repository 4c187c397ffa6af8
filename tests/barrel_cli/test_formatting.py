from __future__ import annotations

from datetime import UTC, datetime

from barrel_cli.formatting import format_duration, format_table, format_value, project_label, runs_table

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)


def run(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "id": 7,
        "name": "smoke",
        "recipe": "smoke",
        "status": "RUNNING",
        "project": {"id": 1, "name": "default", "team": {"id": 1, "slug": "lab", "name": "Lab"}},
        "created_at": "2026-01-02T11:00:00Z",
        "started_at": "2026-01-02T11:58:30+00:00",
        "finished_at": None,
    }
    base.update(overrides)
    return base


def test_columns_are_padded_to_their_widest_cell() -> None:
    table = format_table(["ID", "NAME"], [["1", "a"], ["123", "longer"]], right=[0])
    assert table.splitlines() == [" ID  NAME", "  1  a", "123  longer"]


def test_the_runs_table_shows_project_status_and_duration() -> None:
    lines = runs_table([run(), run(id=12, name="x", status="QUEUED", started_at=None)], now=NOW).splitlines()
    assert lines[0].split() == ["ID", "NAME", "PROJECT", "RECIPE", "STATUS", "CREATED", "DURATION"]
    assert "lab/default" in lines[1] and "RUNNING" in lines[1] and lines[1].endswith("0:01:30")
    assert lines[2].endswith("-")
    # every row starts its PROJECT column at the same offset
    offset = lines[0].index("PROJECT")
    assert all(line[offset:].startswith("lab/default") for line in lines[1:])


def test_finished_runs_show_their_own_duration() -> None:
    finished = run(status="SUCCEEDED", finished_at="2026-01-02T12:00:00Z")
    assert runs_table([finished], now=datetime(2030, 1, 1, tzinfo=UTC)).splitlines()[1].endswith("0:01:30")


def test_small_formatters() -> None:
    assert format_duration(3725) == "1:02:05"
    assert format_duration(-3) == "0:00:00"
    assert format_value(0.123456) == "0.1235"
    assert format_value("NaN") == "NaN"
    assert project_label({"project": 3}) == "3"


def test_a_resumed_run_counts_every_attempt_even_while_it_waits_to_start_again() -> None:
    resumed = run(earlier_attempts_s=600.0)
    assert runs_table([resumed], now=NOW).splitlines()[1].endswith("0:11:30")
    requeued = run(status="QUEUED", started_at=None, earlier_attempts_s=600.0)
    assert runs_table([requeued], now=NOW).splitlines()[1].endswith("0:10:00")


def test_a_waiting_run_is_marked_and_what_it_waits_for_follows_the_table() -> None:
    note = "waiting for cluster resources: 2 tasks need {CPU: 1}; 0.5 of 2 CPU free"
    lines = runs_table([run(waiting_for=note), run(id=8)], now=NOW).splitlines()
    assert "RUNNING, waiting" in lines[1] and "waiting" not in lines[2]
    assert lines[3] == f"run 7: {note}"
