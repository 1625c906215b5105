"""A scripted reply filled in from what its rule saw: words captured after a phrase of the
last user text, and the last message's tool results (``{error}``, ``{result}``,
``{result.agent.name}``). Linear in the text: captures find plain phrases, never an owner's
regular expression."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from .types import ToolResult

CAPTURE_NAME = "^[a-z_][a-z0-9_]{0,30}$"
# A captured value or a result is cut to this many characters in a reply.
MAX_CAPTURE = 100
MAX_FILLED = 500
HANDLE_MAX = 40

# An opening quote and the quote that closes it: a quoted name is taken whole.
_QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb"}
# An unquoted capture ends at the end of its clause.
_STOPS = ".,;:!?\n"
# Only these are placeholders; any other text in braces is the reply's own.
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*(?:\.[A-Za-z0-9_]+)*)(?::(handle))?\}")


class Unfilled(Exception):
    """The reply names something the request does not hold (no error result, no such field)."""


def _phrases(when: str) -> list[str]:
    return [p.strip() for p in when.split("|") if p.strip()]


def capture_after(when: str, text: str) -> str | None:
    """The words after the earliest of ``when``'s phrases (``|``-separated, any case, at the
    start of a word) in ``text``: a quoted value whole, else up to the end of its clause, at
    most MAX_CAPTURE characters. None when no phrase is there or nothing follows it."""
    found = [
        m
        for p in _phrases(when)
        if (m := re.search(r"(?<!\w)" + re.escape(p), text, flags=re.IGNORECASE))
    ]
    if not found:
        return None
    rest = text[min(found, key=lambda m: m.start()).end() :].lstrip()
    if rest[:1] in _QUOTES:
        close = rest.find(_QUOTES[rest[0]], 1)
        value = rest[1:close] if close > 0 else rest[1:]
    else:
        end = next((i for i, ch in enumerate(rest) if ch in _STOPS), len(rest))
        value = rest[:end]
    value = " ".join(value.split())[:MAX_CAPTURE].strip()
    return value or None


def captures(spec: Mapping[str, str], text: str) -> dict[str, str] | None:
    """Each of ``spec``'s names with the words after its phrases in ``text``; None when any of
    them finds nothing (the rule does not match)."""
    out: dict[str, str] = {}
    for name, when in spec.items():
        value = capture_after(when, text)
        if value is None:
            return None
        out[name] = value
    return out


def as_handle(value: str) -> str:
    """``value`` as an agent's handle: ASCII letters and digits, other runs as one ``-``."""
    ascii_text = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")[:HANDLE_MAX].strip("-")


def readable(content: str) -> str:
    """A tool result as a person reads it: a platform tool's ``{"error": {code, message}}``
    as ``CODE: message``; anything else as it came, cut to MAX_FILLED characters."""
    parsed = _json(content)
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and error.get("code"):
        content = f"{error['code']}: {error.get('message', '')}".strip()
    content = " ".join(str(content).split())
    return content if len(content) <= MAX_FILLED else content[: MAX_FILLED - 1] + "…"


def _json(content: str) -> Any:
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return None


def _field(content: str, path: Sequence[str]) -> str | None:
    value = _json(content)
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return str(value)


class _Filler:
    def __init__(self, captured: Mapping[str, str], results: Sequence[ToolResult]) -> None:
        self.captured = captured
        self.results = results

    def value(self, name: str) -> str | None:
        """What the placeholder ``name`` stands for; None when it is no placeholder."""
        head, _, path = name.partition(".")
        if name in self.captured:
            return self.captured[name]
        if name == "error":
            errors = [readable(r.content) for r in self.results if r.is_error]
            if not errors:
                raise Unfilled(name)
            return "; ".join(errors)
        if head == "result":
            if not self.results:
                raise Unfilled(name)
            first = self.results[0].content
            found = _field(first, path.split(".")) if path else readable(first)
            if found is None:
                raise Unfilled(name)
            return found
        return None

    def text(self, template: str) -> str:
        def one(match: re.Match[str]) -> str:
            value = self.value(match.group(1))
            if value is None:
                return match.group(0)
            if match.group(2) == "handle":
                value = as_handle(value)
                if not value:
                    raise Unfilled(match.group(0))
            return value

        return _PLACEHOLDER.sub(one, template)

    def any(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.any(v) for v in value]
        if isinstance(value, dict):
            return {k: self.any(v) for k, v in value.items()}
        return value


def fill(
    spec: Mapping[str, Any] | str, *, captured: Mapping[str, str], results: Sequence[ToolResult]
) -> dict[str, Any]:
    """The reply ``spec`` (text, or text and tool calls) with its placeholders filled in.
    Raises Unfilled when it names an error, a result or a field the request does not hold."""
    if isinstance(spec, str):
        spec = {"text": spec}
    filler = _Filler(captured, results)
    return filler.any(dict(spec))
