"""Next-battle latency with many voters asking at once, through the web server:

    .venv/bin/python -m benchmarks.battles [--items 50] [--votes 20000] [--voters 20] [--prompts 200]
        [--bursts 10] [--gap-s 3] [--web-workers 1] [--modes prepared,prepared-unordered,prepared-view]
        [--auth token|session] [--client raw|httpx] [--first reserved|unreserved]
        [--database-url ...]

Stacks side by side (`--modes`, the first three by default; web server with `--web-workers` processes,
Celery worker and beat; no Ray; each on a Redis server of its own, never REDIS_URL's), each with
the same OPEN eval of `--items` candidates and `--votes` votes from `--voters` voters (written
straight into its database, as benchmarks/ranking_live.py writes it), differing in their settings:

Voters authenticate with an API token each (`--auth token`, a script's way) or as a browser does
(`--auth session`: a session made by Django's login and the CSRF header the dashboard sends).

- prepared: each voter's next battle is drawn by a Celery task while they read the one shown,
  which also writes the body battles/next returns into its row; battles/next marks the
  reservation shown and returns that body with one conditional UPDATE
  (BARREL_EVALS_NEXT_PREPARED=1, the default),
  on the ASGI route's threads (evals/next_route.py; BARREL_EVALS_NEXT_ROUTE=1, the default),
  the web process's other requests waiting for the hand-outs in flight, the claim a prepared
  statement (controlplane/dbprepared.py) and the Celery worker at a lower CPU priority (the
  defaults);
- prepared-unordered: the same, without those three (BARREL_EVALS_NEXT_FIRST_HOLD_S=0,
  BARREL_DB_PREPARE=0, BARREL_WORKER_NICE=0: the behaviour before them);
- prepared-view: the same, but through the Django view on its one sync thread
  (BARREL_EVALS_NEXT_ROUTE=0, the behaviour before the route);
- reserved: the same reservation, but battles/next reads it and builds its body from the
  database (BARREL_EVALS_NEXT_PREPARED=0, the behaviour before prepared bodies);
- in-line: every battles/next draws the battle itself (=0, the behaviour before reservations),
  reading the pair priority from the cached ranking as both do.

Then `--bursts` times, for each stack in turn (alternating which goes first, since the machine is
shared): all voters ask for their next battle at the same moment (a barrier), each over its own
connection (a request written to it, as a load generator writes it: RawAsk; `--client httpx` asks
through httpx, whose own queueing in this one process is then counted too), and then vote on it,
and read for `--gap-s` before the next burst; the refresh task runs after each vote as in
production. The first burst comes right after the eval opened: each voter's first battle was
reserved as it opened (pick.battles_prepare_first), but on a stack that reserves nothing
(in-line) it is drawn in-line, and `--first unreserved` leaves every stack to draw it so; it is
reported apart from the later bursts.
Then, one stack at a time, voters at their own pace: each reads its battle for a random time
(mean `--think-s`) before asking again, `--asks` times. Printed: per stack and phase, the
median, p90 and p99 of the battles/next round trips and their largest (and in bursts the median
of a burst's slowest answer). Figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from benchmarks.common import Place, add_place_options, bench_stack, median, pct
from controlplane.devstack import Stack

# Each stack's settings, over the defaults.
MODES: dict[str, dict[str, str]] = {
    "prepared": {},
    "prepared-unordered": {"BARREL_EVALS_NEXT_FIRST_HOLD_S": "0", "BARREL_DB_PREPARE": "0", "BARREL_WORKER_NICE": "0"},
    "prepared-view": {"BARREL_EVALS_NEXT_ROUTE": "0"},
    "reserved": {"BARREL_EVALS_NEXT_PREPARED": "0", "BARREL_EVALS_NEXT_ROUTE": "0"},
    "in-line": {"BARREL_EVALS_RESERVE_NEXT": "0", "BARREL_EVALS_NEXT_PREPARED": "0", "BARREL_EVALS_NEXT_ROUTE": "0"},
}


def seed(items: int, votes: int, voters: int, prompts: int, first: str) -> dict[str, Any]:
    """In the stack's database (this process's DATABASE_URL): the eval, its voters as members
    with tokens, a serving behind every vote (so nobody is served a battle twice), and (`first`
    reserved) each voter's first battle reserved as the eval's opening reserves it."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client

    from benchmarks.ranking_live import build_eval
    from controlplane.evals.models import Serving, Vote
    from controlplane.evals.pick import battles_prepare_first
    from controlplane.evals.refresh import ranking_cached
    from controlplane.teams.models import Membership, Role
    from controlplane.teams.services import token_create

    evaluation, _ = build_eval(items, votes, voters, prompts, extra=0, team_slug="bench")
    people = sorted({v.voter for v in Vote.objects.filter(battle__eval=evaluation).select_related("voter")}, key=str)
    Membership.objects.bulk_create(Membership(team=evaluation.project.team, user=p, role=Role.MEMBER) for p in people)
    Serving.objects.bulk_create(
        Serving(battle_id=b, voter_id=v, swapped=False)
        for b, v in Vote.objects.filter(battle__eval=evaluation).values_list("battle_id", "voter_id")
    )
    ranking_cached(evaluation, with_flagged=False)  # what the refresh task left after the last vote
    if first == "reserved":
        battles_prepare_first(eval_id=evaluation.id)  # as the eval's opening does, with the stack's settings
    sessions = []
    for person in people:  # a browser's login each: a session in the database, as the login view makes it
        browser = Client()
        browser.force_login(person)
        sessions.append(browser.cookies[settings.SESSION_COOKIE_NAME].value)
    tokens = [token_create(user=p, name="bench")[1] for p in people]
    return {"eval": evaluation.id, "tokens": tokens, "sessions": sessions}


def seeded(stack: Stack, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.battles", "--seed", *(f"--{k}={getattr(args, k)}" for k in
               ("items", "votes", "voters", "prompts", "first"))]  # fmt: skip
    out = subprocess.run(command, env=stack.env(), check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


class RawAsk:
    """battles/next as a load generator sends it: the request's bytes built once, written to a
    connection opened beforehand, the answer read up to its Content-Length. Twenty threads of one
    Python process that each build and parse requests with httpx queue on that process's GIL and
    cores; measured here, that queueing (tens of milliseconds: `--client httpx`) was counted in
    the server's round trips."""

    def __init__(self, url: str, eval_id: int, client: httpx.Client) -> None:
        parsed = urlsplit(url)
        self.address = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        lines = [f"POST /api/v1/evals/{eval_id}/battles/next HTTP/1.1", f"Host: {parsed.netloc}", "Content-Length: 0"]
        lines += [
            f"{name}: {value}"
            for name, value in client.headers.items()
            if name.lower() in ("authorization", "cookie", "x-csrftoken")
        ]
        self.request = ("\r\n".join(lines) + "\r\n\r\n").encode()
        self.sock: socket.socket | None = None

    def connect(self) -> None:
        self.sock = socket.create_connection(self.address, timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def ask(self) -> tuple[int, bytes]:
        """The status and body of one battles/next, on the connection opened by connect()."""
        assert self.sock is not None
        self.sock.sendall(self.request)
        got = b""
        while b"\r\n\r\n" not in got:
            got += self._recv()
        head, _, body = got.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        length = int(fields.get("content-length", "0"))
        while len(body) < length:
            body += self._recv()
        return int(lines[0].split()[1]), body

    def _recv(self) -> bytes:
        assert self.sock is not None
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection mid-answer")
        return chunk

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def burst(url: str, eval_id: int, clients: list[httpx.Client], raw: bool) -> list[float]:
    """Every voter asks for a battle at once and votes on it; the round trips of the asks."""
    barrier = threading.Barrier(len(clients))
    times: list[float] = []
    failures: list[str] = []

    def voter(client: httpx.Client) -> None:
        asker = RawAsk(url, eval_id, client) if raw else None
        if asker is not None:
            asker.connect()  # before the barrier: not a part of the round trip
        barrier.wait()
        t0 = time.perf_counter()
        if asker is not None:
            code, content = asker.ask()
            times.append(time.perf_counter() - t0)
            asker.close()
        else:
            served = client.post(f"{url}/api/v1/evals/{eval_id}/battles/next")
            times.append(time.perf_counter() - t0)
            code, content = served.status_code, served.content
        if code != 200:
            failures.append(f"battles/next {code}: {content[:200]!r}")
            return
        choice = random.choice(["a", "b", "tie"])
        voted = client.post(f"{url}/api/v1/battles/{json.loads(content)['battle']}/votes", json={"choice": choice})
        if voted.status_code != 201:
            failures.append(f"vote {voted.status_code}: {voted.text[:200]}")

    threads = [threading.Thread(target=voter, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"a burst failed: {failures[0]}")
    return times


def steady(url: str, eval_id: int, clients: list[httpx.Client], think_s: float, asks: int) -> list[float]:
    """Every voter asks, votes, then reads the next battle for a random time (uniform up to twice
    `think_s`) before asking again, `asks` times: voters at their own pace, not in step."""
    times: list[float] = []
    failures: list[str] = []
    rng = random.Random(0)
    pauses = [[rng.uniform(0, 2 * think_s) for _ in range(asks)] for _ in clients]

    def voter(client: httpx.Client, mine: list[float]) -> None:
        for pause in mine:
            time.sleep(pause)
            t0 = time.perf_counter()
            served = client.post(f"{url}/api/v1/evals/{eval_id}/battles/next")
            times.append(time.perf_counter() - t0)
            if served.status_code != 200:
                failures.append(f"battles/next {served.status_code}: {served.text[:200]}")
                return
            voted = client.post(f"{url}/api/v1/battles/{served.json()['battle']}/votes", json={"choice": "a"})
            if voted.status_code != 201:
                failures.append(f"vote {voted.status_code}: {voted.text[:200]}")
                return

    threads = [threading.Thread(target=voter, args=(c, p)) for c, p in zip(clients, pauses, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"a steady round failed: {failures[0]}")
    return times


CSRF = "b" * 32  # the CSRF cookie's secret; the dashboard sends it back in X-CSRFToken


def voter_clients(world: dict[str, Any], auth: str) -> list[httpx.Client]:
    """One client per voter: with their API token, or as their browser (session and CSRF cookies,
    and the X-CSRFToken header the dashboard sends)."""
    if auth == "token":
        return [httpx.Client(headers={"Authorization": f"Bearer {t}"}, timeout=120) for t in world["tokens"]]
    return [
        httpx.Client(headers={"Cookie": f"sessionid={s}; csrftoken={CSRF}", "X-CSRFToken": CSRF}, timeout=120)
        for s in world["sessions"]
    ]


def loadavg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def summary(name: str, t: list[float]) -> str:
    return (
        f"{name:>13}: median {median(t) * 1000:6.0f} ms, p90 {pct(t, 0.9) * 1000:6.0f} ms, "
        f"p99 {pct(t, 0.99) * 1000:6.0f} ms, max {max(t) * 1000:6.0f} ms (n={len(t)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--votes", type=int, default=20_000)
    parser.add_argument("--voters", type=int, default=20)
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--bursts", type=int, default=10)
    parser.add_argument("--think-s", type=float, default=3.0, help="a voter's mean reading time in the steady phase")
    parser.add_argument("--asks", type=int, default=5, help="asks per voter in the steady phase")
    parser.add_argument("--web-workers", type=int, default=1, help="web server processes of each stack")
    parser.add_argument(
        "--auth", choices=["token", "session"], default="token", help="voters by API token (scripts) or session"
    )
    parser.add_argument(
        "--gap-s", type=float, default=3.0, help="seconds after each burst: the voters read before they all ask again"
    )
    parser.add_argument(
        "--modes",
        default="prepared,prepared-unordered,prepared-view",
        help="the stacks to compare, of " + ", ".join(MODES),
    )
    parser.add_argument(
        "--client", choices=["raw", "httpx"], default="raw",
        help="how bursts ask: a request written to an open connection (raw), or through httpx",
    )  # fmt: skip
    parser.add_argument(
        "--first", choices=["reserved", "unreserved"], default="reserved",
        help="each voter's first battle reserved as the eval opens (as it is), or drawn in-line at the first burst",
    )  # fmt: skip
    parser.add_argument("--seed", action="store_true", help=argparse.SUPPRESS)  # inside a stack's environment
    add_place_options(parser)
    args = parser.parse_args()
    if args.seed:
        print(json.dumps(seed(args.items, args.votes, args.voters, args.prompts, args.first)))
        return

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        parser.error(f"--modes: a comma-separated choice of {', '.join(MODES)}")
    place = Place.of(args)
    stacks: dict[str, Stack] = {}
    try:
        for mode in modes:
            env = {**MODES[mode], "BARREL_WEB_WORKERS": str(args.web_workers)}
            # Every stack on a Redis server of its own, the first too: on REDIS_URL's database any
            # other Celery worker there (a test's, another stack's) takes reservation tasks off the
            # shared queue, and prepared bodies of the same eval id would meet.
            stacks[mode] = bench_stack(place, with_ray=False, suffix=f"bench_battles_{mode.replace('-', '_')}",
                                       own_redis=True, env=env)  # fmt: skip
        worlds = {mode: seeded(stack, args) for mode, stack in stacks.items()}
        print(
            f"## battles/next: {args.items} candidates, {args.prompts} prompts, {args.votes} votes; "
            f"{args.voters} voters asking at once, {args.bursts} bursts per stack, "
            f"{args.web_workers} web process(es) each, voters by {args.auth}, bursts asked by the {args.client} "
            f"client; load average {loadavg()}"
        )
        clients = {mode: voter_clients(world, args.auth) for mode, world in worlds.items()}
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        slowest: dict[str, list[float]] = {mode: [] for mode in modes}
        for b in range(args.bursts):
            for mode in modes[:: 1 if b % 2 == 0 else -1]:
                got = burst(stacks[mode].url, worlds[mode]["eval"], clients[mode], args.client == "raw")
                times[mode] += got
                slowest[mode].append(max(got))
                time.sleep(args.gap_s)
            print(f"burst {b + 1}: " + ", ".join(f"{m} slowest {slowest[m][-1] * 1000:.0f} ms" for m in modes))
        voters = len(worlds[modes[0]]["tokens"])
        print(f"all voters asking at the same moment, the first burst (first battles {args.first} as the eval opened):")
        for mode in modes:
            print(summary(mode, times[mode][:voters]))
        print("all voters asking at the same moment, later bursts:")
        for mode in modes:
            later = times[mode][voters:]
            print(summary(mode, later) + f"; median slowest of a burst {median(slowest[mode][1:]) * 1000:.0f} ms")
        for mode in modes[1:]:
            ratio = pct(times[mode][voters:], 0.99) / pct(times[modes[0]][voters:], 0.99)
            print(f"p99 {mode} / {modes[0]}, later bursts: {ratio:.1f}x")
        print(f"voters at their own pace (reading {args.think_s:g} s on average between asks), one stack at a time:")
        paced = {
            mode: steady(stacks[mode].url, worlds[mode]["eval"], clients[mode], args.think_s, args.asks)
            for mode in modes
        }
        for mode in modes:
            print(summary(mode, paced[mode]))
        print(f"load average at the end {loadavg()} ({os.cpu_count()} cores)")
    finally:
        for stack in stacks.values():
            stack.stop()


if __name__ == "__main__":
    main()
