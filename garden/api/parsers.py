"""The API's one parser: JSON, checked so that bad input is a 400 and never reaches the database
(which would answer with a 500).

Refused with a named error, before any view runs: a body larger than
GARDEN_API_MAX_BODY_BYTES (413), text that is not UTF-8, nesting deeper than
GARDEN_API_MAX_JSON_DEPTH (which would exhaust the parser's recursion), NaN and infinities,
integers beyond 64 bits, and strings or keys holding NUL or a lone surrogate (PostgreSQL
refuses both, in text and in jsonb).
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from rest_framework import status
from rest_framework.parsers import BaseParser

from garden.api.errors import ApiError

_FORBIDDEN_CHARS = re.compile("[\x00\ud800-\udfff]")
_INT_LIMIT = 2**63 - 1


def _refuse(code: str, message: str, *, status_code: int = status.HTTP_400_BAD_REQUEST) -> ApiError:
    return ApiError(code, message, status_code=status_code)


def _reject_constant(name: str) -> Any:
    raise _refuse("INVALID_NUMBER", f"{name} is not a number JSON may carry here.")


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _refuse("INVALID_NUMBER", f"{text[:40]} is too large for a number.")
    return value


def _int(text: str) -> int:
    if len(text) > 20 or abs(int(text)) > _INT_LIMIT:
        raise _refuse("INVALID_NUMBER", "Integers must fit in 64 bits.")
    return int(text)


def _where(path: list[Any]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "body"


def check_value(data: Any, *, max_depth: int) -> None:
    """Walk ``data`` (without recursion) and refuse what the database or a handler cannot take."""
    stack: list[tuple[Any, int, list[Any]]] = [(data, 1, [])]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, str):
            if _FORBIDDEN_CHARS.search(value):
                raise _refuse(
                    "INVALID_CHARACTER",
                    f"{_where(path)}: text may not contain NUL or unpaired surrogate characters.",
                )
        elif isinstance(value, (dict, list)):
            if depth > max_depth:
                raise _refuse("TOO_DEEP", f"The JSON is nested deeper than {max_depth} levels.")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and _FORBIDDEN_CHARS.search(key):
                    raise _refuse(
                        "INVALID_CHARACTER",
                        f"{_where(path)}: a key may not contain NUL "
                        "or unpaired surrogate characters.",
                    )
                stack.append((item, depth + 1, [*path, key]))


class SafeJSONParser(BaseParser):
    media_type = "application/json"

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: dict[str, Any] | None = None,
    ) -> Any:
        limit = settings.GARDEN_API_MAX_BODY_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise _refuse(
                "PAYLOAD_TOO_LARGE",
                f"The body is larger than {limit:,} bytes.",
                status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _refuse("INVALID_JSON", "The body is not UTF-8 text.") from exc
        try:
            data = json.loads(
                text, parse_constant=_reject_constant, parse_float=_float, parse_int=_int
            )
        except RecursionError as exc:
            raise _refuse("TOO_DEEP", "The JSON is nested too deeply.") from exc
        except ValueError as exc:
            raise _refuse("INVALID_JSON", f"The body is not valid JSON: {exc}") from exc
        check_value(data, max_depth=settings.GARDEN_API_MAX_JSON_DEPTH)
        return data
