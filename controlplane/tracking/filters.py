"""The part of MLflow's search grammar Barrel answers, turned into one SQL query.

Filters: `metrics.k <op> number` (op one of = != < <= > >=, compared with the run's latest
value of k), `params.k` / `tags.k` with = != LIKE ILIKE and a quoted string, and the attributes
`status`, `run_name`, `run_id`, `start_time`, `end_time`; clauses joined with AND. Keys with
characters outside [\\w.] are quoted with backticks or double quotes, as in MLflow
(metrics.`reward/mean` > 0.5). Anything else (OR, IN, parentheses, datasets, other attributes)
is refused with a message naming it, never silently ignored.

order_by: `attributes.start_time|end_time|run_name|status` and `metrics.k`, each ASC or DESC.

Experiments (experiments/search) use the same grammar over fewer entities: `tags.k` and the
attributes `name`, `creation_time`, `last_update_time`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.expressions import OrderBy
from django.db.models.functions import Coalesce

from controlplane.metrics.models import MetricSeries
from controlplane.runs.models import Run
from controlplane.tracking.errors import invalid
from controlplane.tracking.models import RunParam, RunTag
from controlplane.tracking.status import barrel_statuses
from controlplane.tracking.wire import object_id

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<ident>[A-Za-z_]+\.(?:`[^`]*`|"[^"]*"|[\w./:\-]+))
    | (?P<word>[A-Za-z_]\w*)
    | (?P<op>!=|<>|<=|>=|==|=|<|>)
    | (?P<string>'(?:[^']|'')*'|"[^"]*")
    | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    | (?P<other>\S)
    )""",
    re.VERBOSE,
)
_PREFIXES = {
    "metric": "metric",
    "metrics": "metric",
    "param": "param",
    "params": "param",
    "parameter": "param",
    "parameters": "param",
    "tag": "tag",
    "tags": "tag",
    "attribute": "attribute",
    "attributes": "attribute",
    "attr": "attribute",
    "run": "attribute",
}
ATTRIBUTES = ("status", "run_name", "run_id", "start_time", "end_time")
EXPERIMENT_ATTRIBUTES = ("name", "creation_time", "last_update_time")
NUMERIC_OPS = {"=": "exact", "!=": "exact", "<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}
STRING_OPS = ("=", "!=", "LIKE", "ILIKE")


@dataclass(frozen=True)
class Grammar:
    """What one search may filter on: its entity kinds and attributes, and which attributes
    compare as numbers (times in ms) or only with = and !=."""

    kinds: frozenset[str]
    attributes: tuple[str, ...]
    numeric: frozenset[str]
    exact: frozenset[str]

    def entities(self) -> str:
        names = [f"{kind}s.<key>" for kind in ("metric", "param", "tag") if kind in self.kinds]
        return ", ".join([*names, f"attributes.<{'|'.join(self.attributes)}>"])


RUNS = Grammar(
    kinds=frozenset({"metric", "param", "tag", "attribute"}),
    attributes=ATTRIBUTES,
    numeric=frozenset({"start_time", "end_time"}),
    exact=frozenset({"status", "run_id"}),
)
EXPERIMENTS = Grammar(
    kinds=frozenset({"tag", "attribute"}),
    attributes=EXPERIMENT_ATTRIBUTES,
    numeric=frozenset({"creation_time", "last_update_time"}),
    exact=frozenset(),
)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


@dataclass(frozen=True)
class Clause:
    kind: str  # metric | param | tag | attribute
    key: str
    op: str
    value: str | float


def _tokens(text: str) -> list[Token]:
    out: list[Token] = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind is None:  # trailing whitespace
            continue
        out.append(Token(kind, match.group(kind)))
    return out


def _identifier(token: Token, grammar: Grammar) -> tuple[str, str]:
    """(kind, key) of `metrics.x`, `tags."a b"` or a bare attribute name."""
    if token.kind == "word":
        if token.text.lower() in grammar.attributes:
            return "attribute", token.text.lower()
        raise invalid(f"Unsupported identifier '{token.text}' in filter: use {grammar.entities()}.")
    if token.text in ("(", ")"):
        raise invalid("Parentheses are not supported in filters; join clauses with AND.")
    if token.kind != "ident":
        raise invalid(f"Expected an identifier such as metrics.<key> in filter, got '{token.text}'.")
    prefix, key = token.text.split(".", 1)
    kind = _PREFIXES.get(prefix.lower())
    if kind is None or kind not in grammar.kinds:
        raise invalid(f"Unsupported entity '{prefix}' in filter: use {grammar.entities()}.")
    if key[:1] in '`"' and key[-1:] == key[:1] and len(key) >= 2:
        key = key[1:-1]
    if kind == "attribute":
        key = key.lower()
        if key not in grammar.attributes:
            raise invalid(
                f"Unsupported attribute '{key}' in filter: Barrel supports "
                f"attributes.{', attributes.'.join(grammar.attributes)}."
            )
    return kind, key


def _string(token: Token) -> str:
    text = token.text
    return text[1:-1].replace("''", "'") if text.startswith("'") else text[1:-1]


def parse_filter(text: str | None, grammar: Grammar = RUNS) -> list[Clause]:
    if not text or not text.strip():
        return []
    tokens = _tokens(text)
    clauses: list[Clause] = []
    i = 0
    while i < len(tokens):
        kind, key = _identifier(tokens[i], grammar)
        if i + 1 >= len(tokens):
            raise invalid(f"Filter ends after '{tokens[i].text}': expected a comparison.")
        op_token = tokens[i + 1]
        op = op_token.text.upper()
        i += 2
        if op_token.kind == "word" and op == "NOT" and i < len(tokens) and tokens[i].text.upper() == "IN":
            raise invalid("Operator 'NOT IN' is not supported in filters; use != clauses joined with AND.")
        if op_token.kind == "word" and op in ("IN", "IS"):
            raise invalid(f"Operator '{op}' is not supported in filters; use =, !=, <, <=, >, >=, LIKE or ILIKE.")
        op = {"==": "=", "<>": "!="}.get(op, op)
        if op_token.kind not in ("op", "word") or (op_token.kind == "word" and op not in ("LIKE", "ILIKE")):
            raise invalid(f"Expected a comparison operator after '{key}' in filter, got '{op_token.text}'.")
        if i >= len(tokens):
            raise invalid(f"Filter ends after '{key} {op}': expected a value.")
        value_token = tokens[i]
        i += 1
        clauses.append(_clause(kind, key, op, value_token, grammar))
        if i < len(tokens):
            joiner = tokens[i].text.upper()
            if joiner == "OR":
                raise invalid(
                    "OR is not supported in filters; join clauses with AND, or run one search per alternative."
                )
            if joiner != "AND":
                raise invalid(f"Expected AND between filter clauses, got '{tokens[i].text}'.")
            i += 1
            if i >= len(tokens):
                raise invalid("Filter ends with AND: expected another clause.")
    return clauses


def _clause(kind: str, key: str, op: str, token: Token, grammar: Grammar) -> Clause:
    numeric = kind == "metric" or (kind == "attribute" and key in grammar.numeric)
    if numeric:
        if op not in NUMERIC_OPS:
            raise invalid(f"Operator '{op}' does not apply to {kind}s; use =, !=, <, <=, > or >=.")
        if token.kind != "number":
            raise invalid(f"{kind}s.{key} compares with a number, got {token.text}.")
        return Clause(kind, key, op, float(token.text))
    if token.kind != "string":
        raise invalid(f"{kind}s.{key} compares with a quoted string, got {token.text}.")
    value = _string(token)
    allowed = ("=", "!=") if (kind == "attribute" and key in grammar.exact) else STRING_OPS
    if op not in allowed:
        raise invalid(f"Operator '{op}' does not apply to {kind} '{key}'; use {', '.join(allowed)}.")
    if kind == "attribute" and key == "status":
        barrel_statuses(value)  # refuses an unknown status now, naming the ones MLflow has
    return Clause(kind, key, op, value)


def _like_regex(pattern: str) -> str:
    """SQL LIKE (% and _) as an anchored regular expression."""
    parts = [".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern]
    return "^" + "".join(parts) + "$"


def string_q(field: str, op: str, value: str) -> Q:
    if op == "LIKE":
        return Q(**{f"{field}__regex": _like_regex(value)})
    if op == "ILIKE":
        return Q(**{f"{field}__iregex": _like_regex(value)})
    q = Q(**{field: value})
    return ~q if op == "!=" else q


def numeric_q(field: str, op: str, value: Any) -> Q:
    q = Q(**{f"{field}__{NUMERIC_OPS[op]}": value})
    # Like MLflow, a run without the value matches no comparison, != included.
    return Q(~q, **{f"{field}__isnull": False}) if op == "!=" else q


def latest_metric(key: str) -> Subquery:
    """The value at the run's largest step of `key`: what MLflow compares and sorts by. Ingest
    keeps it on the series row, so this is one unique-index lookup per run."""
    series = MetricSeries.objects.filter(run_id=OuterRef("pk"), key=key, count__gt=0)
    return Subquery(series.values("last_value")[:1])


def from_ms(value: float) -> datetime:
    return datetime.fromtimestamp(value / 1000, UTC)


def apply_filter(runs: QuerySet[Run], clauses: list[Clause]) -> QuerySet[Run]:
    for n, c in enumerate(clauses):
        if c.kind == "metric":
            runs = runs.annotate(**{f"_f{n}": latest_metric(c.key)}).filter(numeric_q(f"_f{n}", c.op, c.value))
        elif c.kind in ("param", "tag"):
            model = RunParam if c.kind == "param" else RunTag
            assert isinstance(c.value, str)
            rows = model.objects.filter(string_q("value", c.op, c.value), run=OuterRef("pk"), key=c.key)
            runs = runs.filter(Exists(rows))
        elif c.key == "status":
            assert isinstance(c.value, str)
            q = Q(status__in=barrel_statuses(c.value))
            runs = runs.filter(~q if c.op == "!=" else q)
        elif c.key == "run_name":
            assert isinstance(c.value, str)
            runs = runs.filter(string_q("name", c.op, c.value))
        elif c.key == "run_id":
            assert isinstance(c.value, str)
            pk = object_id(c.value)
            q = Q(pk__in=[]) if pk is None else Q(id=pk)
            runs = runs.filter(~q if c.op == "!=" else q)
        else:
            field = "_start" if c.key == "start_time" else "finished_at"
            if field == "_start":
                runs = runs.annotate(_start=Coalesce("started_at", "created_at"))
            runs = runs.filter(numeric_q(field, c.op, from_ms(float(c.value))))
    return runs


_ORDER_FIELDS = {"start_time": "_start", "end_time": "finished_at", "run_name": "name", "status": "status"}


def order_clause(text: str, grammar: Grammar) -> tuple[str, str, bool]:
    """(kind, key, descending) of one order_by entry, `<identifier> [ASC|DESC]`."""
    tokens = _tokens(text)
    if not tokens or len(tokens) > 2:
        raise invalid(f"Bad order_by '{text}': expected '<identifier> [ASC|DESC]'.")
    kind, key = _identifier(tokens[0], grammar)
    direction = tokens[1].text.upper() if len(tokens) == 2 else "ASC"
    if direction not in ("ASC", "DESC"):
        raise invalid(f"Bad order_by '{text}': the direction must be ASC or DESC.")
    return kind, key, direction == "DESC"


def apply_order(runs: QuerySet[Run], order_by: list[str]) -> QuerySet[Run]:
    """MLflow's default is start_time DESC; the run id breaks ties so pages never overlap."""
    runs = runs.annotate(_start=Coalesce("started_at", "created_at"))
    ordering: list[OrderBy] = []
    for n, text in enumerate(order_by):
        kind, key, descending = order_clause(text, RUNS)
        if kind == "metric":
            runs = runs.annotate(**{f"_o{n}": latest_metric(key)})
            field = f"_o{n}"
        elif kind == "attribute" and key in _ORDER_FIELDS:
            field = _ORDER_FIELDS[key]
        else:
            raise invalid(
                f"Unsupported order_by '{text}': Barrel orders by metrics.<key> or "
                f"attributes.{', attributes.'.join(_ORDER_FIELDS)}."
            )
        expr = F(field)
        ordering.append(expr.desc(nulls_last=True) if descending else expr.asc(nulls_last=True))
    if not ordering:
        ordering.append(F("_start").desc())
    return runs.order_by(*ordering, F("id").desc())
