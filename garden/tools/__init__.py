"""The tool registry: what a model may call, each tool's argument schema and its handler.

A handler takes the trusted ``ToolContext`` (who is calling, in which group/run) and the
model-supplied arguments, and returns a ``ToolOutcome``. Scope, owner and group always come
from the context, never from the arguments.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from garden.providers.types import ToolSpec

SCHEMA_DIR = Path(__file__).resolve().parent.parent.parent / "schema"


@dataclass(frozen=True)
class ToolContext:
    owner_id: int
    agent_id: int
    conversation_id: int
    group_id: int | None = None
    request_id: int | None = None


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


_REGISTRY: dict[str, Tool] = {}


def register(tool: Tool) -> Tool:
    _REGISTRY[tool.spec.name] = tool
    return tool


def get_tool(name: str) -> Tool | None:
    _load_builtin_tools()
    return _REGISTRY.get(name)


def all_tools() -> dict[str, Tool]:
    _load_builtin_tools()
    return dict(_REGISTRY)


def load_schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / name).read_text())


def check_arguments(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """Validate model-supplied arguments against the tool's schema; the first error or None."""
    validator = _validator(tool.spec.name, tool.spec.parameters)
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    path = "/".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{path}: {error.message}"


_VALIDATORS: dict[str, tuple[dict[str, Any], Any]] = {}


def _validator(name: str, schema: dict[str, Any]):
    """The tool's schema checked and compiled once per process (``jsonschema.validate``
    re-checks the schema itself on every call, which costs more than the validation)."""
    cached = _VALIDATORS.get(name)
    if cached is None or cached[0] is not schema:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        cached = _VALIDATORS[name] = (schema, cls(schema))
    return cached[1]


_loaded = False
_loading = threading.RLock()


def _load_builtin_tools() -> None:
    """Import the modules that register the built-in tools, once per process. The flag is set
    only after the imports, under a lock, so a worker thread never sees a half-filled registry."""
    global _loaded
    if _loaded:
        return
    with _loading:
        if _loaded:
            return
        import importlib

        for module in (
            "groups.tools",
            "garden.tools.files",
            "garden.tools.memory",
            "garden.tools.web",
            "garden.tools.platform",
        ):
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name != module:
                    raise
        _loaded = True
