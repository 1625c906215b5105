"""The per-run record file, ``runs/<run-id>/operator-messages.jsonl``: append one line, and
read back what the file holds now (pending records are ``operator_messages.pending``'s, and
``operator_messages.records`` reads after flushing them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .paths import records_path
from .storage import append_line
from .validate import (
    INVALID_OPERATOR_MESSAGE_CONTEXT,
    INVALID_OPERATOR_MESSAGE_RECORD,
    validate_operator_message_record,
)


@dataclass(frozen=True)
class InvalidLine:
    line_number: int
    code: str
    message: str
    text: str


@dataclass(frozen=True)
class RecordLog:
    records: list[dict[str, Any]] = field(default_factory=list)
    invalid: list[InvalidLine] = field(default_factory=list)


def encode_record(record: dict[str, Any]) -> bytes:
    # ASCII-only and compact: one short line, whatever the content of the fields.
    return (json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


def append_record(run_id: str, record: dict[str, Any]) -> None:
    """Append one record the caller has already validated. Raises OSError on failure, in which
    case the file is as it was."""
    append_line(records_path(run_id), encode_record(record))


def append_turn_record(run_id: str, record: dict[str, Any]) -> bool:
    """Append a conversation-backed record unless the run's file already names its turn;
    whether it was appended. Checked under the file's lock, so two processes completing the
    same emission append its line once. Raises OSError as ``append_record`` does."""
    message_id = record["conversation_message_id"]

    def named(raw: bytes) -> bool:
        records = parse_log(raw, run_id).records
        return any(r.get("conversation_message_id") == message_id for r in records)

    return append_line(records_path(run_id), encode_record(record), unless=named)


def read_file_records(run_id: str) -> list[dict[str, Any]]:
    """The valid records the run's file holds now, without appending what is pending."""
    return read_log(run_id).records


def read_log(run_id: str) -> RecordLog:
    """Every line of the run's file now: the valid records in order, and the lines that are
    not (undecodable, not JSON, failing the record validator, or from another run)."""
    try:
        raw = records_path(run_id).read_bytes()
    except FileNotFoundError:
        return RecordLog()
    return parse_log(raw, run_id)


def parse_log(raw: bytes, run_id: str) -> RecordLog:
    """``read_log`` of the file's bytes ``raw``."""
    records: list[dict[str, Any]] = []
    invalid: list[InvalidLine] = []
    for number, chunk in enumerate(raw.split(b"\n"), start=1):
        if not chunk.strip():
            continue
        text = chunk.decode("utf-8", errors="replace")
        try:
            data = json.loads(chunk.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            invalid.append(InvalidLine(number, INVALID_OPERATOR_MESSAGE_RECORD, str(exc), text))
            continue
        check = validate_operator_message_record(data)
        if not check.ok:
            invalid.append(InvalidLine(number, str(check.code), check.message, text))
        elif data["source_run_id"] != run_id:
            invalid.append(
                InvalidLine(number, INVALID_OPERATOR_MESSAGE_CONTEXT, "record of another run", text)
            )
        else:
            records.append(data)
    return RecordLog(records=records, invalid=invalid)
