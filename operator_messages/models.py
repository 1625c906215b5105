"""The one table of operator messages: records waiting to follow their turn's commit. The
messages themselves live in files; a proxy of Run gives the admin a home."""

from django.db import models

from garden.models import Run


class OperatorMessageRun(Run):
    """A run seen through its operator-message records, for the read-only admin."""

    class Meta:
        proxy = True
        verbose_name = "operator message run"
        verbose_name_plural = "operator message runs"


class PendingRecord(models.Model):
    """A conversation-backed record written in the same transaction as its garden turn; once
    that transaction has committed, its staged reply copy is put in place and the record
    appended to the run's record file (pending.py). So a record line or a reply copy never
    stands for a turn that does not exist, and a committed turn never loses either: a crash
    between the commit and the append leaves this row, which the next reader of the run's
    records, the next emission and the gardener's tend complete (exactly once)."""

    run_id = models.CharField(max_length=64, db_index=True)
    record = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return (
            f"record of run {self.run_id} for message {self.record.get('conversation_message_id')}"
        )
