"""``barrel watch ID``: live progress of one run over the websocket, resynced over REST.

The websocket (``/ws/runs/{id}/``) sends a ``run.snapshot`` on connect, ``run.status`` on every
state change, ``metrics.points`` per ingest batch, and ``resync`` when this client fell behind.
Every event carries the run's ``seq`` and its ``epoch``; a gap in ``seq`` or a new ``epoch`` (the
server's counter started again, after a Redis restart) makes the watcher refetch over REST.
When the connection drops, or the server closes it with 1013 ("try again later": its Redis is
down), the watcher reconnects with backoff and refetches the run and the latest metric values
over REST, so nothing it shows goes stale.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TextIO
from urllib.parse import urlsplit, urlunsplit

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import connect

from barrel_cli.client import Api
from barrel_cli.errors import CliError, NetworkError
from barrel_cli.formatting import format_duration, format_value, run_duration

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
# Shown first when present; otherwise the first keys in name order.
PREFERRED_KEYS = ("reward/mean", "policy/loss", "perf/samples_per_s", "time/step_s")
MAX_KEYS_SHOWN = 4
# Key prefixes a recipe reports only in a phase before RL, and the phase's name.
PRE_RL_PHASES = (("warmstart/", "warm start"),)
MAX_RECONNECT_DELAY_S = 15.0
# Close codes the server uses for "not yours"/"not logged in": reconnecting cannot help.
FATAL_CLOSE_CODES = {4401: "not authenticated", 4403: "not allowed", 4404: "run not found"}
TRY_AGAIN_LATER = 1013


class EventOrder:
    """Follows the run's event counter on one connection: ``observe`` says whether a message
    comes in order, after a gap (events were lost on the way), or from a new epoch (the server's
    counter started again at 0: a restart, never a gap or old news). Both of the latter mean
    "refetch over REST"."""

    def __init__(self) -> None:
        self.epoch: str | None = None
        self.seq: int | None = None

    def observe(self, message: dict[str, Any]) -> str:
        seq, epoch = message.get("seq"), message.get("epoch")
        if not isinstance(seq, int) or message.get("type") == "resync":
            return "in-order"
        if isinstance(epoch, str) and epoch != self.epoch:
            new = self.epoch is not None
            self.epoch, self.seq = epoch, seq
            return "new-epoch" if new else "in-order"
        if message.get("type") == "run.snapshot" or self.seq is None:
            self.seq = seq
            return "in-order"
        gap = seq > self.seq + 1
        self.seq = max(self.seq, seq)  # concurrent publishers may swap neighbours: no gap
        return "gap" if gap else "in-order"


def ws_url(base_url: str, run_id: str) -> str:
    parts = urlsplit(base_url.rstrip("/"))
    scheme = {"https": "wss", "http": "ws"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, f"{parts.path}/ws/runs/{run_id}/", "", ""))


def _phase_of(key: str) -> str:
    """The pre-RL phase a key belongs to; "" for RL (and for any recipe without phases)."""
    return next((name for prefix, name in PRE_RL_PHASES if key.startswith(prefix)), "")


def exit_code_for(status: str) -> int:
    """0 when the run succeeded, 1 when it failed or was cancelled."""
    return 0 if status == "SUCCEEDED" else 1


@dataclass
class WatchState:
    run: dict[str, Any] = field(default_factory=dict)
    step: int | None = None
    latest: dict[str, tuple[int, Any]] = field(default_factory=dict)  # key → (step, value)

    @property
    def status(self) -> str:
        return str(self.run.get("status", "?"))

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def apply(self, message: dict[str, Any]) -> str:
        """Updates the state from one websocket message; returns its type ("resync" asks for REST)."""
        kind = str(message.get("type", ""))
        if kind in ("run.snapshot", "run.status") and isinstance(message.get("run"), dict):
            self.run = message["run"]
        elif kind == "metrics.points":
            for series in message.get("series") or []:
                if isinstance(series, dict):
                    key = str(series.get("key"))
                    for step, value in zip(series.get("steps") or [], series.get("values") or [], strict=False):
                        self.add_point(key, step, value)
        return kind

    def add_point(self, key: str, step: Any, value: Any) -> None:
        if not isinstance(step, int):
            return
        previous = self.latest.get(key)
        if previous is None or step >= previous[0]:
            self.latest[key] = (step, value)
        self.step = step if self.step is None else max(self.step, step)

    def load_keys(self, keys: list[dict[str, Any]]) -> None:
        """From ``GET /runs/{id}/metrics/keys``."""
        for entry in keys:
            if isinstance(entry, dict):
                self.add_point(str(entry.get("key")), entry.get("last_step"), entry.get("last_value"))

    def shown_keys(self) -> list[str]:
        current = self.latest
        if any(_phase_of(key) == "" for key in current):
            # Once RL runs, an earlier phase's last values are history.
            current = {k: v for k, v in current.items() if _phase_of(k) == ""}
        keys = [k for k in PREFERRED_KEYS if k in current]
        keys += sorted(k for k in current if k not in keys)
        return keys[:MAX_KEYS_SHOWN]

    @property
    def note(self) -> str:
        """What the run's work waits for on the cluster; "" when nothing waits."""
        return str(self.run.get("waiting_for") or "")

    def progress(self) -> str | None:
        """The phase and its step. A recipe with a phase before RL reports it under its own keys
        (GRPO's supervised warm start logs ``warmstart/*`` at steps 0..n-1, then RL counts from
        0 again), so the highest step of all keys would show the warm start's last step for the
        whole RL phase."""
        phases: dict[str, int] = {}
        for key, (step, _) in self.latest.items():
            phase = _phase_of(key)
            phases[phase] = max(step, phases.get(phase, step))
        if "" in phases:
            return f"RL step {phases['']}" if len(phases) > 1 else f"step {phases['']}"
        if phases:
            name, step = next(iter(phases.items()))
            return f"{name} step {step}"
        return None

    def line(self, now: datetime | None = None) -> str:
        parts = [f"run {self.run.get('id', '?')} {self.status}"]
        if self.note:
            parts.append(self.note)
        if (progress := self.progress()) is not None:
            parts.append(progress)
        parts += [f"{key}={format_value(self.latest[key][1])}" for key in self.shown_keys()]
        elapsed = run_duration(self.run, now)
        if elapsed is not None:
            parts.append(f"elapsed {format_duration(elapsed)}")
        return "  ".join(parts)


class Showable(Protocol):
    """What a Display shows: a one-line summary and a status whose change is always printed. A
    `note` attribute, where there is one (what a watched run waits for), a terminal also keeps
    whole above the rewritten line."""

    @property
    def status(self) -> str: ...

    def line(self, now: datetime | None = None) -> str: ...


class Display:
    """One rewritten line on a terminal; plain lines, at most one a second, when piped."""

    def __init__(self, out: TextIO, *, tty: bool | None = None) -> None:
        self.out = out
        self.tty = out.isatty() if tty is None else tty
        self._last_line = ""
        self._last_print = 0.0
        self._last_status = ""
        self._last_note = ""
        self._dirty = False

    def show(self, state: Showable, *, force: bool = False) -> None:
        line = state.line()
        if self.tty:
            note = str(getattr(state, "note", ""))
            if note != self._last_note:
                # The rewritten line is cut at the terminal's width; the note is kept whole.
                self._last_note = note
                if note:
                    self.message(note)
            width = shutil.get_terminal_size((120, 20)).columns
            self.out.write("\r\x1b[2K" + line[: max(10, width - 1)])
            self.out.flush()
            self._dirty = True
            return
        now = time.monotonic()
        status_changed = state.status != self._last_status
        if line != self._last_line and (force or status_changed or now - self._last_print >= 1.0):
            self.out.write(line + "\n")
            self.out.flush()
            self._last_line, self._last_print, self._last_status = line, now, state.status

    def message(self, text: str) -> None:
        self.end_line()
        self.out.write(text + "\n")
        self.out.flush()

    def end_line(self) -> None:
        if self.tty and self._dirty:
            self.out.write("\n")
            self._dirty = False


def resync(api: Api, run_id: str, state: WatchState) -> None:
    run = api.get(f"runs/{run_id}")
    if isinstance(run, dict):
        state.run = run
    try:
        keys = api.get(f"runs/{run_id}/metrics/keys")
    except CliError:
        return  # the run is what matters; metric values catch up with the next points
    if isinstance(keys, dict) and isinstance(keys.get("keys"), list):
        state.load_keys(keys["keys"])


def report_end(api: Api, run_id: str, state: WatchState, display: Display) -> int:
    display.show(state, force=True)
    display.end_line()
    status = state.status
    if status == "FAILED":
        try:
            detail = api.get(f"runs/{run_id}")
        except CliError:
            detail = state.run
        reason = str(detail.get("failure_reason") or "(no reason recorded)")
        display.message(f"run {run_id} FAILED: {reason}")
        tail = str(detail.get("log_tail") or "").rstrip()
        if tail:
            display.message("--- last lines of the job log ---\n" + tail)
    elif status == "CANCELLED":
        display.message(f"run {run_id} was cancelled")
    else:
        display.message(f"run {run_id} {status}")
    return exit_code_for(status)


def watch(
    api: Api,
    token: str | None,
    run_id: str,
    *,
    out: TextIO = sys.stdout,
    tty: bool | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    display = Display(out, tty=tty)
    state = WatchState()
    resync(api, run_id, state)  # a wrong id or missing login fails here, with the API's message
    if state.terminal:
        return report_end(api, run_id, state, display)
    display.show(state, force=True)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = ws_url(api.url, run_id)
    failures = 0
    while True:
        try:
            with connect(url, additional_headers=headers, open_timeout=10, close_timeout=2) as ws:
                order = EventOrder()
                while True:
                    try:
                        raw = ws.recv(timeout=1.0)
                    except TimeoutError:
                        display.show(state)  # keeps "elapsed" ticking
                        continue
                    try:
                        message = json.loads(raw)
                    except (TypeError, ValueError):
                        continue
                    if not isinstance(message, dict):
                        continue
                    if message.get("type") == "run.snapshot" and failures:
                        # A feed is back only once it says where it stands: a socket the
                        # server accepts and closes at once (1013) keeps the backoff growing.
                        resync(api, run_id, state)
                        display.message(f"reconnected to {url}")
                        failures = 0
                    out_of_order = order.observe(message) != "in-order"
                    if state.apply(message) == "resync" or out_of_order:
                        resync(api, run_id, state)
                    if state.terminal:
                        return report_end(api, run_id, state, display)
                    display.show(state)
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403, 404):
                raise CliError(
                    f"the live feed of run {run_id} was refused (HTTP {status})",
                    hint="check the id and your login (`barrel login`)",
                ) from exc
            reason = f"HTTP {status}"
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd is not None else None
            if code in FATAL_CLOSE_CODES:
                raise CliError(
                    f"the live feed of run {run_id} was closed: {FATAL_CLOSE_CODES[code]}",
                    hint="check the id and your login (`barrel login`)",
                ) from exc
            if code == TRY_AGAIN_LATER:
                reason = f"the server says: {exc.rcvd.reason}" if exc.rcvd and exc.rcvd.reason else "try again later"
            else:
                reason = f"connection closed ({code})" if code else "connection lost"
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        failures += 1
        delay = min(MAX_RECONNECT_DELAY_S, 0.5 * 2 ** min(failures, 6))
        display.message(f"live feed lost ({reason}); reconnecting in {delay:.0f}s")
        sleep(delay)
        try:
            resync(api, run_id, state)
        except NetworkError:
            continue  # still down; the next connect attempt backs off further
        if state.terminal:
            return report_end(api, run_id, state, display)
        display.show(state, force=True)
