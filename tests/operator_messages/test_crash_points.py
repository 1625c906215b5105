"""A process killed at each point of an emission leaves no reply copy without its turn and no
note without its record, and loses nothing that committed: the next reader, or the tend,
puts the file in place and appends the record exactly once, or removes what never committed.

The emission runs in a child process that stops at the named point and waits; the test kills
it there with SIGKILL, as a power cut or an OOM kill would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import transaction

from garden.models import Conversation, Message
from garden.runtime import context_to_env
from operator_messages import emit_recently_concluded, emit_tend_survey
from operator_messages.gardener import tend
from operator_messages.inbox import InboxFile, list_notes, list_replies
from operator_messages.models import PendingRecord
from operator_messages.pending import sweep_staged
from operator_messages.record_file import read_file_records
from operator_messages.records import read_operator_message_records
from operator_messages.staging import StagedFile, abandoned
from tests.operator_messages.helpers import GARDEN, in_run, start
from tests.support.databases import database_url

pytestmark = pytest.mark.django_db(transaction=True)

CONTENT = "The savings plan is done."

# Emits one note (route "note": no origin) or one conversation-backed note (route "copy") with
# ``module:attribute`` replaced by a stop: the child says "stopped" and waits to be killed.
CHILD = """
import importlib, operator, sys
import django
django.setup()
point, route = sys.argv[1:3]
module, _, attribute = point.partition(":")
owner, _, name = attribute.rpartition(".")
target = importlib.import_module(module)
if owner:
    target = operator.attrgetter(owner)(target)
def stop(*args, **kwargs):
    print("stopped", flush=True)
    sys.stdin.read()  # until the test kills this process
setattr(target, name, stop)
from operator_messages import emit_recently_concluded, emit_tend_survey
emit = emit_tend_survey if route == "note" else emit_recently_concluded
sys.exit(f"not stopped: {emit(sys.argv[3])}")
"""


def child_env(ctx, runtime: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url(),
        "GARDEN_RUNTIME_ROOT": str(runtime),
        "GARDEN_NAME": settings.GARDEN_NAME,
    }
    if ctx is not None:
        env.update(context_to_env(ctx))
    return env


class Stopped:
    """A child emission stopped at its point, alive until ``kill``."""

    def __init__(self, point: str, route: str, ctx, runtime: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, point, route, CONTENT],
            env=child_env(ctx, runtime),
            cwd=settings.BASE_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline()
        if line != "stopped\n":
            _, err = self.process.communicate(timeout=60)
            pytest.fail(f"the child did not stop at {point}: {line!r} {err}")

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.communicate(timeout=60)
        assert self.process.returncode == -signal.SIGKILL


class Undo(Exception):
    """A caller's transaction rolled back."""


def origin_of(conversation) -> dict:
    return {"kind": "conversation", "conversation_id": conversation.pk}


def of_run(files: list[InboxFile], run_id: str) -> list[InboxFile]:
    return [f for f in files if f.meta.get("source_run_id") == run_id]


def temps(runtime: Path) -> list[str]:
    inbox = runtime / "inbox" / GARDEN
    return sorted(
        p.name
        for d in (inbox, inbox / "notes")
        if d.is_dir()
        for p in d.iterdir()
        if p.name[0] == "."
    )


def dead_transaction_ended(conversation) -> None:
    """Wait (on locks, not time) until the database has ended the killed child's transaction
    and released the rows it held, so a recovery that skips locked rows sees them."""
    with transaction.atomic():
        list(Conversation.objects.select_for_update().filter(pk=conversation.pk))
        list(PendingRecord.objects.select_for_update())


def recover_by(recoverer: str, run_id: str) -> None:
    if recoverer == "reader":
        read_operator_message_records(run_id)
    else:
        tend()


def assert_recovered(runtime, run_id: str, surface, committed: bool, turn=None) -> None:
    records = read_file_records(run_id)
    files = of_run(surface(), run_id)
    if committed:
        [record] = records
        [delivered] = files
        assert runtime / record["delivery_path"] == delivered.path
        assert delivered.body.strip() == CONTENT
        if turn is not None:
            assert record["conversation_message_id"] == turn.pk
    else:
        assert records == [] and files == []
    assert temps(runtime) == []
    assert not PendingRecord.objects.exists()


COPY_POINTS = [
    # The copy is staged, the turn written, the transaction not committed.
    pytest.param("operator_messages.emit:check_appendable", False, id="staged-before-commit"),
    # Committed; the copy not yet in place.
    pytest.param("operator_messages.emit:flush_pending", True, id="committed-not-in-place"),
    # The copy in place; its record not yet appended.
    pytest.param("operator_messages.pending:append_turn_record", True, id="in-place-not-recorded"),
    # Recorded; its pending row not yet deleted (the flush's transaction dies with it).
    pytest.param("operator_messages.models:PendingRecord.delete", True, id="recorded-row-kept"),
]


@pytest.mark.parametrize("recoverer", ["reader", "tend"])
@pytest.mark.parametrize(("point", "committed"), COPY_POINTS)
def test_a_reply_copy_killed_at_each_point(runtime, conversation, point, committed, recoverer):
    _, run, ctx = start("durable", origin=origin_of(conversation))
    child = Stopped(point, "copy", ctx, runtime)
    if not committed:
        # Its writer alive, recovery leaves the staged copy alone.
        sweep_staged(run_id=run.run_id)
        assert len(temps(runtime)) == 1
    child.kill()
    dead_transaction_ended(conversation)

    turns = list(Message.objects.filter(conversation=conversation, speaker_kind="garden"))
    assert len(turns) == (1 if committed else 0)
    # Never a reply copy without its committed turn.
    assert len(of_run(list_replies(), run.run_id)) <= len(turns)
    # Nor a record line without it.
    assert {r["conversation_message_id"] for r in read_file_records(run.run_id)} <= {
        turn.pk for turn in turns
    }

    recover_by(recoverer, run.run_id)
    assert_recovered(runtime, run.run_id, list_replies, committed, turns[0] if turns else None)
    recover_by(recoverer, run.run_id)  # a second recovery changes nothing
    assert_recovered(runtime, run.run_id, list_replies, committed, turns[0] if turns else None)


# A note's commit is its record line: it is put in place after the line, never before.
NOTE_POINTS = [
    # The note is staged; its record not appended.
    pytest.param("operator_messages.emit:append_record", False, id="staged-not-recorded"),
    # Recorded; the note not yet in place.
    pytest.param("operator_messages.staging:StagedFile.place", True, id="recorded-not-in-place"),
    # In place, after its record: nothing is left to recover.
    pytest.param("operator_messages.emit:EmitResult", True, id="in-place"),
]


@pytest.mark.parametrize("recoverer", ["reader", "tend"])
@pytest.mark.parametrize(("point", "committed"), NOTE_POINTS)
def test_a_note_killed_at_each_point(runtime, point, committed, recoverer):
    _, run, ctx = start("tend")
    child = Stopped(point, "note", ctx, runtime)
    staged = temps(runtime)
    sweep_staged(run_id=run.run_id)  # its writer alive, recovery leaves the staged note alone
    assert temps(runtime) == staged
    child.kill()

    # Never a note without its record.
    named = {r["delivery_path"] for r in read_file_records(run.run_id)}
    assert all(
        f"inbox/{GARDEN}/notes/{note.name}" in named for note in of_run(list_notes(), run.run_id)
    )
    assert len(named) == (1 if committed else 0)

    recover_by(recoverer, run.run_id)
    assert_recovered(runtime, run.run_id, list_notes, committed)
    recover_by(recoverer, run.run_id)
    assert_recovered(runtime, run.run_id, list_notes, committed)
    assert list_replies() == []


def test_a_callers_rollback_leaves_a_staged_copy_that_recovery_removes(runtime, conversation):
    with in_run("durable", origin=origin_of(conversation)) as (_, run, _):
        with pytest.raises(Undo), transaction.atomic():
            assert emit_recently_concluded(CONTENT).ok
            assert list_replies() == []  # the copy waits for the caller's commit
            raise Undo
    assert list_replies() == []
    assert read_operator_message_records(run.run_id) == []
    assert temps(runtime) == [] and list_replies() == []


def test_a_callers_commit_puts_the_copy_in_place(runtime, conversation):
    with in_run("durable", origin=origin_of(conversation)) as (_, run, _):
        with transaction.atomic():
            result = emit_recently_concluded(CONTENT)
            sweep_staged()  # the copy is staged and held: no recovery removes it
            assert len(temps(runtime)) == 1 and list_replies() == []
    assert [r.path for r in list_replies()] == [result.delivery_file]
    assert temps(runtime) == []
    assert read_file_records(run.run_id) == [result.record]


def test_a_staged_file_is_abandoned_only_once_its_writer_lets_go(tmp_path):
    staged = StagedFile.write(tmp_path / "note.md", "r" * 32, "text")
    with abandoned(staged.temp) as free:
        assert not free
    staged.release()
    with abandoned(staged.temp) as free:
        assert free
    staged.temp.unlink()
    with abandoned(staged.temp) as free:
        assert not free


def test_a_lost_copy_leaves_its_record_without_a_path(runtime, conversation, monkeypatch):
    import operator_messages.emit as emit

    monkeypatch.setattr(emit, "flush_pending", lambda **kw: 0)
    with in_run("durable", origin=origin_of(conversation)) as (_, run, _):
        result = emit_recently_concluded(CONTENT)
    [temp] = temps(runtime)
    (runtime / "inbox" / GARDEN / temp).unlink()  # removed by hand before recovery
    [record] = read_operator_message_records(run.run_id)
    assert "delivery_path" not in record
    assert record["conversation_message_id"] == result.record["conversation_message_id"]


# Two recoverers at once, one a reader (as in the web process), one the tend (as in a worker).
RECOVERER = """
import sys
import django
django.setup()
from operator_messages.gardener import tend
from operator_messages.records import read_operator_message_records
print("ready", flush=True)
if sys.stdin.readline() != "go\\n":
    sys.exit("no go")
if sys.argv[1] == "tend":
    tend()
else:
    read_operator_message_records(sys.argv[2])
"""


def test_two_recoverers_at_once_finish_each_emission_once(runtime, conversation, monkeypatch):
    import operator_messages.emit as emit
    import operator_messages.staging as staging

    # Interrupted emissions: copies committed but not in place nor recorded, notes recorded
    # but not in place, and copies whose caller's transaction rolled back.
    monkeypatch.setattr(emit, "flush_pending", lambda **kw: 0)
    monkeypatch.setattr(staging.StagedFile, "place", staging.StagedFile.release)
    with in_run("durable", origin=origin_of(conversation)) as (_, copies_run, _):
        for i in range(10):
            assert emit_recently_concluded(f"copy {i}").ok
        for i in range(5):
            with pytest.raises(Undo), transaction.atomic():
                assert emit_recently_concluded(f"undone {i}").ok
                raise Undo
    with in_run("tend") as (_, notes_run, _):
        for i in range(10):
            assert emit_tend_survey(f"note {i}").ok
    monkeypatch.undo()
    assert len(temps(runtime)) == 25 and PendingRecord.objects.count() == 10

    children = [
        subprocess.Popen(
            [sys.executable, "-c", RECOVERER, which, copies_run.run_id],
            env=child_env(None, runtime),
            cwd=settings.BASE_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for which in ("tend", "reader")
    ]
    for child in children:
        assert child.stdout.readline() == "ready\n", child.stderr.read()
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err

    copies = read_file_records(copies_run.run_id)
    assert len(copies) == 10
    assert len({r["conversation_message_id"] for r in copies}) == 10
    assert sorted(r.body.strip() for r in list_replies()) == sorted(f"copy {i}" for i in range(10))
    assert {str(runtime / r["delivery_path"]) for r in copies} == {
        str(r.path) for r in list_replies()
    }
    notes = read_file_records(notes_run.run_id)
    assert len(notes) == 10
    assert sorted(n.body.strip() for n in of_run(list_notes(), notes_run.run_id)) == sorted(
        f"note {i}" for i in range(10)
    )
    assert temps(runtime) == []
    assert not PendingRecord.objects.exists()
