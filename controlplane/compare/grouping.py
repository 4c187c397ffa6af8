"""Runs grouped after the fact by a key: runs submitted separately (seeds of one config, an
external trainer's runs) become groups for the statistics of POST /compare/stats.

A grouping key is one of (the compare page writes the same syntax in its `by=`):
- `config.<dotted path>`, or the bare dotted path as before (`optim.lr`): a field of the run's
  config; runs without it form the group `<path> unset`. A config whose top-level field is
  itself named `config` is reached as `config.config.…`;
- `tag:<prefix>`: Barrel tags written `<prefix>:<value>` (or `<prefix>=<value>`) group by their
  value; runs without such a tag form the group `(none)`. A run with two such tags of different
  values is an error naming it: a run is one sample of one group, or the test is wrong;
- `param:<name>`: the run's MLflow param (external runs keep their params there, not in their
  config); runs without it form `(none)`.
Groups are named `<path, prefix or name>=<value>` and come in the order their values first appear.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import prefetch_related_objects

from controlplane.runs.models import Run

CONFIG = "config."
TAG = "tag:"
PARAM = "param:"
NONE = "(none)"
MAX_KEY_LEN = 250  # an MLflow param key's limit, past the config path's and tag's
SYNTAX = "a config path (optim.lr or config.optim.lr), tag:<prefix> or param:<name>"

# What a tag may hold (RunSubmitSerializer's tags), less the separators a prefix ends at.
_TAG_PREFIX = re.compile(r"[\w.:/@+-]+")
# `word:` at the start reads as a kind of key: an unknown one is a typo (`tags:seed`), not a path.
_KIND = re.compile(r"([A-Za-z_]+):")

GroupKind = Literal["config", "tag", "param"]


class GroupingError(ValueError):
    """A key that cannot be read, or runs that cannot be split by it; the message says why."""


@dataclass(frozen=True)
class GroupKey:
    kind: GroupKind
    name: str  # the dotted config path, the tag prefix or the param name


def group_key_parse(text: str) -> GroupKey:
    """The key written as the module's docstring says; GroupingError when it reads as none."""
    if len(text) > MAX_KEY_LEN:
        raise GroupingError(f"at most {MAX_KEY_LEN} characters")
    if text.startswith(TAG):
        prefix = text.removeprefix(TAG)
        if not _TAG_PREFIX.fullmatch(prefix):
            raise GroupingError(f"tag:<prefix> needs a prefix of letters, digits and _.:/@+- (as tags), not {prefix!r}")
        return GroupKey("tag", prefix)
    if text.startswith(PARAM):
        name = text.removeprefix(PARAM)
        if not name.strip():
            raise GroupingError("param:<name> needs the MLflow param's name, e.g. param:trainer/lr")
        return GroupKey("param", name)
    if (kind := _KIND.match(text)) is not None:
        raise GroupingError(f"unknown kind of key {kind.group(1)!r}: give {SYNTAX}")
    path = text.removeprefix(CONFIG)
    if not path or "" in path.split("."):
        raise GroupingError(f"{text!r} is not a dotted config path: give {SYNTAX}")
    return GroupKey("config", path)


def config_value(config: Any, path: str) -> tuple[bool, Any]:
    """(found, value) of a dotted path in a run's config."""
    node = config
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _tag_value(run: Run, prefix: str) -> tuple[bool, Any]:
    values: list[str] = []
    for tag in run.tags:
        if tag.startswith(prefix) and tag[len(prefix) : len(prefix) + 1] in (":", "="):
            value = tag[len(prefix) + 1 :]
            if value not in values:  # seed:3 and seed=3 say the same
                values.append(value)
    if len(values) > 1:
        shown = " and ".join(f"{prefix}:{value}" for value in values)
        raise GroupingError(
            f"run {run.id} ({run.name}) has {len(values)} tags with prefix {prefix}: {shown}. A run must be in one "
            f"group: keep one of those tags (PATCH /api/v1/runs/{run.id}), or group by another key."
        )
    return (True, values[0]) if values else (False, None)


def group_values(runs: Sequence[Run], key: GroupKey) -> dict[int, tuple[bool, Any]]:
    """Each run's (found, value) for the key. Params are read in one query for all the runs
    (none when a caller prefetched `mlflow_params`)."""
    if key.kind == "config":
        return {run.id: config_value(run.config, key.name) for run in runs}
    if key.kind == "tag":
        return {run.id: _tag_value(run, key.name) for run in runs}
    prefetch_related_objects(list(runs), "mlflow_params")
    values: dict[int, tuple[bool, Any]] = {}
    for run in runs:
        # .all() reads the prefetch: a filter() here would be a query a run.
        value = next((param.value for param in run.mlflow_params.all() if param.key == key.name), None)
        values[run.id] = (value is not None, value)
    return values


def groups_by_key(runs: Sequence[Run], key: GroupKey) -> list[tuple[str, list[Run]]]:
    """The runs grouped by their value of the key, in the order values first appear."""
    values = group_values(runs, key)
    missing = f"{key.name} unset" if key.kind == "config" else NONE
    groups: dict[str, list[Run]] = {}
    for run in runs:
        found, value = values[run.id]
        groups.setdefault(f"{key.name}={_shown(value)}" if found else missing, []).append(run)
    return list(groups.items())


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "null"
    return str(value)
