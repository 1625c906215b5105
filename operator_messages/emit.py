"""The two gardener-only emitters. Routing comes from the current goal's origin, never the caller.

Conversation origin: a garden turn in that conversation (canonical) plus an attempted reply
copy at the top of the inbox. No origin: one note file under the inbox's notes/. Either way,
one validated record line in the run's operator-messages.jsonl, or nothing at all. A file is
staged under a temporary name and put in place only once its emission has committed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from garden import events
from garden.models import Conversation
from garden.runtime import RunContext, current_run_context, runtime_root
from garden.services.conversations import message_append, text_block
from groups.selectors import solo_room_of

from .models import PendingRecord
from .paths import inbox_relative, records_path
from .pending import flush_pending
from .record_file import append_record
from .staging import StagedFile
from .storage import check_appendable
from .validate import (
    CANONICAL,
    CONVERSATION_NOT_FOUND,
    INVALID_OPERATOR_MESSAGE_CONTEXT,
    INVALID_OPERATOR_MESSAGE_KIND,
    IO_ERROR,
    NO_TRANSCRIPT,
    OUT_OF_BAND_NOTE,
    RECENTLY_CONCLUDED,
    REPLY_COPY,
    SCHEMA_VERSION,
    SENDER,
    TEND_SURVEY,
    ValidationResult,
    parse_origin,
    validate_operator_message_record,
    validate_operator_message_request,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmitResult:
    """``ok`` with the record that was written, or a named ``code`` and nothing written."""

    ok: bool
    record: dict[str, Any] | None = None
    code: str | None = None
    message: str = ""
    field: str | None = None

    @classmethod
    def rejected(cls, check: ValidationResult) -> EmitResult:
        return cls(ok=False, code=check.code, message=check.message, field=check.field)

    @property
    def delivery_file(self) -> Path | None:
        if self.record and "delivery_path" in self.record:
            return runtime_root() / self.record["delivery_path"]
        return None


class OperatorMessageFailed(Exception):
    """An emission a caller could not do without; carries the rejected result."""

    def __init__(self, result: EmitResult) -> None:
        super().__init__(f"{result.code}: {result.message}")
        self.result = result


def emit_tend_survey(content: str, **fields: Any) -> EmitResult:
    """Emit the gardener's tend survey; valid only from the current tend goal."""
    return _emit(TEND_SURVEY, content, fields)


def emit_recently_concluded(content: str, **fields: Any) -> EmitResult:
    """Emit a recently-concluded note; valid only from a durable (or mission) goal."""
    return _emit(RECENTLY_CONCLUDED, content, fields)


def _emit(kind: str, content: str, fields: dict[str, Any]) -> EmitResult:
    if "kind" in fields and fields.pop("kind") != kind:
        return EmitResult.rejected(
            ValidationResult.reject(
                INVALID_OPERATOR_MESSAGE_KIND, f"this emitter only emits {kind}", "kind"
            )
        )
    request = {"kind": kind, "sender": SENDER, "content": content, **fields}
    ctx = current_run_context()
    check = validate_operator_message_request(request, context=ctx)
    if not check.ok or ctx is None:
        return EmitResult.rejected(check)
    origin = parse_origin(ctx.origin).origin
    if origin is None:
        return _emit_note(kind, content, ctx)
    return _emit_to_conversation(kind, content, ctx, origin)


def _base_record(kind: str, ctx: RunContext, now: datetime) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "sender": SENDER,
        "emitted_at": now.isoformat(),
        "source_goal_id": ctx.goal_id,
        "source_run_id": ctx.run_id,
    }


def _file_name(kind: str, now: datetime) -> str:
    # Sorts by time; the short id keeps two emissions in one microsecond apart.
    return f"{now:%Y%m%dT%H%M%S.%f}Z-{kind}-{uuid.uuid4().hex[:8]}.md"


def _render_file(record: dict[str, Any], content: str, extra: dict[str, Any]) -> str:
    head = {
        key: record[key]
        for key in ("kind", "sender", "emitted_at", "source_goal_id", "source_run_id")
    }
    head.update(extra)
    lines = ["---", *(f"{key}: {value}" for key, value in head.items()), "---", ""]
    return "\n".join(lines) + "\n" + content.strip() + "\n"


def _io_error(what: str, exc: BaseException) -> EmitResult:
    log.warning("operator message not emitted: %s", what, exc_info=exc)
    return EmitResult(ok=False, code=IO_ERROR, message=f"{what}: {exc}")


def _emit_note(kind: str, content: str, ctx: RunContext) -> EmitResult:
    """No origin: the note is staged, its record appended (the emission's commit), then the
    note put in place. Touches no database row. A crash before the append leaves a temp that
    recovery removes; after it, a temp that recovery puts in place (pending.py)."""
    now = timezone.now()
    relative = inbox_relative("notes", _file_name(kind, now))
    record = {
        **_base_record(kind, ctx, now),
        "transcript_policy": NO_TRANSCRIPT,
        "delivery_policy": OUT_OF_BAND_NOTE,
        "delivery_path": relative,
    }
    check = validate_operator_message_record(record)
    if not check.ok:
        return EmitResult.rejected(check)
    try:
        staged = StagedFile.write(
            runtime_root() / relative, ctx.run_id, _render_file(record, content, {})
        )
    except OSError as exc:
        return _io_error("could not write the note", exc)
    try:
        append_record(ctx.run_id, record)
    except OSError as exc:
        # No record may name a file it does not vouch for, nor a note outlive its record.
        staged.discard()
        return _io_error("could not append the record", exc)
    try:
        staged.place()
    except OSError:
        # The record is written, so the note was emitted; the next recovery puts it in place.
        log.warning("note %s left staged for recovery", relative, exc_info=True)
        staged.release()
    return EmitResult(ok=True, record=record)


class _Rejected(Exception):
    def __init__(self, check: ValidationResult) -> None:
        super().__init__(check.message)
        self.check = check


def _emit_to_conversation(
    kind: str,
    content: str,
    ctx: RunContext,
    origin: dict[str, Any],
) -> EmitResult:
    """Conversation origin: the reply copy is staged first (an attempt: its failure costs
    only the copy), then the garden turn and its pending record in one transaction; the copy is
    put in place and the record line appended after the commit (pending.py). A record file
    that cannot take a line refuses the emission before anything commits (IO_ERROR, the turn
    rolled back, the staged copy removed).

    Inside a caller's transaction the copy and the line follow that transaction's commit; its
    rollback takes the turn and the pending record with it, and the staged copy is left for
    recovery to remove: no copy is put in place and no line written.
    """
    conversation_id = origin["conversation_id"]
    now = timezone.now()
    record = {
        **_base_record(kind, ctx, now),
        "transcript_policy": CANONICAL,
        "delivery_policy": REPLY_COPY,
        "origin": origin,
    }
    relative = inbox_relative(_file_name(kind, now))
    copy: StagedFile | None
    try:
        copy = StagedFile.write(
            runtime_root() / relative,
            ctx.run_id,
            _render_file(record, content, {"conversation_id": conversation_id}),
        )
    except OSError as exc:
        log.warning("reply copy not written; the conversation turn stays canonical", exc_info=exc)
        copy = None
    else:
        record["delivery_path"] = relative

    try:
        with transaction.atomic():
            # Locked and re-read: the conversation may have closed since the request check.
            conversation = (
                Conversation.objects.select_for_update(no_key=True)
                .filter(pk=conversation_id)
                .first()
            )
            if conversation is None:
                raise _Rejected(
                    ValidationResult.reject(
                        CONVERSATION_NOT_FOUND,
                        f"conversation {conversation_id} does not exist",
                        "origin",
                    )
                )
            if conversation.status != Conversation.Status.OPEN:
                raise _Rejected(
                    ValidationResult.reject(
                        INVALID_OPERATOR_MESSAGE_CONTEXT,
                        f"conversation {conversation_id} is closed",
                        "origin",
                    )
                )
            # A group's thread, or a 1:1 conversation in its agent's own room (if it has one).
            room = solo_room_of(conversation=conversation)
            room_id = conversation.group_id or (room.pk if room else None)
            channel = events.group_channel(room_id) if room_id else None
            message = message_append(
                conversation_id=conversation_id,
                speaker_kind="garden",
                content=[text_block(content.strip())],
                kind="turn",
                channel=channel,
            )
            record["conversation_message_id"] = message.pk
            check = validate_operator_message_record(record)
            if not check.ok:
                raise _Rejected(check)
            check_appendable(records_path(ctx.run_id))
            PendingRecord.objects.create(run_id=ctx.run_id, record=record)
            transaction.on_commit(_after_commit(ctx.run_id, copy), robust=True)
    except _Rejected as rejected:
        _discard(copy)
        return EmitResult.rejected(rejected.check)
    except (OSError, DatabaseError) as exc:
        _discard(copy)
        return _io_error("could not record the conversation turn", exc)
    return EmitResult(ok=True, record=record)


def _after_commit(run_id: str, copy: StagedFile | None) -> Callable[[], None]:
    # The callback holds the staged copy (and so its lock) until the commit it waits for.
    def complete() -> None:
        try:
            flush_pending(run_id=run_id)
        finally:
            if copy is not None:
                copy.release()

    return complete


def _discard(copy: StagedFile | None) -> None:
    if copy is not None:
        copy.discard()
