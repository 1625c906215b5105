"""A conversation-backed record follows its turn's commit: a process killed between the two
leaves a committed turn whose record the next reader appends, exactly once; a process killed
before the commit leaves neither; a caller's rollback leaves no line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import transaction

from garden.models import Message
from garden.runtime import context_to_env
from operator_messages import emit_recently_concluded, read_operator_message_records
from operator_messages.models import PendingRecord
from operator_messages.record_file import read_file_records
from tests.operator_messages.helpers import in_run, start
from tests.support.databases import database_url

pytestmark = pytest.mark.django_db(transaction=True)

# Emits one recently_concluded note with ``point`` replaced by a SIGKILL of this process, as a
# power cut or an OOM kill would end it there.
CHILD = """
import os, signal, sys
import django
django.setup()
import operator_messages.emit as emit
point = sys.argv[1]
setattr(emit, point, lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL))
emit.emit_recently_concluded("The savings plan is done.")
sys.exit("not killed")
"""


def killed_at(point: str, ctx, runtime) -> None:
    env = {
        **os.environ,
        **context_to_env(ctx),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url(),
        "GARDEN_RUNTIME_ROOT": str(runtime),
        "GARDEN_NAME": settings.GARDEN_NAME,
    }
    child = subprocess.run(
        [sys.executable, "-c", CHILD, point],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr


def origin_of(conversation) -> dict:
    return {"kind": "conversation", "conversation_id": conversation.pk}


def test_killed_between_the_commit_and_the_append(runtime, conversation):
    _, run, ctx = start("durable", origin=origin_of(conversation))
    killed_at("flush_pending", ctx, runtime)

    # The turn committed; its record is not in the file yet, and nothing in the file names a
    # turn that does not exist.
    turn = Message.objects.get(conversation=conversation)
    assert turn.speaker_kind == "garden"
    assert read_file_records(run.run_id) == []
    assert PendingRecord.objects.filter(run_id=run.run_id).count() == 1

    records = read_operator_message_records(run.run_id)
    assert [r["conversation_message_id"] for r in records] == [turn.pk]
    assert not PendingRecord.objects.exists()
    assert read_operator_message_records(run.run_id) == records  # appended once


def test_killed_before_the_commit_leaves_neither(runtime, conversation):
    _, run, ctx = start("durable", origin=origin_of(conversation))
    killed_at("check_appendable", ctx, runtime)
    assert not Message.objects.filter(conversation=conversation).exists()
    assert not PendingRecord.objects.exists()
    assert read_operator_message_records(run.run_id) == []
    conversation.refresh_from_db()
    assert conversation.last_seq == 0


def test_a_flush_that_appended_but_did_not_finish_does_not_append_again(runtime, conversation):
    with in_run("durable", origin=origin_of(conversation)) as (_, run, _):
        result = emit_recently_concluded("done")
    assert result.ok
    # As if a flush appended this line and died before deleting its row.
    PendingRecord.objects.create(run_id=run.run_id, record=result.record)
    assert len(read_operator_message_records(run.run_id)) == 1
    assert not PendingRecord.objects.exists()


def test_a_callers_rollback_leaves_no_line_and_no_turn(runtime, conversation):
    class Undo(Exception):
        pass

    with in_run("durable", origin=origin_of(conversation)) as (_, run, _):
        with pytest.raises(Undo), transaction.atomic():
            assert emit_recently_concluded("done").ok
            # Inside the caller's transaction the line waits for its commit.
            assert read_file_records(run.run_id) == []
            raise Undo
    assert not Message.objects.filter(conversation=conversation).exists()
    assert read_operator_message_records(run.run_id) == []
    assert not PendingRecord.objects.exists()


def test_a_failed_append_after_the_commit_is_made_good_later(runtime, conversation, monkeypatch):
    import operator_messages.pending as pending

    def disk_full(run_id, record):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pending, "append_turn_record", disk_full)
    with in_run("durable", origin=origin_of(conversation)) as (_, run, _):
        result = emit_recently_concluded("done")
    assert result.ok  # the turn committed: it is canonical, and its record will follow
    turn = Message.objects.get(conversation=conversation)
    assert PendingRecord.objects.count() == 1
    assert read_file_records(run.run_id) == []
    assert result.delivery_file.is_file()  # the copy is in place; its record is pending
    monkeypatch.undo()
    records = read_operator_message_records(run.run_id)
    assert [r["conversation_message_id"] for r in records] == [turn.pk]
    assert records[0]["delivery_path"] == result.record["delivery_path"]


def test_the_tend_appends_what_is_pending(runtime, conversation):
    from operator_messages.gardener import tend

    with in_run("durable", origin=origin_of(conversation)) as (_, run, _):
        result = emit_recently_concluded("done")
    path = runtime / "runs" / run.run_id / "operator-messages.jsonl"
    path.unlink()
    PendingRecord.objects.create(run_id=run.run_id, record=result.record)
    tend()
    assert [r["conversation_message_id"] for r in read_file_records(run.run_id)] == [
        result.record["conversation_message_id"]
    ]
    assert not PendingRecord.objects.exists()
