"""Bounds on the input schemas of tools garden does not write (an MCP server's): what a schema
may be to be offered at all (``schema_refusal``, asked when a server's tools are listed), and
a wall-clock budget on every validation against one (``bounded_validator``), so that even a
schema stored before these limits, or one within them that is still slow, cannot hold a
worker or a row lock for long.

Why both: a schema of 600 ``pattern`` keywords, each match bounded alone, took 51.8 s for
one string, and a 2 KB schema of ``$ref``s nested in ``anyOf``s expanded to exponential work
(90 s). The listing limits refuse the shapes that cost; the budget is the guarantee.
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

import jsonschema
from django.conf import settings

COMPOSITION = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else")
REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


class SchemaTooSlow(Exception):
    """Validating against a tool's input schema ran past its budget (SCHEMA_TOO_SLOW)."""

    code = "SCHEMA_TOO_SLOW"

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"validating against the tool's input schema took longer than {seconds:g} s"
        )
        self.seconds = seconds


class _Refused(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


# --- at listing ---------------------------------------------------------------------------


def schema_refusal(schema: Any) -> str | None:
    """Why ``schema`` (an MCP tool's input schema) is not offered, in words the owner reads,
    or None when it is within every limit: its serialized size, its number of nodes and of
    ``pattern``s, its nesting depth and composition depth (``allOf``/``anyOf``/``oneOf``/
    ``not``/``if`` nested), all counted with every ``$ref`` expanded in place; a reference that
    is not a JSON pointer into the schema itself, or one that refers back into itself (a
    cycle), is refused. Reads the schema once per node (expansions are memoised)."""
    try:
        size = len(json.dumps(schema))
    except (RecursionError, TypeError, ValueError):
        return "its input schema is nested too deeply or is not JSON"
    if size > settings.GARDEN_MCP_SCHEMA_MAX_BYTES:
        return f"its input schema is larger than {settings.GARDEN_MCP_SCHEMA_MAX_BYTES:,} bytes"
    try:
        nodes, depth, composed, patterns = _Expansion(schema).measure(schema)
    except _Refused as refused:
        return f"its input schema {refused.why}"
    except RecursionError:
        return "its input schema is nested too deeply"
    if nodes > settings.GARDEN_MCP_SCHEMA_MAX_NODES:
        return (
            f"its input schema has more than {settings.GARDEN_MCP_SCHEMA_MAX_NODES:,} parts "
            "(with its references expanded)"
        )
    if depth > settings.GARDEN_MCP_SCHEMA_MAX_DEPTH:
        return f"its input schema is nested more than {settings.GARDEN_MCP_SCHEMA_MAX_DEPTH} deep"
    if composed > settings.GARDEN_MCP_SCHEMA_MAX_COMPOSITION_DEPTH:
        return (
            "its input schema nests allOf/anyOf/oneOf/not more than "
            f"{settings.GARDEN_MCP_SCHEMA_MAX_COMPOSITION_DEPTH} deep"
        )
    if patterns > settings.GARDEN_MCP_SCHEMA_MAX_PATTERNS:
        return (
            f"its input schema has more than {settings.GARDEN_MCP_SCHEMA_MAX_PATTERNS} patterns "
            "(with its references expanded)"
        )
    return None


class _Expansion:
    """The measures of a schema with its local references expanded, memoised per node (so an
    exponential expansion is counted, not walked), and a cycle refused."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.done: dict[int, tuple[int, int, int, int]] = {}
        self.visiting: set[int] = set()
        self.keep: list[Any] = []  # nodes measured stay alive, so their ids stay theirs

    def measure(self, node: Any) -> tuple[int, int, int, int]:
        """(nodes, depth, composition depth, patterns) of ``node`` expanded."""
        if not isinstance(node, dict | list):
            return (1, 0, 0, 0)
        key = id(node)
        if key in self.done:
            return self.done[key]
        if key in self.visiting:
            raise _Refused("refers back into itself (a $ref cycle)")
        self.visiting.add(key)
        try:
            found = self._measure(node)
        finally:
            self.visiting.discard(key)
        self.done[key] = found
        self.keep.append(node)
        return found

    def _measure(self, node: dict | list) -> tuple[int, int, int, int]:
        nodes, depth, composed, patterns = 1, 0, 0, 0
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for name, child in items:
            n, d, c, p = self.measure(child)
            nodes += n
            depth = max(depth, d)
            composed = max(composed, c + (1 if name in COMPOSITION else 0))
            patterns += p
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                patterns += 1
            if isinstance(node.get("patternProperties"), dict):
                patterns += len(node["patternProperties"])
            for ref_key in REF_KEYS:
                ref = node.get(ref_key)
                if not isinstance(ref, str):
                    continue
                if ref_key != "$ref":
                    raise _Refused(f"uses {ref_key}")
                n, d, c, p = self.measure(self._target(ref))
                nodes += n
                depth = max(depth, d)
                composed = max(composed, c)
                patterns += p
            for anchor in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(anchor), str):
                    raise _Refused(f"uses {anchor}")
            if node is not self.root and isinstance(node.get("$id"), str):
                raise _Refused("sets $id inside itself")
        return nodes, depth + 1, composed, patterns

    def _target(self, ref: str) -> Any:
        """What a local reference (``#`` or ``#/a/b``) points at; refused otherwise."""
        if not ref.startswith("#"):
            raise _Refused(f"refers outside itself ($ref {ref[:100]!r})")
        pointer = unquote(ref[1:])
        if pointer and not pointer.startswith("/"):
            raise _Refused(f"refers to an anchor ($ref {ref[:100]!r})")
        found = self.root
        for part in pointer.split("/")[1:] if pointer else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(found, dict) and part in found:
                found = found[part]
            elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
                found = found[int(part)]
            else:
                raise _Refused(f"refers to what it does not have ($ref {ref[:100]!r})")
        return found


# --- at validation ------------------------------------------------------------------------

_deadline: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar(
    "garden_schema_deadline", default=None
)


@contextmanager
def validation_budget(seconds: float | None = None) -> Iterator[None]:
    """Run the block's validations (of ``bounded_validator`` classes) within ``seconds``
    (default GARDEN_TOOL_SCHEMA_SECONDS): past it, the keyword being checked raises
    SchemaTooSlow. Consume the errors inside the block (``iter_errors`` is lazy)."""
    budget = float(settings.GARDEN_TOOL_SCHEMA_SECONDS if seconds is None else seconds)
    token = _deadline.set((time.monotonic() + budget, budget))
    try:
        yield
    finally:
        _deadline.reset(token)


def remaining() -> float | None:
    """Seconds left of the validation budget (SchemaTooSlow when none), or None outside one."""
    held = _deadline.get()
    if held is None:
        return None
    left = held[0] - time.monotonic()
    if left <= 0:
        raise SchemaTooSlow(held[1])
    return left


def _checked(keyword):
    def check(validator, value, instance, schema):
        remaining()
        errors = keyword(validator, value, instance, schema)
        if errors:
            yield from errors

    return check


def bounded_validator(schema: dict[str, Any], *, extra: dict[str, Any] | None = None):
    """A validator class for ``schema`` whose every keyword first checks the validation
    budget (``validation_budget``), so no schema, whatever its shape, validates for longer;
    ``extra`` replaces keywords (a bounded ``pattern``) and is checked the same way."""
    cls = jsonschema.validators.validator_for(schema)
    keywords = {**cls.VALIDATORS, **(extra or {})}
    return jsonschema.validators.extend(cls, {k: _checked(v) for k, v in keywords.items()})
