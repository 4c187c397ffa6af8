"""Input every request may carry, checked once for all endpoints: JSON bodies, query strings and
form fields.

Two things no endpoint can store or safely walk are refused here, before any view sees them:

- NUL characters. PostgreSQL's text and jsonb types cannot hold U+0000, so a NUL anywhere (a
  query parameter, a JSON string or key deep inside a free-form field such as `samples[].extra`)
  would end as a DataError and a 500. The answer is a 400 naming where it is
  (`samples[0].extra.note`).
- JSON nested deeper than MAX_JSON_DEPTH. Python's json module (and everything that walks the
  value afterwards: serializers, json.dumps when it is stored, orjson when it is rendered)
  recurses per level, so a 100,000-deep body was a RecursionError.

Every JSON parser in play reads its body through `loads` (DRF's default parser is `JSONParser`
below; the metric batch parser, its ASGI route and MLflow's parser call `loads`), and query
strings and forms go through `controlplane.error_views.InputCheckMiddleware`.

Both checks are near free on a clean body, which matters on the metric ingest path: a NUL can
only arrive as the escape `\\u0000` (JSON forbids raw control characters in strings), so one
substring search over the raw bytes decides whether the parsed value is walked at all; and a body
with no more opening brackets than the limit cannot be nested deeper than it, so only bodies
with many containers are measured, a level at a time with C-level iteration (metric batches,
parsed by orjson, are bounded by its own depth limit instead: see `loads`).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable
from itertools import chain, compress, repeat
from typing import Any

import orjson
from django.http import HttpRequest
from rest_framework.parsers import BaseParser

from controlplane.api import ApiError

# Deeper than any body Barrel or MLflow define (MLflow's are 3 levels; a config or a sample's
# `extra` a handful), far below the depth at which Python's recursion limit is reached when the
# value is validated, stored (json.dumps) or rendered (orjson stops at 254).
MAX_JSON_DEPTH = 64

_NUL = "\x00"
_ESCAPED_NUL = b"\\u0000"
_CONTAINERS = frozenset({dict, list})


def nul_error(path: str) -> ApiError:
    message = "must not contain NUL characters (\\u0000): they cannot be stored"
    return ApiError(f"{path}: {message}.", code="validation_error", fields={path: [message]})


def depth_error() -> ApiError:
    message = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    return ApiError(f"Body is {message}; flatten it.", code="parse_error", fields={"body": [message]})


def _printable(text: str) -> str:
    return text.replace(_NUL, "\\u0000")


def _join(path: str, key: str) -> str:
    return f"{path}.{_printable(key)}" if path else _printable(key)


def nul_path(value: Any) -> str | None:
    """The path (`samples[0].extra.note`) of the first string or key in a parsed JSON value that
    holds a NUL, or None. Iterative: the value may be as deep as MAX_JSON_DEPTH."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if _NUL in item:
                return path or "body"
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                if isinstance(key, str) and _NUL in key:
                    return _join(path, key)
                stack.append((_join(path, str(key)), child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in reversed(list(enumerate(item))))
    return None


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether containers nest more than `limit` levels. One level at a time; each level's
    children are gathered and filtered with map/compress, not a Python loop per element."""
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        is_dict = list(map(operator.is_, map(type, level), repeat(dict)))
        dicts = compress(level, is_dict)
        lists = compress(level, map(operator.not_, is_dict))
        children = list(chain(chain.from_iterable(map(dict.values, dicts)), chain.from_iterable(lists)))
        level = list(compress(children, map(_CONTAINERS.__contains__, map(type, children))))
    return False


def check_json(value: Any, raw: bytes | str, *, depth: bool = True) -> Any:
    """`value` (parsed from `raw`) if it holds no NUL and (`depth`) is not nested too deep;
    else the 400."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")  # only bodies in another charset; rare
    if _ESCAPED_NUL in raw:  # `\\u0000` (an escaped backslash) matches too: the walk tells them apart
        path = nul_path(value)
        if path is not None:
            raise nul_error(path)
    if depth and raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and _deeper_than(value, MAX_JSON_DEPTH):
        raise depth_error()
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON; send it as the string {json.dumps(name)}")


def loads(raw: bytes | str, *, allow_nan: bool = False, fast: bool = False) -> Any:
    """A JSON body, checked (check_json). `allow_nan`: the bare NaN / Infinity tokens Python's
    json.dumps writes are accepted. `fast`: orjson first (several times faster on large metric
    batches; it reads integers past 2^64 as floats, which only the metric parser can take, as a
    step out of range), the standard parser for what orjson refuses. What orjson parses is
    bounded by orjson's own depth limit (1024, in C) instead of MAX_JSON_DEPTH: only the metric
    parser reads it, which takes a fixed shape and never descends into a value, and measuring
    a 5,000-point batch level by level would cost several times what parsing it does."""
    if fast:
        try:
            return check_json(orjson.loads(raw), raw, depth=False)
        except orjson.JSONDecodeError:
            pass
    try:
        value = json.loads(raw, parse_constant=None if allow_nan else _refuse_constant)
    except RecursionError:
        raise depth_error() from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(f"Body is not valid JSON: {exc}", code="parse_error", fields={"body": [str(exc)]}) from None
    return check_json(value, raw)


class JSONParser(BaseParser):
    """DRF's JSON parser (strict: no bare NaN), through `loads`."""

    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        raw: bytes = stream.read()
        encoding = (parser_context or {}).get("encoding")
        if encoding and encoding.lower().replace("-", "") != "utf8":
            try:
                return loads(raw.decode(encoding))
            except (LookupError, UnicodeDecodeError) as exc:
                raise ApiError(f"Body is not {encoding}: {exc}", code="parse_error") from None
        return loads(raw)


def _nul_in(pairs: Iterable[tuple[str, list[str]]]) -> str | None:
    for name, values in pairs:
        if _NUL in name or any(_NUL in v for v in values):
            return _printable(name)
    return None


def request_problem(request: HttpRequest) -> ApiError | None:
    """A NUL in the path, a query parameter or a form field (the first one, by name)."""
    if _NUL in request.path:
        return nul_error("path")
    query = request.META.get("QUERY_STRING", "")
    if "%00" in query or _NUL in query:
        name = _nul_in(request.GET.lists())
        if name is not None:
            return nul_error(name)
    content_type = request.content_type or ""
    if request.method == "POST" and content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        name = _nul_in(request.POST.lists())
        if name is not None:
            return nul_error(name)
    return None
