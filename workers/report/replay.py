"""Send a spool file that a job left behind: ``python -m workers.report.replay PATH``.

The API URL and token come from ``--api-url``/``--token`` or ``BARREL_API_URL``/``BARREL_RUN_TOKEN``
(``BARREL_TOKEN``, a user token of a team member, works too). Points are keyed by (run, key,
step) on the server, so replaying a file twice, or one that was partly delivered, is harmless.
Records torn by a crash or corrupted on disk fail their CRC and are skipped and counted, never
sent; the records after them are.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from workers.report.spool import ReplayResult, replay_spool

__all__ = ["ReplayResult", "main", "replay_spool"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.report.replay",
        description="Send the metric points a job left in a spool file.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="spool file(s) (*.spool)")
    parser.add_argument(
        "--api-url",
        default=os.environ.get("BARREL_API_URL"),
        help="default: $BARREL_API_URL",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("BARREL_RUN_TOKEN") or os.environ.get("BARREL_TOKEN"),
        help="default: $BARREL_RUN_TOKEN or $BARREL_TOKEN",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=300.0,
        help="give up after this many seconds per file",
    )
    args = parser.parse_args(argv)
    if not args.api_url or not args.token:
        parser.error("need --api-url and --token (or BARREL_API_URL and BARREL_RUN_TOKEN)")
    logging.basicConfig(level=logging.INFO, format="[barrel] %(message)s", stream=sys.stdout)
    status = 0
    for path in args.paths:
        if not path.exists():
            print(f"{path}: no such file (already replayed?)", file=sys.stderr)
            status = 1
            continue
        result = replay_spool(path, args.api_url, args.token, deadline_s=args.deadline)
        line = f"{path}: {result.replayed} point(s) delivered, {result.dropped} dropped"
        if result.damaged:
            line += f", {result.damaged} damaged record(s) ({result.damaged_bytes} bytes) skipped"
        if result.remaining:
            print(
                f"{line}; points remain ({result.error or 'deadline reached'})",
                file=sys.stderr,
            )
            status = 1
        else:
            print(f"{line}; file done")
    return status


if __name__ == "__main__":
    sys.exit(main())
