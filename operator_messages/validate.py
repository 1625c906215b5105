"""Validation boundaries of operator messages: the emitters' request and the persisted record.

Both return a ValidationResult with a named code and never raise on JSON-like input.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from jsonschema import Draft202012Validator

from garden.errors import is_row_id
from garden.models import Conversation
from garden.runtime import GARDENER, RunContext, current_run_context

from .paths import garden_name, inbox_relative, is_run_id

MISSING_RUNTIME_CONTEXT = "MISSING_RUNTIME_CONTEXT"
OPERATOR_MESSAGE_NOT_AUTHORIZED = "OPERATOR_MESSAGE_NOT_AUTHORIZED"
UNKNOWN_OPERATOR_MESSAGE_FIELD = "UNKNOWN_OPERATOR_MESSAGE_FIELD"
INVALID_OPERATOR_MESSAGE_KIND = "INVALID_OPERATOR_MESSAGE_KIND"
INVALID_OPERATOR_MESSAGE_SENDER = "INVALID_OPERATOR_MESSAGE_SENDER"
INVALID_OPERATOR_MESSAGE_CONTEXT = "INVALID_OPERATOR_MESSAGE_CONTEXT"
INVALID_OPERATOR_MESSAGE_ORIGIN = "INVALID_OPERATOR_MESSAGE_ORIGIN"
INVALID_OPERATOR_MESSAGE_POLICY = "INVALID_OPERATOR_MESSAGE_POLICY"
INVALID_OPERATOR_MESSAGE_PATH = "INVALID_OPERATOR_MESSAGE_PATH"
CONVERSATION_NOT_FOUND = "CONVERSATION_NOT_FOUND"
EMPTY_CONTENT = "EMPTY_CONTENT"
IO_ERROR = "IO_ERROR"
# Not in the seed's table: a record whose envelope (not an object, schema_version,
# emitted_at) is wrong, which none of the routing codes describes.
INVALID_OPERATOR_MESSAGE_RECORD = "INVALID_OPERATOR_MESSAGE_RECORD"

CODES = frozenset(
    {
        MISSING_RUNTIME_CONTEXT,
        OPERATOR_MESSAGE_NOT_AUTHORIZED,
        UNKNOWN_OPERATOR_MESSAGE_FIELD,
        INVALID_OPERATOR_MESSAGE_KIND,
        INVALID_OPERATOR_MESSAGE_SENDER,
        INVALID_OPERATOR_MESSAGE_CONTEXT,
        INVALID_OPERATOR_MESSAGE_ORIGIN,
        INVALID_OPERATOR_MESSAGE_POLICY,
        INVALID_OPERATOR_MESSAGE_PATH,
        CONVERSATION_NOT_FOUND,
        EMPTY_CONTENT,
        IO_ERROR,
        INVALID_OPERATOR_MESSAGE_RECORD,
    }
)

TEND_SURVEY = "tend_survey"
RECENTLY_CONCLUDED = "recently_concluded"
# Tuples, not sets: membership then compares by ==, so an unhashable value cannot raise.
KINDS = (TEND_SURVEY, RECENTLY_CONCLUDED)
SENDER = "garden"
CANONICAL, NO_TRANSCRIPT = "canonical", "none"
REPLY_COPY, OUT_OF_BAND_NOTE = "reply_copy", "out_of_band_note"
SCHEMA_VERSION = 1

# Which current goal kinds may emit each kind. "durable" and "mission" are the durable goals.
GOAL_KINDS_FOR = {TEND_SURVEY: ("tend",), RECENTLY_CONCLUDED: ("durable", "mission")}

REQUEST_FIELDS = ("kind", "sender", "content", "source_goal_id", "source_run_id", "origin")


@dataclass(frozen=True)
class ValidationResult:
    ok: bool
    code: str | None = None
    message: str = ""
    field: str | None = None

    @classmethod
    def valid(cls) -> ValidationResult:
        return cls(ok=True)

    @classmethod
    def reject(cls, code: str, message: str, field: str | None = None) -> ValidationResult:
        return cls(ok=False, code=code, message=message, field=field)


VALID = ValidationResult.valid()


def _is_id(value: object) -> bool:
    # bool is an int subclass; True must not pass for goal 1.
    return is_row_id(value)


@dataclass(frozen=True)
class ParsedOrigin:
    ok: bool
    origin: dict[str, Any] | None = None


def parse_origin(value: object) -> ParsedOrigin:
    """A goal origin: None (no origin) or ``{"kind": "conversation", "conversation_id": n}``.

    Other keys a goal may carry are allowed and dropped; records keep only the linkage.
    """
    if value is None:
        return ParsedOrigin(ok=True)
    if (
        isinstance(value, dict)
        and value.get("kind") == "conversation"
        and _is_id(value.get("conversation_id"))
    ):
        return ParsedOrigin(
            ok=True, origin={"kind": "conversation", "conversation_id": value["conversation_id"]}
        )
    return ParsedOrigin(ok=False)


def validate_operator_message_request(
    data: dict[str, Any],
    *,
    context: RunContext | None = None,
) -> ValidationResult:
    """Check one emitter request against the current run context before anything is written.

    ``context`` defaults to ``current_run_context()``. Reads the database only for a
    conversation origin (the conversation must exist and be open).
    """
    ctx = context if context is not None else current_run_context()
    if ctx is None:
        return ValidationResult.reject(
            MISSING_RUNTIME_CONTEXT, "no current goal/run context in this process"
        )
    if ctx.actor != GARDENER:
        return ValidationResult.reject(
            OPERATOR_MESSAGE_NOT_AUTHORIZED, "only the gardener may emit operator messages"
        )
    shape = _check_request_shape(data)
    if not shape.ok:
        return shape
    return _check_request_context(data, ctx)


def _check_request_shape(data: object) -> ValidationResult:
    if not isinstance(data, dict):
        return ValidationResult.reject(
            INVALID_OPERATOR_MESSAGE_KIND, "a request is an object naming its kind"
        )
    unknown = sorted(
        repr(k) if not isinstance(k, str) else k for k in data if k not in REQUEST_FIELDS
    )
    if unknown:
        return ValidationResult.reject(
            UNKNOWN_OPERATOR_MESSAGE_FIELD, f"unsupported field {unknown[0]}", unknown[0]
        )
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        return ValidationResult.reject(
            INVALID_OPERATOR_MESSAGE_KIND, f"kind must be one of {', '.join(KINDS)}", "kind"
        )
    sender = data.get("sender")
    if not isinstance(sender, str) or sender != SENDER:
        return ValidationResult.reject(
            INVALID_OPERATOR_MESSAGE_SENDER, 'sender must be "garden"', "sender"
        )
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        return ValidationResult.reject(EMPTY_CONTENT, "content is empty", "content")
    return VALID


def _check_request_context(data: dict[str, Any], ctx: RunContext) -> ValidationResult:
    """Source ids, goal kind and origin against the trusted context of the current run."""
    kind = data["kind"]
    if not _is_id(ctx.goal_id) or not is_run_id(ctx.run_id):
        return ValidationResult.reject(
            INVALID_OPERATOR_MESSAGE_CONTEXT, "the run context names no valid goal and run"
        )
    if "source_goal_id" in data and not (
        _is_id(data["source_goal_id"]) and data["source_goal_id"] == ctx.goal_id
    ):
        return ValidationResult.reject(
            INVALID_OPERATOR_MESSAGE_CONTEXT,
            "source_goal_id is not the current goal",
            "source_goal_id",
        )
    if "source_run_id" in data and not (
        isinstance(data["source_run_id"], str) and data["source_run_id"] == ctx.run_id
    ):
        return ValidationResult.reject(
            INVALID_OPERATOR_MESSAGE_CONTEXT,
            "source_run_id is not the current run",
            "source_run_id",
        )
    if ctx.goal_kind not in GOAL_KINDS_FOR[kind]:
        return ValidationResult.reject(
            INVALID_OPERATOR_MESSAGE_CONTEXT,
            f"{kind} cannot be emitted from a {ctx.goal_kind!r} goal",
            "kind",
        )

    origin = parse_origin(ctx.origin)
    if not origin.ok:
        return ValidationResult.reject(
            INVALID_OPERATOR_MESSAGE_ORIGIN, "the current goal's origin is malformed", "origin"
        )
    if "origin" in data:
        requested = parse_origin(data["origin"])
        if not requested.ok:
            return ValidationResult.reject(
                INVALID_OPERATOR_MESSAGE_ORIGIN, "origin is malformed", "origin"
            )
        # Routing is derived from the goal, never chosen by the caller.
        if requested.origin != origin.origin:
            return ValidationResult.reject(
                INVALID_OPERATOR_MESSAGE_CONTEXT,
                "origin is not the current goal's origin",
                "origin",
            )
    if origin.origin is not None:
        return _check_conversation(origin.origin["conversation_id"])
    return VALID


def _check_conversation(conversation_id: int) -> ValidationResult:
    status = (
        Conversation.objects.filter(pk=conversation_id).values_list("status", flat=True).first()
    )
    if status is None:
        return ValidationResult.reject(
            CONVERSATION_NOT_FOUND, f"conversation {conversation_id} does not exist", "origin"
        )
    if status != Conversation.Status.OPEN:
        return ValidationResult.reject(
            INVALID_OPERATOR_MESSAGE_CONTEXT, f"conversation {conversation_id} is closed", "origin"
        )
    return VALID


# --- the persisted record -------------------------------------------------------------------

SCHEMA_PATH = Path(settings.BASE_DIR) / "schema" / "operator-message.schema.json"

# The code a bad value of each field earns, in the order fields are checked.
FIELD_CODES = {
    "kind": INVALID_OPERATOR_MESSAGE_KIND,
    "sender": INVALID_OPERATOR_MESSAGE_SENDER,
    "schema_version": INVALID_OPERATOR_MESSAGE_RECORD,
    "emitted_at": INVALID_OPERATOR_MESSAGE_RECORD,
    "source_goal_id": INVALID_OPERATOR_MESSAGE_CONTEXT,
    "source_run_id": INVALID_OPERATOR_MESSAGE_CONTEXT,
    "transcript_policy": INVALID_OPERATOR_MESSAGE_POLICY,
    "delivery_policy": INVALID_OPERATOR_MESSAGE_POLICY,
    "origin": INVALID_OPERATOR_MESSAGE_ORIGIN,
    "conversation_message_id": INVALID_OPERATOR_MESSAGE_ORIGIN,
    "delivery_path": INVALID_OPERATOR_MESSAGE_PATH,
}
_INT_FIELDS = ("schema_version", "source_goal_id", "conversation_message_id")
_REPLY_PATH_RE = re.compile(r"inbox/([^/.][^/]*)/([^/.][^/]*\.md)")
_NOTE_PATH_RE = re.compile(r"inbox/([^/.][^/]*)/notes/([^/.][^/]*\.md)")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


@cache
def record_schema() -> dict[str, Any]:
    schema = json.loads(SCHEMA_PATH.read_text())
    Draft202012Validator.check_schema(schema)
    return schema


@cache
def _record_validator() -> Draft202012Validator:
    return Draft202012Validator(record_schema())


@cache
def _field_validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(record_schema()["properties"][name])


def validate_operator_message_record(data: dict[str, Any]) -> ValidationResult:
    """Check one persisted record: the JSON Schema, then the routing rules it cannot express
    (which garden's inbox a delivery path is in). The first problem found names the code.
    Touches neither the database nor the filesystem."""
    if not isinstance(data, dict):
        return ValidationResult.reject(INVALID_OPERATOR_MESSAGE_RECORD, "a record is a JSON object")
    schema = record_schema()
    unknown = sorted(
        repr(k) if not isinstance(k, str) else k for k in data if k not in schema["properties"]
    )
    if unknown:
        return ValidationResult.reject(
            UNKNOWN_OPERATOR_MESSAGE_FIELD, f"unsupported field {unknown[0]}", unknown[0]
        )
    for name, code in FIELD_CODES.items():
        if name not in data:
            if name in schema["required"]:
                return ValidationResult.reject(code, f"{name} is required", name)
            continue
        if not _field_validator(name).is_valid(data[name]) or not _exact_ints(name, data[name]):
            return ValidationResult.reject(code, f"{name} is not valid", name)
    try:
        datetime.fromisoformat(data["emitted_at"])
    except ValueError:
        return ValidationResult.reject(
            INVALID_OPERATOR_MESSAGE_RECORD, "emitted_at is not a date-time", "emitted_at"
        )

    policy = _check_policy(data)
    if not policy.ok:
        return policy
    if "delivery_path" in data:
        path = _check_delivery_path(data["delivery_path"], data["delivery_policy"])
        if not path.ok:
            return path

    # The schema is the authority; anything the checks above let through is still refused.
    for error in _record_validator().iter_errors(data):
        name = error.path[0] if error.path else None
        code = (
            FIELD_CODES.get(name, INVALID_OPERATOR_MESSAGE_POLICY)
            if isinstance(name, str)
            else INVALID_OPERATOR_MESSAGE_POLICY
        )
        return ValidationResult.reject(
            code, error.message[:200], name if isinstance(name, str) else None
        )
    return VALID


def _exact_ints(name: str, value: Any) -> bool:
    """JSON Schema counts 1.0 as an integer; an id or version in a record is written as 1."""
    if name == "origin":
        return type(value["conversation_id"]) is int
    return name not in _INT_FIELDS or type(value) is int


def _check_policy(data: dict[str, Any]) -> ValidationResult:
    pair = (data["transcript_policy"], data["delivery_policy"])
    linked = "origin" in data or "conversation_message_id" in data
    if pair == (CANONICAL, REPLY_COPY):
        if "origin" not in data or "conversation_message_id" not in data:
            return ValidationResult.reject(
                INVALID_OPERATOR_MESSAGE_POLICY,
                "a conversation-backed record names its origin and conversation_message_id",
                "origin" if "origin" not in data else "conversation_message_id",
            )
        return VALID
    if pair == (NO_TRANSCRIPT, OUT_OF_BAND_NOTE):
        if linked:
            return ValidationResult.reject(
                INVALID_OPERATOR_MESSAGE_POLICY,
                "an out-of-band note has no origin or conversation_message_id",
                "origin" if "origin" in data else "conversation_message_id",
            )
        if "delivery_path" not in data:
            return ValidationResult.reject(
                INVALID_OPERATOR_MESSAGE_POLICY,
                "an out-of-band note names its note file",
                "delivery_path",
            )
        return VALID
    return ValidationResult.reject(
        INVALID_OPERATOR_MESSAGE_POLICY,
        f"transcript_policy {pair[0]!r} does not go with delivery_policy {pair[1]!r}",
        "delivery_policy",
    )


def _check_delivery_path(path: str, delivery_policy: str) -> ValidationResult:
    """Reply copies sit at the top of the inbox, notes directly in notes/; nothing else.

    Checked on the text alone: no segment may start with a dot (so no ``..``), the depth is
    fixed and the garden is this one, so the path cannot leave its surface. Symlinks an
    operator placed inside the inbox are configuration, not an escape, and are not followed.
    """
    surface = _NOTE_PATH_RE if delivery_policy == OUT_OF_BAND_NOTE else _REPLY_PATH_RE
    match = surface.fullmatch(path)
    expected = PurePosixPath(
        inbox_relative("notes") if delivery_policy == OUT_OF_BAND_NOTE else inbox_relative()
    )
    if (
        match is None
        or _CONTROL_RE.search(path)
        or match.group(1) != garden_name()
        or PurePosixPath(path).parent != expected
    ):
        return ValidationResult.reject(
            INVALID_OPERATOR_MESSAGE_PATH,
            f"delivery_path is not on the {delivery_policy} surface",
            "delivery_path",
        )
    return VALID
