"""``barrel``: submit, list, watch and cancel runs on a Barrel control plane, import metrics,
submit sweeps and compare their configs, and see the scheduler's queue and the teams' quotas.

Exit codes: 0 success; 1 error (network, API, or the watched run failed); 2 bad usage or a run
config the control plane rejected; 130 interrupted.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from barrel_cli.client import Api
from barrel_cli.command_run import command_config, team_id, team_of, upload_working_dir
from barrel_cli.compare import parse_grid, stats_report, submit_sweep
from barrel_cli.config import DEFAULT_URL, config_path, load_config, normalize_url, resolve_credentials, save_config
from barrel_cli.errors import EXIT_INTERRUPTED, EXIT_USAGE, ApiError, CliError
from barrel_cli.formatting import format_table, project_label, runs_table
from barrel_cli.importer import DEFAULT_BATCH, DEFAULT_PARALLEL, FORMATS, MAX_BATCH, MAX_PARALLEL, run_import
from barrel_cli.queue import (
    PREEMPTION_POLICIES,
    fetch_queue,
    queue_report,
    quota_changes,
    quota_report,
    resolve_team,
    set_quota,
    teams_table,
    watch_queue,
)
from barrel_cli.submission import apply_override, build_submission, parse_override
from barrel_cli.watch import watch

STATUSES = ("QUEUED", "DISPATCHING", "RUNNING", "CANCELLING", "SUCCEEDED", "FAILED", "CANCELLED")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="barrel", description="Barrel: RL post-training runs from the terminal.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("login", help="get an API token and save it", description="Get an API token and save it.")
    p.add_argument("--url", help=f"control plane URL (default: BARREL_URL, the saved URL, or {DEFAULT_URL})")
    p.add_argument("--username", "-u", help="default: asked for")
    p.add_argument("--password-stdin", action="store_true", help="read the password from standard input")

    p = sub.add_parser(
        "submit",
        help="submit a run from a YAML file, or any command (--command)",
        description="Submit a run. The YAML file has project, name, recipe, config and tags. With --command, "
        "the run is of the `command` recipe: your trainer's entrypoint (the file, if given, is its base).",
    )
    p.add_argument("file", type=Path, metavar="CONFIG.yaml", nargs="?")
    p.add_argument("--project", help="team/project (overrides the file)")
    p.add_argument("--name", help="run name (overrides the file)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a value (YAML-typed); paths outside project/name/recipe/tags go under config",
    )
    byo = p.add_argument_group("any trainer (the `command` recipe)")
    byo.add_argument(
        "--command", dest="run_command", metavar="CMD", help='the entrypoint, e.g. "python train.py --lr 1e-6"'
    )
    byo.add_argument(
        "--working-dir",
        type=Path,
        metavar="DIR",
        help="upload DIR (minus .git, .gitignore'd files); the command runs in it",
    )
    byo.add_argument(
        "--pip",
        action="append",
        default=[],
        metavar="REQ",
        help="a requirement to install, e.g. trl==0.19.1; repeat for more",
    )
    byo.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable of the job; repeat for more",
    )
    byo.add_argument("--cpus", type=float, help="CPUs the job reserves (default 1)")
    byo.add_argument("--gpus", type=float, help="GPUs the job reserves (default 0)")
    byo.add_argument(
        "--metrics-dir",
        metavar="DIR",
        help="a folder of the working directory (e.g. runs) whose TensorBoard events or JSONL logs stream into the run",
    )
    byo.add_argument(
        "--metrics-format", choices=("auto", "tensorboard", "jsonl"), help="what --metrics-dir holds (default auto)"
    )
    byo.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="a folder of the working directory (e.g. out) whose Hugging Face checkpoints are registered with the run",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the created run as JSON")
    out.add_argument(
        "--quiet", "-q", action="store_true", help="print only the run's id, for scripts: RUN=$(barrel submit -q ...)"
    )

    p = sub.add_parser(
        "sweep",
        help="submit a grid of configs x seeds as one run group",
        description="Submit one run per combination of the --grid values and seed, as a run group. The request "
        "carries an Idempotency-Key and is sent again while its answer is lost: its runs are made once.",
    )
    p.add_argument("file", type=Path, metavar="CONFIG.yaml")
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="FIELD.PATH=V1,V2,...",
        help="a config field and its values (YAML-typed); repeat for more fields",
    )
    p.add_argument("--seeds", type=_positive_int, default=1, help="seeds per grid point: 0..N-1 (default 1)")
    p.add_argument("--project", help="team/project (overrides the file)")
    p.add_argument("--name", help="group name, prefix of its runs' names (overrides the file)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a value of the base config, as for submit")  # fmt: skip
    p.add_argument("--key", help="your Idempotency-Key (default: a fresh one); reuse it to retry a sweep safely")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the group as JSON")
    out.add_argument("--quiet", "-q", action="store_true", help="print only the group's id")

    p = sub.add_parser(
        "compare",
        help="whether a group's configs differ on a metric",
        description="Split a run group (or runs) by a config field and test each part against a baseline: means "
        "with Student-t intervals, IQMs, Welch's test, the seeds needed, and a verdict.",
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--group", type=_run_id, metavar="ID", help="a run group (`barrel sweep` prints its id)")
    target.add_argument("--runs", metavar="ID,ID,...", help="runs, comma-separated")
    p.add_argument("--metric", default="reward/mean", help="the metric key (default reward/mean)")
    p.add_argument(
        "--by",
        metavar="KEY",
        help="what to split by: a config field (algorithm.lr), tag:<prefix> or param:<name> (default: a sweep's first "
        "grid field)",
    )
    p.add_argument("--summary", choices=("final", "best", "auc", "at_step"), default="final",
                   help="how a run becomes one number (default final: the mean of its last 10%% of steps)")  # fmt: skip
    p.add_argument("--step", type=int, help="the step, with --summary at_step")
    p.add_argument("--baseline", help="the part the others are compared with (default: the first)")
    p.add_argument("--lower-is-better", action="store_true", help="the metric is a loss")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")

    p = sub.add_parser("runs", help="list runs", description="List runs, newest first.")
    p.add_argument("--status", type=str.upper, choices=STATUSES, metavar="STATUS", help=", ".join(STATUSES))
    p.add_argument("--project", help="team/project, or a project id")
    p.add_argument("--team", help="team slug")
    p.add_argument("--name", help="runs whose name contains this")
    p.add_argument("--limit", type=_positive_int, default=20, help="at most this many (default 20)")
    p.add_argument("--json", action="store_true", help="print the runs as JSON")

    p = sub.add_parser(
        "watch",
        help="follow a run live",
        description="Follow a run live. Exits 0 if it succeeds, 1 if it fails or is cancelled.",
    )
    p.add_argument("run_id", metavar="ID", type=_run_id)

    p = sub.add_parser("cancel", help="cancel a run", description="Cancel a run.")
    p.add_argument("run_id", metavar="ID", type=_run_id)

    p = sub.add_parser(
        "queue",
        help="the scheduler's queue: waiting runs, their reasons and estimated starts",
        description="The runs waiting for admission, in the scheduler's order per team, with what each "
        "waits for and its estimated start (with a range); the runs admitted; each team's quota and what "
        "it holds. Your teams, or every team for a cluster admin.",
    )
    p.add_argument("--team", metavar="SLUG_OR_ID", help="only this team's queue")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--watch", "-w", action="store_true", help="redraw every few seconds until Ctrl-C")
    out.add_argument("--json", action="store_true", help="print the queue as JSON")

    p = sub.add_parser(
        "secrets",
        help="list, set or delete a team's secrets",
        description="A team's secrets are environment variables of its command runs; their values are never "
        "shown. Setting and deleting them is for team admins; set reads the value from standard input.",
    )
    p.add_argument("action", choices=("list", "set", "delete"))
    p.add_argument("name", nargs="?", metavar="NAME", help="the variable's name (set, delete)")
    p.add_argument("--team", required=True, help="team slug")

    p = sub.add_parser(
        "quota",
        help="show or set a team's quota",
        description="Show the teams' quotas (what their admitted runs may hold), weights and what they hold "
        "now; with --cpu/--gpu/--weight/--borrow/--preemption, set a team's (cluster admins only).",
    )
    p.add_argument("team", nargs="?", metavar="TEAM", help="team slug or id (default: every team you can see)")
    p.add_argument("--cpu", metavar="N|none", help="CPUs its admitted runs may hold; none: no limit")
    p.add_argument("--gpu", metavar="N|none", help="GPUs its admitted runs may hold; none: no limit")
    p.add_argument("--weight", type=float, metavar="W", help="fair-share weight (twice the weight, twice the share)")
    p.add_argument("--borrow", action=argparse.BooleanOptionalAction, default=None,
                   help="may run beyond its quota on capacity nobody else queues for")  # fmt: skip
    p.add_argument("--preemption", choices=PREEMPTION_POLICIES,
                   help="which admitted runs its waiting runs may ask to checkpoint and make room: never; "
                   "borrowed (other teams' runs beyond their quota); lower_priority (those, and its own "
                   "of a lower priority)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the quota(s) as JSON")

    p = sub.add_parser(
        "import",
        help="import TensorBoard or JSONL metrics into a run",
        description=(
            "Import metrics from TensorBoard event files (a file, or a folder of events.out.tfevents.*) and "
            'JSONL logs (one object per line: {"step": n, "key": value, ...}, or verl\'s file logger '
            '{"step": n, "data": {...}}). Points are keyed by run, key and step, so importing again never '
            "duplicates them."
        ),
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="FILE_OR_DIR")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--run", type=_run_id, metavar="ID", help="an existing run")
    target.add_argument("--project", help="team/project: create a new run there (see --name)")
    p.add_argument("--name", help="name of the new run (default: the first file's name)")
    p.add_argument("--format", choices=FORMATS, default="auto", help="file format (default: by name and content)")
    p.add_argument(
        "--batch-size",
        type=_positive_int,
        default=DEFAULT_BATCH,
        metavar="N",
        help=f"points per request (default {DEFAULT_BATCH}, at most {MAX_BATCH})",
    )
    p.add_argument(
        "--parallel",
        type=_positive_int,
        default=DEFAULT_PARALLEL,
        metavar="N",
        help=f"requests in flight at once, keys dealt among them (default {DEFAULT_PARALLEL}, at most {MAX_PARALLEL})",
    )
    return parser


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from exc
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def _run_id(value: str) -> str:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"{value!r} is not a run id (a number, as `barrel runs` shows)")
    return value


# ---------------------------------------------------------------------- commands


def _api(environ: Mapping[str, str]) -> tuple[Api, str | None]:
    creds = resolve_credentials(environ)
    if not creds.token:
        raise CliError(f"not logged in to {creds.url}", hint="run `barrel login` or set BARREL_TOKEN")
    return Api(creds.url, creds.token), creds.token


def cmd_login(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    path = config_path(environ)
    stored = load_config(path)
    url = normalize_url(args.url or environ.get("BARREL_URL") or stored.get("url") or DEFAULT_URL)
    username = args.username or input("Username: ").strip()
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"Password for {username} at {url}: ")
    if not username or not password:
        raise CliError("a username and a password are needed", exit_code=EXIT_USAGE)
    with Api(url, None) as api:
        try:
            answer = api.post("tokens", {"username": username, "password": password, "name": _token_name()})
        except ApiError as exc:
            if exc.status in (400, 401, 403):
                exc.hint = "check the username and password"
            raise
    token = answer.get("token") if isinstance(answer, dict) else None
    if not token:
        raise CliError(f"{url} answered without a token", hint="is this URL a Barrel control plane?")
    save_config(path, url=url, token=str(token))
    print(f"Logged in to {url} as {username}; token saved to {path}")
    if environ.get("BARREL_TOKEN"):
        print("note: BARREL_TOKEN is set and takes precedence over the saved token")
    return 0


def _token_name() -> str:
    return f"cli@{socket.gethostname()}"[:100]


def _refused(what: str, exc: ApiError) -> int:
    """A submission the control plane refused (400): its message and each bad field; exit 2."""
    print(f"the control plane rejected the {what}: {exc.message}", file=sys.stderr)
    for path, messages in exc.fields.items():
        for message in messages:
            print(f"  {path}: {message}", file=sys.stderr)
    return EXIT_USAGE


def cmd_submit(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    body = _submission(args)
    api, _ = _api(environ)
    with api:
        if args.working_dir is not None:
            ref = upload_working_dir(api, team_of(api, body["project"]), args.working_dir)
            body["config"]["working_dir"] = ref
        try:
            run = api.post("runs", body)
        except ApiError as exc:
            if exc.status == 400:
                return _refused("run", exc)
            raise
    if args.json:
        print(json.dumps(run, indent=2))
        return 0
    if args.quiet:
        print(run.get("id"))
        return 0
    print(f"run {run.get('id')} submitted: {run.get('name')} ({run.get('recipe')}) in {project_label(run)}")
    print(f"status: {run.get('status')}")
    print(f"follow it with: barrel watch {run.get('id')}")
    return 0


def _submission(args: argparse.Namespace) -> dict[str, Any]:
    """The body of POST /runs: from the file, or from --command and its flags (over the file)."""
    byo = [args.working_dir, args.cpus, args.gpus, args.metrics_dir, args.metrics_format, args.checkpoint_dir,
           *args.pip, *args.env]  # fmt: skip
    if args.run_command is None:
        if args.file is None:
            raise CliError("give a run file, or --command", hint="barrel submit run.yaml, or barrel submit "
                           '--project team/proj --command "python train.py"', exit_code=EXIT_USAGE)  # fmt: skip
        if any(value is not None and value != [] for value in byo):
            raise CliError("--working-dir, --pip, --env, --cpus, --gpus, --metrics-dir and --checkpoint-dir go with "
                           "--command", exit_code=EXIT_USAGE)  # fmt: skip
        return build_submission(args.file, project=args.project, name=args.name, overrides=args.overrides)
    if args.file is not None:
        overrides = [*args.overrides, "recipe=command"]
        doc = build_submission(args.file, project=args.project, name=args.name, overrides=overrides)
    else:
        if args.project is None:
            raise CliError("no project given", hint="pass --project team/project", exit_code=EXIT_USAGE)
        doc = {"project": args.project, "name": args.name or "", "config": {}, "tags": []}
        for expr in args.overrides:
            target, value = parse_override(expr)
            apply_override(doc, target, value)
    doc["recipe"] = "command"
    doc["config"] = command_config(
        doc["config"],
        command=args.run_command,
        pip=args.pip,
        env=args.env,
        cpus=args.cpus,
        gpus=args.gpus,
        watch={"metrics_dir": args.metrics_dir, "metrics_format": args.metrics_format,
               "checkpoint_dir": args.checkpoint_dir},
    )  # fmt: skip
    if not doc.get("name"):
        doc.pop("name")  # the control plane names it
    return doc


def cmd_sweep(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    body = build_submission(args.file, project=args.project, name=args.name, overrides=args.overrides)
    body |= {"grid": parse_grid(args.grid), "seeds": args.seeds}
    api, _ = _api(environ)
    with api:
        try:
            group, made = submit_sweep(api, body, key=args.key, out=sys.stderr)
        except ApiError as exc:
            if exc.status == 400:
                return _refused("sweep", exc)
            raise
    if args.json:
        print(json.dumps(group, indent=2))
        return 0
    if args.quiet:
        print(group.get("id"))
        return 0
    runs = group.get("runs", [])
    said = "submitted" if made else "already submitted with this key"
    print(f"group {group.get('id')} {said}: {len(runs)} runs of {group.get('recipe')} in {project_label(group)}")
    for run in runs:
        print(f"  run {run.get('id')}: {run.get('name')}")
    print(f"compare its configs with: barrel compare --group {group.get('id')}")
    return 0


def cmd_compare(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if args.summary == "at_step" and args.step is None:
        raise CliError("--summary at_step needs --step", exit_code=EXIT_USAGE)
    api, _ = _api(environ)
    with api:
        by = args.by
        if args.group:
            group = api.get(f"groups/{args.group}")
            runs = [run["id"] for run in group.get("runs", [])]
            by = by or next(iter(group.get("grid") or {}), None)
        else:
            try:
                runs = [int(part) for part in args.runs.split(",") if part.strip()]
            except ValueError:
                message = f"--runs {args.runs!r}: expected run ids, comma-separated"
                raise CliError(message, exit_code=EXIT_USAGE) from None
        if not by:
            raise CliError("--by KEY is needed: the group is no sweep to take it from", exit_code=EXIT_USAGE)
        body: dict[str, Any] = {
            "metric": args.metric,
            "summary": args.summary,
            "runs": runs,
            "group_by": by,
            "higher_is_better": not args.lower_is_better,
        }
        if args.step is not None:
            body["step"] = args.step
        if args.baseline:
            body["baseline"] = args.baseline
        result = api.post("compare/stats", body)
    print(json.dumps(result, indent=2) if args.json else stats_report(result))
    return 0


def resolve_project(api: Api, project: str) -> dict[str, str | int]:
    """Query parameters for ``GET /runs`` from ``team/project`` or a project id."""
    if project.isdigit():
        return {"project": int(project)}
    team, sep, name = project.partition("/")
    if not sep or not team or not name:
        raise CliError(f"--project {project!r}: expected team/project or a project id", exit_code=EXIT_USAGE)
    page = api.get("projects", team=team, limit=1000)
    results = page.get("results", []) if isinstance(page, dict) else page
    for candidate in results or []:
        if isinstance(candidate, dict) and candidate.get("name") == name:
            return {"team": team, "project": int(candidate["id"])}
    raise CliError(f"no project {name!r} in team {team!r}", hint="`barrel runs --team TEAM` lists the team's runs")


def cmd_runs(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    api, _ = _api(environ)
    with api:
        params: dict[str, str | int] = {"limit": args.limit}
        if args.status:
            params["status"] = args.status
        if args.team:
            params["team"] = args.team
        if args.name:
            params["name"] = args.name
        if args.project:
            params.update(resolve_project(api, args.project))
        page = api.request("GET", "runs", params=params)
    results: list[dict[str, Any]] = page.get("results", []) if isinstance(page, dict) else list(page or [])
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    if not results:
        print("no runs")
        return 0
    print(runs_table(results))
    count = page.get("count") if isinstance(page, dict) else None
    if isinstance(count, int) and count > len(results):
        print(f"({len(results)} of {count} runs; --limit shows more)")
    return 0


def cmd_watch(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    api, token = _api(environ)
    with api:
        return watch(api, token, args.run_id)


def cmd_cancel(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    api, _ = _api(environ)
    with api:
        run = api.post(f"runs/{args.run_id}/cancel")
    status = run.get("status") if isinstance(run, dict) else None
    print(f"run {args.run_id}: {status or 'cancel requested'}")
    return 0


def cmd_import(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if args.name and not args.project:
        raise CliError("--name names a new run; use it with --project", exit_code=EXIT_USAGE)
    api, _ = _api(environ)
    with api:
        return run_import(
            api,
            paths=args.paths,
            fmt=args.format,
            run_id=args.run,
            project=args.project,
            name=args.name,
            batch=min(args.batch_size, MAX_BATCH),
            out=sys.stdout,
            parallel=min(args.parallel, MAX_PARALLEL),
        )


def cmd_queue(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    api, _ = _api(environ)
    with api:
        team_id = resolve_team(api, args.team) if args.team else None
        if args.watch:
            return watch_queue(api, team_id, sys.stdout)
        queue = fetch_queue(api, team_id)
    print(json.dumps(queue, indent=2) if args.json else queue_report(queue))
    return 0


def cmd_quota(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    changes = quota_changes(args.cpu, args.gpu, args.weight, args.borrow, args.preemption)
    api, _ = _api(environ)
    with api:
        if changes:
            if not args.team:
                raise CliError("setting a quota needs the TEAM (slug or id)", exit_code=EXIT_USAGE)
            try:
                quota = set_quota(api, resolve_team(api, args.team), changes)
            except ApiError as exc:
                if exc.status == 400:
                    return _refused("quota", exc)
                raise
            shown: Any = quota
        elif args.team:
            shown = api.get(f"teams/{resolve_team(api, args.team)}/quota")
        else:
            shown = fetch_queue(api, None).get("teams", [])
    if args.json:
        print(json.dumps(shown, indent=2))
    elif isinstance(shown, list):
        print(teams_table(shown) if shown else "no teams")
    else:
        if changes:
            print(f"quota of {shown.get('slug')} set")
        print(quota_report(shown))
    return 0


def cmd_secrets(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if args.action != "list" and not args.name:
        raise CliError(f"secrets {args.action} needs the secret's NAME", exit_code=EXIT_USAGE)
    value = sys.stdin.readline().rstrip("\r\n") if args.action == "set" else ""
    api, _ = _api(environ)
    with api:
        path = f"teams/{team_id(api, args.team)}/secrets"
        try:
            if args.action == "set":
                api.request("PUT", f"{path}/{args.name}", json={"value": value})
                print(f"secret {args.name} set")
            elif args.action == "delete":
                api.request("DELETE", f"{path}/{args.name}")
                print(f"secret {args.name} deleted")
            else:
                rows = [[s["name"], s["updated_at"], s.get("updated_by") or ""] for s in api.get(path)]
                print(format_table(["NAME", "UPDATED", "BY"], rows) if rows else "no secrets")
        except ApiError as exc:
            if exc.status == 400:
                return _refused("secret", exc)
            raise
    return 0


COMMANDS = {
    "login": cmd_login,
    "secrets": cmd_secrets,
    "submit": cmd_submit,
    "sweep": cmd_sweep,
    "compare": cmd_compare,
    "runs": cmd_runs,
    "watch": cmd_watch,
    "cancel": cmd_cancel,
    "import": cmd_import,
    "queue": cmd_queue,
    "quota": cmd_quota,
}


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    env = os.environ if environ is None else environ
    try:
        return COMMANDS[args.command](args, env)
    except CliError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `barrel runs | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
