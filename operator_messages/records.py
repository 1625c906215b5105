"""The per-run record log, ``runs/<run-id>/operator-messages.jsonl``, read back whole: what a
crash left of the run's emissions is finished first (``operator_messages.pending``), then the
file is read (``operator_messages.record_file``)."""

from __future__ import annotations

from typing import Any

from .pending import recover
from .record_file import RecordLog, read_log


def read_operator_message_log(run_id: str) -> RecordLog:
    """Every line of the run's record file: the valid records in order, and the lines that are
    not (undecodable, not JSON, failing the record validator, or from another run).

    Records whose turns have committed but whose lines are not yet appended are appended
    first (their copies put in place), and the run's staged files are decided, so what is read
    names every committed turn and nothing else, and every file it names is in place."""
    recover(run_id=run_id)
    return read_log(run_id)


def read_operator_message_records(run_id: str) -> list[dict[str, Any]]:
    """The run's valid records, in the order they were emitted; invalid lines are skipped."""
    return read_operator_message_log(run_id).records
