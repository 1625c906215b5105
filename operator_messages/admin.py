"""Read-only admin for staff: runs that emitted operator messages, their records and notes."""

from __future__ import annotations

import json
import os
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from garden.models import Message
from garden.runtime import run_directory, runtime_root

from .models import OperatorMessageRun
from .paths import RECORDS_FILENAME, is_run_id
from .records import read_operator_message_log

# A note is shown whole up to this size; the file itself is never changed from here.
MAX_SHOWN_BYTES = 64 * 1024


def run_ids_with_records() -> list[str]:
    """Run ids whose directory holds a record file (records live in files, not rows)."""
    runs = runtime_root() / "runs"
    try:
        entries = list(os.scandir(runs))
    except OSError:
        return []
    return [
        entry.name
        for entry in entries
        if is_run_id(entry.name) and os.path.isfile(run_directory(entry.name) / RECORDS_FILENAME)
    ]


def _read_shown(relative: str) -> str:
    try:
        with open(runtime_root() / relative, "rb") as handle:
            data = handle.read(MAX_SHOWN_BYTES + 1)
    except OSError as exc:
        return f"[not readable: {exc.strerror or exc}]"
    text = data[:MAX_SHOWN_BYTES].decode("utf-8", errors="replace")
    return text + ("\n[… truncated]" if len(data) > MAX_SHOWN_BYTES else "")


def _join(parts: list[SafeString]) -> SafeString:
    # Every part was built by format_html, so joining them escapes nothing twice.
    return format_html_join("", "{}", ((part,) for part in parts))


@admin.register(OperatorMessageRun)
class OperatorMessageRunAdmin(admin.ModelAdmin):
    list_display = ["run_id", "goal_kind", "actor", "status", "started_at", "record_count"]
    list_filter = ["status", "goal__kind"]
    search_fields = ["run_id"]
    fields = [
        "run_id",
        "goal",
        "actor",
        "status",
        "started_at",
        "finished_at",
        "records",
        "invalid_lines",
    ]
    readonly_fields = fields
    actions = None

    def get_queryset(self, request: HttpRequest) -> QuerySet[OperatorMessageRun]:
        return (
            super()
            .get_queryset(request)
            .filter(run_id__in=run_ids_with_records())
            .select_related("goal")
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="goal kind", ordering="goal__kind")
    def goal_kind(self, obj: OperatorMessageRun) -> str:
        return obj.goal.kind

    @admin.display(description="records")
    def record_count(self, obj: OperatorMessageRun) -> int:
        return len(read_operator_message_log(obj.run_id).records)

    @admin.display(description="operator messages")
    def records(self, obj: OperatorMessageRun) -> SafeString:
        parts: list[SafeString] = []
        for record in read_operator_message_log(obj.run_id).records:
            parts.append(
                format_html(
                    "<h3>{} · {} · {}</h3><pre>{}</pre>",
                    record["kind"],
                    record["delivery_policy"],
                    record["emitted_at"],
                    json.dumps(record, indent=2),
                )
            )
            if "conversation_message_id" in record:
                message = Message.objects.filter(pk=record["conversation_message_id"]).first()
                parts.append(
                    format_html(
                        "<p>Conversation turn:</p><pre>{}</pre>",
                        message.text if message else "[the turn no longer exists]",
                    )
                )
            if "delivery_path" in record:
                parts.append(
                    format_html(
                        "<p>{}:</p><pre>{}</pre>",
                        record["delivery_path"],
                        _read_shown(record["delivery_path"]),
                    )
                )
        return _join(parts) if parts else format_html("<p>{}</p>", "No valid records.")

    @admin.display(description="invalid record lines")
    def invalid_lines(self, obj: OperatorMessageRun) -> SafeString:
        lines = read_operator_message_log(obj.run_id).invalid
        if not lines:
            return format_html("<p>{}</p>", "None.")
        return _join(
            [
                format_html(
                    "<p>line {}: {} {}</p><pre>{}</pre>",
                    line.line_number,
                    line.code,
                    line.message,
                    line.text[:2000],
                )
                for line in lines
            ]
        )
