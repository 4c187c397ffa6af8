from __future__ import annotations

import io
from datetime import UTC, datetime

from barrel_cli.watch import Display, EventOrder, WatchState, exit_code_for, ws_url


def test_the_websocket_url_follows_the_api_url() -> None:
    assert ws_url("http://cp:8000", "12") == "ws://cp:8000/ws/runs/12/"
    assert ws_url("https://barrel.example.com/prefix/", "3") == "wss://barrel.example.com/prefix/ws/runs/3/"


def test_exit_codes_follow_the_final_status() -> None:
    assert exit_code_for("SUCCEEDED") == 0
    assert exit_code_for("FAILED") == 1
    assert exit_code_for("CANCELLED") == 1


def snapshot(status: str = "RUNNING") -> dict[str, object]:
    return {
        "type": "run.snapshot",
        "run": {"id": 12, "status": status, "started_at": "2026-01-02T11:59:00Z", "finished_at": None},
    }


def test_messages_update_status_step_and_latest_values() -> None:
    state = WatchState()
    assert state.apply(snapshot()) == "run.snapshot"
    state.apply(
        {
            "type": "metrics.points",
            "run_id": 12,
            "series": [
                {"key": "reward/mean", "steps": [3, 2], "values": [0.5, 0.1]},  # step 2 is older: ignored
                {"key": "policy/loss", "steps": [3], "values": ["NaN"]},
                {"key": "zeta", "steps": [1], "values": [1.0]},
            ],
        }
    )
    assert state.step == 3
    assert state.latest["reward/mean"] == (3, 0.5)
    assert state.shown_keys() == ["reward/mean", "policy/loss", "zeta"]
    line = state.line(now=datetime(2026, 1, 2, 12, 0, 5, tzinfo=UTC))
    assert line == "run 12 RUNNING  step 3  reward/mean=0.5  policy/loss=NaN  zeta=1  elapsed 0:01:05"
    assert state.apply({"type": "resync"}) == "resync"
    state.apply({"type": "run.status", "run": {"id": 12, "status": "SUCCEEDED"}})
    assert state.terminal


def test_rest_resync_fills_the_latest_values() -> None:
    state = WatchState()
    state.load_keys([{"key": "reward/mean", "count": 9, "first_step": 1, "last_step": 9, "last_value": 0.8}])
    assert (state.step, state.latest["reward/mean"]) == (9, (9, 0.8))


def test_a_pipe_gets_plain_lines_without_repeats() -> None:
    out = io.StringIO()
    display = Display(out, tty=False)
    state = WatchState()
    state.apply(snapshot())
    display.show(state)
    display.show(state)  # unchanged: nothing new
    state.apply(snapshot("SUCCEEDED"))
    display.show(state)  # status change: printed at once
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "RUNNING" in lines[0] and "SUCCEEDED" in lines[1]
    assert "\r" not in out.getvalue()


def test_a_terminal_gets_one_rewritten_line() -> None:
    out = io.StringIO()
    display = Display(out, tty=True)
    state = WatchState()
    state.apply(snapshot())
    display.show(state)
    display.show(state)
    display.message("done")
    text = out.getvalue()
    assert text.count("\r\x1b[2K") == 2
    assert text.endswith("\ndone\n")


def test_the_event_order_tells_a_gap_and_a_new_epoch_from_events_in_order() -> None:
    order = EventOrder()
    assert order.observe({"type": "run.snapshot", "seq": 5, "epoch": "e1"}) == "in-order"
    assert order.observe({"type": "metrics.points", "seq": 6, "epoch": "e1"}) == "in-order"
    assert order.observe({"type": "metrics.points", "seq": 8, "epoch": "e1"}) == "gap"
    assert order.observe({"type": "metrics.points", "seq": 7, "epoch": "e1"}) == "in-order"  # late, not lost
    assert order.observe({"type": "resync"}) == "in-order"
    # The server's counter started again (Redis restarted): seq 1 is neither old nor a gap.
    assert order.observe({"type": "metrics.points", "seq": 1, "epoch": "e2"}) == "new-epoch"
    assert order.observe({"type": "metrics.points", "seq": 2, "epoch": "e2"}) == "in-order"


def points(key: str, steps: list[int]) -> dict[str, object]:
    series = [{"key": key, "steps": steps, "values": [0.5] * len(steps)}]
    return {"type": "metrics.points", "run_id": 12, "series": series}


def test_a_grpo_run_shows_its_phase_and_the_rl_step_not_the_last_warm_start_step() -> None:
    state = WatchState()
    state.apply(snapshot())
    state.apply(points("warmstart/loss", list(range(100))))
    assert "warm start step 99" in state.line()
    state.apply(points("eval/rl_prompts/correct", [0]))
    state.apply(points("reward/mean", [0, 1, 2]))
    line = state.line(now=datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC))
    assert line == "run 12 RUNNING  RL step 2  reward/mean=0.5  eval/rl_prompts/correct=0.5  elapsed 0:01:00"
    # Watching a run already in RL: the keys' summaries say the same.
    later = WatchState()
    later.load_keys(
        [
            {"key": "warmstart/loss", "count": 100, "first_step": 0, "last_step": 99, "last_value": 0.1},
            {"key": "reward/mean", "count": 13, "first_step": 0, "last_step": 12, "last_value": 0.4},
        ]
    )
    assert later.progress() == "RL step 12"


def test_a_run_without_phases_shows_a_plain_step() -> None:
    state = WatchState()
    state.apply(points("reward/mean", [4]))
    assert state.progress() == "step 4"


NOTE = "waiting for cluster resources: 2 tasks need {CPU: 1}; 0.5 of 2 CPU free"


def waiting(note: str = NOTE) -> dict[str, object]:
    message = snapshot()
    message["run"] = dict(message["run"], waiting_for=note)  # type: ignore[call-overload]
    return message | {"type": "run.status"}


def test_a_waiting_run_says_what_it_waits_for_until_its_work_runs() -> None:
    state = WatchState()
    state.apply(waiting())
    assert state.line(now=datetime(2026, 1, 2, 11, 59, 31, tzinfo=UTC)) == f"run 12 RUNNING  {NOTE}  elapsed 0:00:31"
    state.apply(waiting(""))
    state.apply(points("reward/mean", [0]))
    assert "waiting" not in state.line() and "step 0" in state.line()


def test_a_terminal_keeps_the_whole_note_above_the_rewritten_line() -> None:
    out = io.StringIO()
    display = Display(out, tty=True)
    state = WatchState()
    state.apply(waiting())
    display.show(state)
    display.show(state)  # the same note is not repeated
    assert out.getvalue().count(NOTE) == 3  # once whole, twice in the rewritten line
    assert out.getvalue().startswith(NOTE + "\n")


def test_a_resumed_run_counts_the_time_of_every_attempt() -> None:
    state = WatchState()
    state.apply(snapshot())
    state.run["earlier_attempts_s"] = 600.0
    assert state.line(now=datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)).endswith("elapsed 0:11:00")
