"""The run file of ``barrel submit``: YAML with ``project``, ``name``, ``recipe``, ``config``, ``tags``.

``--set key.path=value`` overrides one value; the value is read as YAML (``5`` is a number,
``true`` a boolean, ``[a, b]`` a list). A path that does not start with a top-level key is taken
inside ``config``: ``--set steps=5`` and ``--set config.steps=5`` are the same.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from barrel_cli.errors import EXIT_USAGE, CliError

TOP_LEVEL_KEYS = ("project", "name", "recipe", "config", "tags")
# Top-level values that are names: "--set name=007" must stay the string "007".
_STRING_KEYS = ("project", "name", "recipe")


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads ``3e-4`` (no dot) as a string; learning rates are written that way, so read it
    as the float YAML 1.2 and every reader of the file would expect."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def yaml_load(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 — a SafeLoader subclass


def load_run_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}", exit_code=EXIT_USAGE) from exc
    try:
        data = yaml_load(text)
    except yaml.YAMLError as exc:
        raise CliError(f"{path} is not valid YAML: {exc}", exit_code=EXIT_USAGE) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise CliError(f"{path} should hold a mapping with keys {', '.join(TOP_LEVEL_KEYS)}", exit_code=EXIT_USAGE)
    unknown = sorted(str(k) for k in data if k not in TOP_LEVEL_KEYS)
    if unknown:
        raise CliError(
            f"{path}: unknown top-level key(s) {', '.join(unknown)}",
            hint=f"allowed: {', '.join(TOP_LEVEL_KEYS)}; recipe settings go under `config:`",
            exit_code=EXIT_USAGE,
        )
    return data


def parse_override(expr: str) -> tuple[list[str], Any]:
    """``"a.b=1"`` → ``(["config", "a", "b"], 1)``."""
    key, sep, raw = expr.partition("=")
    key = key.strip()
    if not sep or not key:
        raise CliError(f"--set {expr!r}: expected key.path=value", exit_code=EXIT_USAGE)
    path = key.split(".")
    if any(not part for part in path):
        raise CliError(f"--set {expr!r}: empty segment in {key!r}", exit_code=EXIT_USAGE)
    if path[0] not in TOP_LEVEL_KEYS:
        path = ["config", *path]
    if len(path) == 1 and path[0] in _STRING_KEYS:
        return path, raw
    try:
        value = yaml_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw  # not YAML: take it as the literal string
    return path, value


def apply_override(doc: dict[str, Any], path: list[str], value: Any) -> None:
    node = doc
    for i, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            where = ".".join(path[: i + 1])
            raise CliError(
                f"--set {'.'.join(path)}: {where} is {type(child).__name__}, not a mapping",
                exit_code=EXIT_USAGE,
            )
        node = child
    node[path[-1]] = value


def build_submission(
    path: Path,
    *,
    project: str | None = None,
    name: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """The body of ``POST /runs``: the file, then ``--set`` overrides, then ``--project``/``--name``."""
    doc = load_run_file(path)
    for expr in overrides:
        target, value = parse_override(expr)
        apply_override(doc, target, value)
    if project is not None:
        doc["project"] = project
    if name is not None:
        doc["name"] = name
    if not doc.get("project"):
        raise CliError(
            "no project given", hint="add `project: team/project` to the file or pass --project", exit_code=EXIT_USAGE
        )
    if not doc.get("recipe"):
        raise CliError("no recipe given", hint="add `recipe: smoke` (for example) to the file", exit_code=EXIT_USAGE)
    if not doc.get("name"):
        doc["name"] = path.stem
    config = doc.get("config")
    if config is None:
        doc["config"] = {}
    elif not isinstance(config, dict):
        raise CliError("`config` should be a mapping", exit_code=EXIT_USAGE)
    tags = doc.get("tags")
    if tags is None:
        doc["tags"] = []
    elif isinstance(tags, str):
        doc["tags"] = [t.strip() for t in tags.split(",") if t.strip()]
    elif isinstance(tags, list):
        doc["tags"] = [str(t) for t in tags]
    else:
        raise CliError("`tags` should be a list of strings", exit_code=EXIT_USAGE)
    project_value = doc["project"]
    if not isinstance(project_value, int):
        text = str(project_value).strip()
        doc["project"] = int(text) if text.isdigit() else text  # the API takes an id or "team/name"
    doc["name"] = str(doc["name"])
    doc["recipe"] = str(doc["recipe"])
    return {key: doc[key] for key in TOP_LEVEL_KEYS}
