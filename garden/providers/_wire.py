"""Wire helpers both HTTP adapters (OpenAI, Anthropic) map requests and replies with: tool
names on the wire, artifacts as text lines or content parts, and the checked reads of a
provider's JSON that turn any shape they did not expect into a MalformedReply."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any, TypeVar

from .types import ArtifactRef, MalformedReply, ToolSpec

T = TypeVar("T")

# What decoding or mapping a provider's JSON can raise besides ValueError: nesting deeper than
# the parser's recursion limit, or a value of a type the mapping did not expect. Each is a
# MalformedReply, never an exception that escapes the step (whose redelivery would call the
# same server again).
DECODING_ERRORS = (RecursionError, ValueError, TypeError, KeyError, IndexError, AttributeError)


class ToolNames:
    """Maps tool names to wire names and back; both providers forbid ``.`` in tool names.

    ``.`` becomes ``__`` on the wire. Names declared in the request map back exactly, so a
    declared ``a__b`` stays ``a__b``; an undeclared name from the model maps ``__`` to ``.``.
    """

    def __init__(self, tools: Iterable[ToolSpec] = ()) -> None:
        self._from_wire: dict[str, str] = {}
        for spec in tools:
            wire = to_wire_name(spec.name)
            other = self._from_wire.setdefault(wire, spec.name)
            if other != spec.name:
                raise ValueError(f"tool names {other!r} and {spec.name!r} collide on the wire")

    def to_wire(self, name: str) -> str:
        return to_wire_name(name)

    def from_wire(self, wire: str) -> str:
        return self._from_wire.get(wire) or from_wire_name(wire)


def to_wire_name(name: str) -> str:
    return name.replace(".", "__")


def from_wire_name(wire: str) -> str:
    return wire.replace("__", ".")


def artifact_line(ref: ArtifactRef) -> str:
    """The one-line text a model sees for an artifact; a picture or PDF carried as a content
    part follows its line, so the model knows which artifact it is looking at."""
    return f"[artifact {ref.artifact_id} ({ref.kind}): {ref.title}]"


def carries_media(options: dict[str, Any] | None) -> bool:
    """Whether an account may be sent pictures and PDFs at all: ``"images": false`` in its
    options says its model reads text only (a local text model)."""
    return (options or {}).get("images", True) is not False


def inline(ref: ArtifactRef, media_types: frozenset[str]) -> bool:
    """Whether ``ref`` goes to the model as a content part: its bytes were loaded and the
    adapter (and the account) carry its media type."""
    return ref.data is not None and ref.media_type in media_types


def base64_data(ref: ArtifactRef) -> str:
    return base64.b64encode(ref.data or b"").decode("ascii")


def require(obj: Any, key: str, kind: type[T], where: str) -> T:
    """``obj[key]`` checked to be a ``kind``; anything else is a MalformedReply."""
    if not isinstance(obj, dict):
        raise MalformedReply(f"{where}: expected an object, got {type(obj).__name__}")
    value = obj.get(key)
    # bool is an int subclass; a token count of True is as malformed as a missing one.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MalformedReply(f"{where}: field {key!r} missing or not {kind.__name__}")
    return value


def count(obj: Any, *keys: str) -> int:
    """Sum of the integer token counts under ``keys``; absent or odd values count as zero.

    Usage is bookkeeping, not the answer: a server that omits it still produced a reply.
    """
    if not isinstance(obj, dict):
        return 0
    total = 0
    for key in keys:
        value = obj.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            total += value
    return total


def parse_arguments(raw: Any, where: str) -> dict[str, Any]:
    """Tool-call arguments as a dict, from a JSON string (or an object some servers send)."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        raise MalformedReply(f"{where}: arguments are {type(raw).__name__}, expected JSON text")
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise MalformedReply(f"{where}: arguments are not valid JSON: {raw[:200]!r}") from exc
    if not isinstance(value, dict):
        raise MalformedReply(f"{where}: arguments decode to {type(value).__name__}, not an object")
    return value
