"""Readers of the metric files trainers write: TensorBoard event files and JSONL logs.

Standard library only, so both `barrel import` (the CLI, on a laptop) and the command recipe's
watcher (inside a Ray job) read them the same way.
"""

from __future__ import annotations

import re

# What the control plane accepts in a key (controlplane/metrics/wire.py KEY_RE); any other
# character is stored as `_`.
BAD_KEY_CHARS = re.compile(r"[^\w./\- @:]")


def clean_key(key: str) -> str:
    """A tag or JSONL key as the control plane accepts it."""
    return BAD_KEY_CHARS.sub("_", key)
