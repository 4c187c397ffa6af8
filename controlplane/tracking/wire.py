"""Reading MLflow requests: protobuf-JSON fields, as current and older clients send them.

MLflow's server parses requests into protobuf messages with unknown fields ignored, so this does
the same: each view reads the fields it knows and never rejects an extra one. int64 fields come
as JSON numbers from current clients and as strings from older ones (protobuf's JSON mapping),
and doubles may be the strings "NaN", "Infinity" and "-Infinity".
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from rest_framework.parsers import BaseParser
from rest_framework.request import Request

from controlplane import inputs
from controlplane.api import ApiError
from controlplane.metrics.wire import Point
from controlplane.tracking.errors import invalid

# mlflow/utils/validation.py MAX_BATCH_LOG_REQUEST_SIZE; applied to every tracking request.
MAX_BODY_BYTES = 1_000_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INT_RE = re.compile(r"^-?\d+$")
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class MlflowJSONParser(BaseParser):
    """JSON for any content type (scripts calling the API by hand often send none), with
    MLflow's 1 MB request limit enforced while reading, so a huge body is never held whole."""

    media_type = "*/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        raw = stream.read(MAX_BODY_BYTES + 1)
        if len(raw) > MAX_BODY_BYTES:
            raise invalid(
                f"Request body is over the limit of {MAX_BODY_BYTES} bytes (MLflow's limit for a "
                "batch); send fewer metrics, params or tags per request."
            )
        if not raw.strip():
            return {}
        try:
            body = inputs.loads(raw, allow_nan=True)  # NUL and depth refused (controlplane.inputs)
        except ApiError as exc:
            raise invalid(exc.message) from None
        if not isinstance(body, dict):
            raise invalid("Request body must be a JSON object.")
        return body


def fields(request: Request, *, lists: tuple[str, ...] = ()) -> dict[str, Any]:
    """The request's fields: the JSON body of a POST, the query string of a GET (repeated
    parameters, such as `experiment_ids`, collected for the names in `lists`)."""
    if request.method == "GET":
        query = request.query_params
        return {name: query.getlist(name) if name in lists else query.get(name) for name in query}
    data = request.data
    if not isinstance(data, Mapping):
        raise invalid("Request body must be a JSON object.")
    return dict(data)


def string(data: Mapping[str, Any], name: str, *, required: bool = False, max_len: int | None = None) -> str | None:
    value = data.get(name)
    if value is None or value == "":
        if required:
            raise invalid(f"Missing value for required parameter '{name}'.")
        return None if value is None else ""
    if not isinstance(value, str):
        raise invalid(f"Parameter '{name}' must be a string, got {type(value).__name__}.")
    if max_len is not None and len(value) > max_len:
        raise invalid(f"Parameter '{name}' is {len(value)} characters long; the limit is {max_len}.")
    return value


def required_string(data: Mapping[str, Any], name: str, *, max_len: int | None = None) -> str:
    value = string(data, name, required=True, max_len=max_len)
    assert value is not None
    return value


def int64(value: Any, name: str, *, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    """A protobuf int64: a JSON number without a fraction, or a string of digits."""
    if isinstance(value, bool):
        raise invalid(f"Parameter '{name}' must be an integer, not a boolean.")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and _INT_RE.match(value.strip()):
        value = int(value.strip())
    if not isinstance(value, int):
        raise invalid(f"Parameter '{name}' must be an integer (a number or a string of digits), got {value!r}.")
    if not lo <= value <= hi:
        raise invalid(f"Parameter '{name}' must be between {lo} and {hi}, got {value}.")
    return value


def optional_int64(data: Mapping[str, Any], name: str, *, path: str = "", **bounds: int) -> int | None:
    """`path` names the field in errors when it sits inside a list (`metrics[3].step`)."""
    value = data.get(name)
    if value is None or value == "":
        return None
    return int64(value, path or name, **bounds)


def double(value: Any, name: str) -> float:
    """A protobuf double: a JSON number, a numeric string, or "NaN" / "Infinity" / "-Infinity"."""
    if isinstance(value, bool):
        raise invalid(f"Parameter '{name}' must be a number, not a boolean.")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        if value in _NON_FINITE:
            return _NON_FINITE[value]
        try:
            parsed = float(value)
        except ValueError:
            pass
        else:
            if math.isfinite(parsed):
                return parsed
    raise invalid(f'Parameter \'{name}\' must be a number or one of "NaN", "Infinity", "-Infinity"; got {value!r}.')


def items(data: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    """A repeated message field: a list of objects (absent means empty)."""
    value = data.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise invalid(f"Parameter '{name}' must be a list of objects.")
    return value


def object_id(text: str) -> int | None:
    """An MLflow id (a string) as a Barrel primary key; None when it cannot be one, so a
    malformed or out-of-range id is simply not found (never a database error)."""
    return int(text) if text.isdigit() and len(text) <= 18 else None


def identifier(data: Mapping[str, Any], name: str) -> str | None:
    """An id field: a string in the proto, though hand-written requests often send a number."""
    value = data.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return string(data, name)


# mlflow.entities.ViewType: its names, and the protobuf numbers JSON may carry instead.
_VIEW_TYPES = {"ACTIVE_ONLY": "ACTIVE_ONLY", "DELETED_ONLY": "DELETED_ONLY", "ALL": "ALL"}
_VIEW_TYPES.update({"1": "ACTIVE_ONLY", "2": "DELETED_ONLY", "3": "ALL"})


def view_type(data: Mapping[str, Any], name: str) -> str:
    """A ViewType field (`run_view_type`, `view_type`); absent means ACTIVE_ONLY."""
    value = data.get(name)
    if value is None or value == "":
        return "ACTIVE_ONLY"
    found = None if isinstance(value, bool) else _VIEW_TYPES.get(str(value).upper())
    if found is None:
        raise invalid(f"Invalid {name} {value!r}; use ACTIVE_ONLY, DELETED_ONLY or ALL.")
    return found


def run_id(data: Mapping[str, Any]) -> str:
    """`run_id`, or the deprecated `run_uuid` older clients send in its place."""
    value = identifier(data, "run_id") or identifier(data, "run_uuid")
    if not value:
        raise invalid("Missing value for required parameter 'run_id'.")
    return value


# ----------------------------------------------------------------------------- entities
# mlflow/utils/validation.py: keys of metrics, params and tags.
MAX_KEY_LEN = 250
MAX_PARAM_VALUE_LEN = 6000
MAX_EXPERIMENT_TAG_VALUE_LEN = 20_000
# MLflow 3 raised this from 5000 (MAX_TAG_VAL_LENGTH); the current client checks 8000.
MAX_TAG_VALUE_LEN = 8000
_KEY_RE = re.compile(r"[/\w.\- :]*")


def entity_key(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise invalid(f"Missing value for required parameter '{path}'.")
    if len(value) > MAX_KEY_LEN:
        raise invalid(f"Parameter '{path}' is {len(value)} characters long; the limit is {MAX_KEY_LEN}.")
    if not _KEY_RE.fullmatch(value):  # `$` would let a trailing newline through
        raise invalid(
            f"Invalid value {value!r} for parameter '{path}': names may only contain alphanumerics, "
            "underscores (_), dashes (-), periods (.), spaces ( ), colons (:) and slashes (/)."
        )
    # MLflow refuses names that a path normalisation would change ("a//b", "./a", "a/").
    if posixpath.normpath(value) != value or value.startswith(("/", "..")):
        raise invalid(
            f"Invalid value {value!r} for parameter '{path}': names must not resolve to another name when "
            f"treated as a path (this one resolves to {posixpath.normpath(value)!r})."
        )
    return value


def _at(path: str, name: str) -> str:
    """`metrics[3].key` for an entity inside a batch; plain `key` for log-metric's own fields."""
    return f"{path}.{name}" if path else name


def key_value(item: Mapping[str, Any], path: str, *, max_value: int) -> tuple[str, str]:
    key = entity_key(item.get("key"), _at(path, "key"))
    value = item.get("value")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise invalid(f"Parameter '{_at(path, 'value')}' must be a string, got {type(value).__name__}.")
    if len(value) > max_value:
        raise invalid(f"Parameter '{_at(path, 'value')}' is {len(value)} characters long; the limit is {max_value}.")
    return key, value


def metric(item: Mapping[str, Any], path: str, *, now: datetime) -> Point:
    """An MLflow metric as a Barrel point. Barrel steps run from 0 to 2^63-1 (MLflow's may be
    negative), and a missing timestamp means now."""
    key = entity_key(item.get("key"), _at(path, "key"))
    if item.get("value") is None:
        raise invalid(f"Missing value for required parameter '{_at(path, 'value')}'.")
    value = double(item["value"], _at(path, "value"))
    step = optional_int64(item, "step", path=_at(path, "step"), lo=0)
    timestamp = optional_int64(item, "timestamp", path=_at(path, "timestamp"))
    try:
        when = now if timestamp is None else datetime.fromtimestamp(timestamp / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        raise invalid(f"Parameter '{_at(path, 'timestamp')}' is not a time in milliseconds since the epoch.") from None
    return Point(key, step or 0, value, when)
