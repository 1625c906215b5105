"""Emissions completed after their commit, and the recovery that completes them after a crash.

An emission to a conversation stages its reply copy (staging.py), then writes its turn and a
PendingRecord in one transaction; after the commit ``flush_pending`` puts the copy in place,
appends the record line and deletes the row. A crash or a failed write in between leaves the
row, and the next flush finishes it. A flush that appended but crashed before deleting its row
would append again, so a record whose turn the run's file already names is not appended twice
(checked under the file's lock: two processes flushing at once append it once): the line is
the truth, the row only a reminder.

A note (no origin) has no row: its record line is its commit. ``recover`` also finishes or
removes what a dead writer staged: a note whose record line exists is put in place, a copy
whose row committed is left to the flush, and any other abandoned temp is removed.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError, transaction

from garden.runtime import runtime_root

from .models import PendingRecord
from .paths import inbox_directory, inbox_relative, notes_directory
from .record_file import append_turn_record, read_file_records
from .staging import abandoned, list_staged, put_in_place
from .storage import remove_quietly

log = logging.getLogger(__name__)


def recover(*, run_id: str | None = None) -> None:
    """Finish what a crash left of the emissions (of ``run_id``, or of every run): one pass,
    no waiting; rows and temps another process holds are left to it."""
    flush_pending(run_id=run_id)
    sweep_staged(run_id=run_id)


def flush_pending(*, run_id: str | None = None) -> int:
    """Put in place the copies and append the records (of ``run_id``, or of every run) whose
    turns committed; the number appended. Rows another process is flushing are left to it."""
    appended = 0
    try:
        with transaction.atomic():
            rows = PendingRecord.objects.select_for_update(skip_locked=True).order_by("id")
            if run_id is not None:
                rows = rows.filter(run_id=run_id)
            for row in rows:
                record = _with_copy_in_place(row.run_id, row.record)
                if append_turn_record(row.run_id, record):
                    appended += 1
                row.delete()
    except OSError:
        # The rows stay (their deletes rolled back with the transaction); copies put in place
        # stay in place, and lines appended before the failure are not appended again.
        log.warning("operator-message records could not be appended yet", exc_info=True)
    except DatabaseError:
        log.warning("pending operator-message records could not be read", exc_info=True)
    return appended


def _with_copy_in_place(run_id: str, record: dict[str, Any]) -> dict[str, Any]:
    """The record, once its copy is in place; without its delivery_path if the copy is gone
    (the copy is an attempt, the turn is canonical; a record names only a file that exists)."""
    if "delivery_path" not in record or put_in_place(
        runtime_root() / record["delivery_path"], run_id
    ):
        return record
    log.warning("reply copy %s was lost; its record goes without it", record["delivery_path"])
    return {key: value for key, value in record.items() if key != "delivery_path"}


def sweep_staged(*, run_id: str | None = None) -> None:
    """Decide every abandoned staged file (of ``run_id``, or of every run): put a note whose
    record is in its run's file in place; remove a temp whose emission never committed."""
    for directory, is_note in ((inbox_directory(), False), (notes_directory(), True)):
        for staged in list_staged(directory, run_id=run_id):
            relative = (
                inbox_relative("notes", staged.final.name)
                if is_note
                else inbox_relative(staged.final.name)
            )
            try:
                with abandoned(staged.temp) as free:
                    if not free:
                        continue
                    # Read once its writer is gone: what it committed cannot change any more.
                    if is_note:
                        named = {r.get("delivery_path") for r in read_file_records(staged.run_id)}
                        if relative in named:
                            put_in_place(staged.final, staged.run_id)
                            continue
                    elif PendingRecord.objects.filter(record__delivery_path=relative).exists():
                        continue  # committed: the flush puts it in place with its record
                    remove_quietly(staged.temp)
            except (OSError, DatabaseError):
                log.warning("staged operator message %s left for later", staged.temp, exc_info=True)
