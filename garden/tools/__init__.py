"""The tool registry: what a model may call, each tool's argument schema and its handler.

A handler takes the trusted ``ToolContext`` (who is calling, in which group/run) and the
model-supplied arguments, and returns a ``ToolOutcome``. Scope, owner and group always come
from the context, never from the arguments.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import regex

from garden.providers.types import ToolSpec
from garden.tools.schema_limits import (
    SchemaTooSlow,
    bounded_validator,
    remaining,
    validation_budget,
)

log = logging.getLogger(__name__)

SCHEMA_DIR = Path(__file__).resolve().parent.parent.parent / "schema"


@dataclass(frozen=True)
class ToolContext:
    owner_id: int
    agent_id: int
    conversation_id: int
    group_id: int | None = None
    request_id: int | None = None
    # The longest result the caller can carry back into the room: tools that page (file.read)
    # keep under it, so reading never turns into an oversized output.
    output_chars: int = 12_000


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool = False
    code: str = ""
    artifacts: tuple[int, ...] = ()


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    handler: Callable[[ToolContext, dict[str, Any]], ToolOutcome] | None
    # Tools the loop interprets itself (group.ask) have no handler here.
    loop_handled: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    # What the schema cannot say about valid arguments (a chart's series fit its labels):
    # the refusal, or None. Pure — it reads and writes nothing — so it runs before a person is
    # asked to approve the call, as well as before the call runs.
    check: Callable[[dict[str, Any]], ToolOutcome | None] | None = None


# Filled once per process, when the apps are ready: each app registers its own tools from
# its AppConfig.ready() (garden's files, memory and web; groups' ask, help and maker tools).
_REGISTRY: dict[str, Tool] = {}


@dataclass(frozen=True)
class ToolSource:
    """Tools that are not built in but belong to one owner (their MCP servers' tools), all
    named ``<prefix>…``: ``resolve`` finds one by name for an owner, ``listing`` gives them
    all, ``describe`` says in words what a call does (without reading anything)."""

    prefix: str
    resolve: Callable[[int, str], Tool | None]
    resolve_many: Callable[[int, list[str]], dict[str, Tool]]
    listing: Callable[[int], dict[str, Tool]]
    describe: Callable[[str, dict[str, Any]], str]


_SOURCES: list[ToolSource] = []

# How an agent's owner may say a sourced tool waits for approval (``Agent.tool_approvals``):
# always, never, or as the tool's own annotations say (the default).
APPROVAL_POLICIES = ("always", "never", "annotations")


def register(tool: Tool) -> Tool:
    _REGISTRY[tool.spec.name] = tool
    return tool


def register_source(source: ToolSource) -> ToolSource:
    _SOURCES[:] = [s for s in _SOURCES if s.prefix != source.prefix] + [source]
    return source


def _source_of(name: str) -> ToolSource | None:
    return next((s for s in _SOURCES if name.startswith(s.prefix)), None)


def is_sourced(name: str) -> bool:
    """Whether ``name`` is an owner's tool (an MCP server's) rather than a built-in."""
    return _source_of(name) is not None


def get_tool(name: str, *, owner_id: int | None = None) -> Tool | None:
    """The built-in tool ``name``, or with ``owner_id`` that owner's sourced tool of that name."""
    tool = _REGISTRY.get(name)
    if tool is not None or owner_id is None:
        return tool
    source = _source_of(name)
    return source.resolve(owner_id, name) if source is not None else None


def get_tools(names: list[str], *, owner_id: int) -> dict[str, Tool]:
    """The tools of ``names`` that exist for ``owner_id``, built-ins and its sourced ones, each
    source read once."""
    found = {n: _REGISTRY[n] for n in names if n in _REGISTRY}
    for source in _SOURCES:
        mine = [n for n in names if n.startswith(source.prefix) and n not in found]
        if mine:
            found.update(source.resolve_many(owner_id, mine))
    return found


def all_tools() -> dict[str, Tool]:
    """The built-in tools."""
    return dict(_REGISTRY)


def owner_tools(owner_id: int) -> dict[str, Tool]:
    """The sourced tools ``owner_id`` may give its agents (its MCP servers' and those the
    operator offers it)."""
    found: dict[str, Tool] = {}
    for source in _SOURCES:
        found.update(source.listing(owner_id))
    return found


def needs_approval(
    *, name: str, approval_tools: list[str], tool_approvals: dict[str, str], owner_id: int
) -> bool:
    """Whether a call of ``name`` waits for a person: a built-in when the agent's owner listed
    it in ``approval_tools``; a sourced tool by its policy in ``tool_approvals`` — always,
    never, or (the default) by its annotations: approval unless it says it only reads, and
    always when it says it destroys."""
    if name in (approval_tools or []):
        return True
    if not is_sourced(name):
        return False
    policy = (tool_approvals or {}).get(name, "annotations")
    if policy == "always":
        return True
    if policy == "never":
        return False
    tool = get_tool(name, owner_id=owner_id)
    return asks_by_annotations(tool.meta.get("annotations", {}) if tool is not None else {})


def asks_by_annotations(hints: dict[str, Any]) -> bool:
    """Whether a tool's own annotations ask for approval: unless it says it only reads, and
    always when it says it destroys (hints from a server err towards asking)."""
    if hints.get("destructiveHint") is True:
        return True
    return hints.get("readOnlyHint") is not True


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        raise KeyError(key)


def describe_action(name: str, arguments: dict[str, Any] | None) -> str:
    """What a tool call does, in words a person reads ("write Savings plan"): the tool's
    ``meta["describe"]``, a format string over its arguments, or "use <name>". Approval cards,
    Telegram messages and activity lines all say it this way."""
    source = _source_of(name)
    if source is not None:
        return source.describe(name, arguments or {})
    tool = get_tool(name)
    template = tool.meta.get("describe") if tool is not None else None
    if not template:
        return f"use {name}"
    args = {k: str(v)[:80] for k, v in (arguments or {}).items() if isinstance(v, str | int)}
    try:
        return template.format_map(_Blank(args))
    except (KeyError, ValueError, IndexError):
        # An argument the description names is missing: say what the tool does in general.
        return tool.meta.get("describe_general", f"use {name}")


def load_schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / name).read_text())


def check_arguments(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """Validate model-supplied arguments against the tool's schema; the first error or None.
    A schema that cannot be applied (an owner's server's) is an error of the call, never a
    crash; one that takes longer than GARDEN_TOOL_SCHEMA_SECONDS raises SchemaTooSlow."""
    try:
        validator = _validator(tool.spec.name, tool.spec.parameters)
        with validation_budget():
            error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    except SchemaTooSlow:
        raise
    except Exception as exc:  # an unresolvable reference, …: the server's schema, not ours
        return f"the tool's schema cannot be applied ({type(exc).__name__})"
    if error is None:
        return None
    path = "/".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{path}: {error.message}"


def call_refusal(tool: Tool, arguments: dict[str, Any]) -> ToolOutcome | None:
    """Why a call of ``tool`` with ``arguments`` can never run — they do not fit its schema
    (INVALID_TOOL_ARGUMENTS), or its own ``check`` refuses them — or None. Reads nothing, so
    the loop asks it before offering the call for approval: a call that cannot run goes back
    to the model at once instead of waiting for a person."""
    try:
        problem = check_arguments(tool, arguments)
    except SchemaTooSlow as slow:
        return ToolOutcome(f"{slow.code}: {slow}", is_error=True, code=slow.code)
    if problem:
        return ToolOutcome(
            f"INVALID_TOOL_ARGUMENTS: {problem}", is_error=True, code="INVALID_TOOL_ARGUMENTS"
        )
    return tool.check(arguments) if tool.check is not None else None


_VALIDATORS: dict[str, tuple[dict[str, Any], Any]] = {}


def _validator(name: str, schema: dict[str, Any]):
    """The tool's schema checked and compiled once per process (``jsonschema.validate``
    re-checks the schema itself on every call, which costs more than the validation); an
    owner's tool, whose schema is its server's and may change, is compiled each time. Either
    checks the validation budget at every keyword (``schema_limits.bounded_validator``)."""
    if is_sourced(name):
        cls = bounded_validator(schema, extra={"pattern": _bounded_pattern})
        cls.check_schema(schema)
        return cls(schema)
    cached = _VALIDATORS.get(name)
    if cached is None or cached[0] is not schema:
        cls = bounded_validator(schema)
        cls.check_schema(schema)
        cached = _VALIDATORS[name] = (schema, cls(schema))
    return cached[1]


# An owner's server's pattern is matched for at most this long (a pattern such as ^(a|a)+$
# backtracks for minutes on a short string, and would hold a shared worker).
PATTERN_SECONDS = 0.05


def _bounded_pattern(validator, pattern: str, instance: Any, schema: dict[str, Any]):
    if not validator.is_type(instance, "string"):
        return
    left = remaining()  # SchemaTooSlow when the whole validation's budget is spent
    try:
        found = regex.search(
            pattern,
            instance,
            timeout=PATTERN_SECONDS if left is None else min(PATTERN_SECONDS, left),
        )
    except TimeoutError:
        yield jsonschema.ValidationError(f"matching the pattern {pattern!r} took too long")
        return
    except regex.error:
        yield jsonschema.ValidationError(f"the pattern {pattern!r} cannot be used")
        return
    if found is None:
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def run_tool(ctx: ToolContext, name: str, arguments: dict[str, Any]) -> ToolOutcome:
    """Run tool ``name`` on model-supplied ``arguments``; every failure is a named outcome the
    model reads (TOOL_NOT_AVAILABLE, INVALID_TOOL_ARGUMENTS, TOOL_FAILED), never a crash. An
    owner's sourced tool is found for ``ctx.owner_id`` alone."""
    tool = get_tool(name, owner_id=ctx.owner_id)
    if tool is None or tool.handler is None:
        return ToolOutcome(
            f"TOOL_NOT_AVAILABLE: {name!r}", is_error=True, code="TOOL_NOT_AVAILABLE"
        )
    refused = call_refusal(tool, arguments)
    if refused is not None:
        return refused
    try:
        return tool.handler(ctx, arguments)
    except Exception as exc:  # a tool's failure is the model's information, not a crash
        log.exception("tool %s failed", name)
        return ToolOutcome(
            f"TOOL_FAILED: {type(exc).__name__}: {exc}", is_error=True, code="TOOL_FAILED"
        )
