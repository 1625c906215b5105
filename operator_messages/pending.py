"""Records that follow their turn's commit: the PendingRecord rows appended to the run files.

An emission to a conversation writes its turn and a PendingRecord in one transaction; after
the commit ``flush_pending`` appends the record line and deletes the row. A crash or a failed
append in between leaves the row, and the next flush appends it. A flush that appended but
crashed before deleting its row would append again, so a record whose turn the run's file
already names is not appended twice: the line is the truth, the row only a reminder.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, transaction

from .models import PendingRecord
from .record_file import append_record, read_file_records

log = logging.getLogger(__name__)


def flush_pending(*, run_id: str | None = None) -> int:
    """Append the pending records (of ``run_id``, or of every run) whose turns committed; the
    number appended. Rows another process is flushing are left to it."""
    appended = 0
    try:
        with transaction.atomic():
            rows = PendingRecord.objects.select_for_update(skip_locked=True).order_by("id")
            if run_id is not None:
                rows = rows.filter(run_id=run_id)
            named: dict[str, set[int]] = {}
            for row in rows:
                if row.run_id not in named:
                    named[row.run_id] = {
                        r.get("conversation_message_id") for r in read_file_records(row.run_id)
                    }
                message_id = row.record.get("conversation_message_id")
                if message_id not in named[row.run_id]:
                    append_record(row.run_id, row.record)
                    named[row.run_id].add(message_id)
                    appended += 1
                row.delete()
    except OSError:
        # The rows stay (their deletes rolled back with the transaction); lines appended
        # before the failure are recognised next time and not appended again.
        log.warning("operator-message records could not be appended yet", exc_info=True)
    except DatabaseError:
        log.warning("pending operator-message records could not be read", exc_info=True)
    return appended
