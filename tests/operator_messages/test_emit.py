"""The emitters: one test per routing row and per emitter-side failure code, each checking
what was (or was not) written to the inbox, the run's records and the conversation."""

from __future__ import annotations

import json

import pytest

from garden.models import Conversation, Message
from garden.runtime import RunContext, context_to_env, run_context
from garden.services.conversations import conversation_close
from operator_messages import (
    emit_recently_concluded,
    emit_tend_survey,
    read_operator_message_records,
)
from operator_messages.inbox import list_notes, list_replies
from operator_messages.records import read_operator_message_log
from tests.operator_messages.helpers import GARDEN, in_run, snapshot, start

pytestmark = pytest.mark.django_db


def origin_of(conversation: Conversation) -> dict:
    return {"kind": "conversation", "conversation_id": conversation.pk}


# --- routing --------------------------------------------------------------------------------


def test_no_origin_writes_one_note_under_notes_and_one_record(runtime):
    with in_run("tend") as (goal, run, _):
        result = emit_tend_survey("Two requests look stuck.")
    assert result.ok, result
    record = result.record
    assert record["transcript_policy"] == "none"
    assert record["delivery_policy"] == "out_of_band_note"
    assert "origin" not in record and "conversation_message_id" not in record
    assert record["delivery_path"].startswith(f"inbox/{GARDEN}/notes/")
    assert (record["source_goal_id"], record["source_run_id"]) == (goal.pk, run.run_id)
    note = runtime / record["delivery_path"]
    assert note.is_file() and "Two requests look stuck." in note.read_text()
    assert [n.path for n in list_notes()] == [note]
    assert list_replies() == []  # a note never shows as an ordinary reply
    assert read_operator_message_records(run.run_id) == [record]
    assert Message.objects.count() == 0


def test_the_no_origin_path_touches_no_database_row(runtime, django_assert_num_queries):
    with in_run("tend"), django_assert_num_queries(0):
        assert emit_tend_survey("Quiet night.").ok


def test_the_reply_scan_skips_notes_dotfiles_and_directories(runtime):
    inbox = runtime / "inbox" / GARDEN
    (inbox / "notes").mkdir(parents=True)
    (inbox / "20260101T000000Z-startup.md").write_text("Good morning.\n")  # a raw reply
    (inbox / ".20260101T000001Z-x.md.abc.tmp").write_text("half written")
    (inbox / "notes" / "20260101T000002Z-tend_survey-1.md").write_text("a note")
    assert [(r.name, r.body, r.meta) for r in list_replies()] == [
        ("20260101T000000Z-startup.md", "Good morning.\n", {})
    ]
    assert [n.body for n in list_notes()] == ["a note"]


def test_conversation_origin_appends_a_garden_turn_and_a_reply_copy(
    runtime, conversation, django_capture_on_commit_callbacks
):
    with in_run("durable", origin=origin_of(conversation), owner=conversation.owner) as (_, run, _):
        # The reply copy is put in place once the turn commits.
        with django_capture_on_commit_callbacks(execute=True):
            result = emit_recently_concluded("The tax return is filed.")
    assert result.ok, result
    record = result.record
    message = Message.objects.get(conversation=conversation)
    assert (message.speaker_kind, message.kind, message.text) == (
        "garden",
        "turn",
        "The tax return is filed.",
    )
    assert record["transcript_policy"] == "canonical"
    assert record["delivery_policy"] == "reply_copy"
    assert record["origin"] == origin_of(conversation)
    assert record["conversation_message_id"] == message.pk
    copy = runtime / record["delivery_path"]
    assert copy.parent == runtime / "inbox" / GARDEN
    replies = list_replies()
    assert [r.path for r in replies] == [copy]
    assert replies[0].body.strip() == "The tax return is filed."
    assert replies[0].meta["conversation_id"] == str(conversation.pk)
    assert list_notes() == []
    assert read_operator_message_records(run.run_id) == [record]


def test_a_failed_reply_copy_leaves_the_turn_canonical_and_the_record_without_a_path(
    runtime, conversation
):
    # The reply surface is a regular file, so no copy can be written there.
    (runtime / "inbox").mkdir(parents=True)
    (runtime / "inbox" / GARDEN).write_text("not a directory")
    with in_run("mission", origin=origin_of(conversation)) as (_, run, _):
        result = emit_recently_concluded("Mission accomplished.")
    assert result.ok, result
    assert "delivery_path" not in result.record
    assert result.record["conversation_message_id"] == Message.objects.get().pk
    assert read_operator_message_records(run.run_id) == [result.record]


def test_mission_goals_count_as_durable(runtime):
    with in_run("mission"):
        assert emit_recently_concluded("Weekly report sent.").ok


def test_a_prior_partial_line_does_not_corrupt_the_next_record(runtime):
    with in_run("tend") as (_, run, _):
        records = runtime / "runs" / run.run_id / "operator-messages.jsonl"
        records.write_bytes(b'{"kind": "tend_sur')  # a crash mid-line, long ago
        result = emit_tend_survey("Still here.")
    log = read_operator_message_log(run.run_id)
    assert log.records == [result.record]
    assert [line.line_number for line in log.invalid] == [1]


def test_records_are_single_compact_json_lines(runtime):
    with in_run("tend") as (_, run, _):
        for i in range(3):
            assert emit_tend_survey(f"note {i}").ok
    lines = (runtime / "runs" / run.run_id / "operator-messages.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 4
    assert all(json.loads(line)["kind"] == "tend_survey" for line in lines[:-1])


# --- failure codes at the emitters; every one writes nothing --------------------------------


def assert_rejected_without_writes(runtime, emit, code, *args, **kwargs):
    before = snapshot(runtime)
    result = emit(*args, **kwargs)
    assert not result.ok and result.code == code, result
    assert result.record is None
    assert snapshot(runtime) == before
    return result


def test_missing_runtime_context(runtime):
    assert_rejected_without_writes(runtime, emit_tend_survey, "MISSING_RUNTIME_CONTEXT", "hi")


def test_not_authorized_for_anyone_but_the_gardener(runtime):
    with in_run("tend", actor="agent:4"):
        assert_rejected_without_writes(
            runtime, emit_tend_survey, "OPERATOR_MESSAGE_NOT_AUTHORIZED", "hi"
        )


def test_unknown_field(runtime):
    with in_run("tend"):
        result = assert_rejected_without_writes(
            runtime, emit_tend_survey, "UNKNOWN_OPERATOR_MESSAGE_FIELD", "hi", priority="high"
        )
    assert result.field == "priority"


def test_invalid_kind(runtime):
    with in_run("tend"):
        assert_rejected_without_writes(
            runtime, emit_tend_survey, "INVALID_OPERATOR_MESSAGE_KIND", "hi", kind="startup_status"
        )


def test_invalid_sender(runtime):
    with in_run("tend"):
        assert_rejected_without_writes(
            runtime, emit_tend_survey, "INVALID_OPERATOR_MESSAGE_SENDER", "hi", sender="concierge"
        )


@pytest.mark.parametrize(
    ("goal_kind", "emit"),
    [
        ("durable", emit_tend_survey),
        ("converse", emit_tend_survey),
        ("tend", emit_recently_concluded),
        ("converse", emit_recently_concluded),
    ],
)
def test_kind_must_match_the_current_goal(runtime, goal_kind, emit):
    with in_run(goal_kind):
        assert_rejected_without_writes(runtime, emit, "INVALID_OPERATOR_MESSAGE_CONTEXT", "hi")


def test_source_ids_must_be_the_current_ones(runtime):
    with in_run("tend") as (goal, run, _):
        assert_rejected_without_writes(
            runtime,
            emit_tend_survey,
            "INVALID_OPERATOR_MESSAGE_CONTEXT",
            "hi",
            source_goal_id=goal.pk + 1,
        )
        assert_rejected_without_writes(
            runtime,
            emit_tend_survey,
            "INVALID_OPERATOR_MESSAGE_CONTEXT",
            "hi",
            source_run_id="0" * 32,
        )
        # Naming the current ones is allowed.
        assert emit_tend_survey("hi", source_goal_id=goal.pk, source_run_id=run.run_id).ok


def test_a_closed_conversation_is_the_wrong_context(runtime, conversation):
    conversation_close(conversation=conversation)
    with in_run("durable", origin=origin_of(conversation)):
        assert_rejected_without_writes(
            runtime, emit_recently_concluded, "INVALID_OPERATOR_MESSAGE_CONTEXT", "done"
        )


def test_routing_is_not_the_callers_choice(runtime, conversation):
    with in_run("durable"):
        assert_rejected_without_writes(
            runtime,
            emit_recently_concluded,
            "INVALID_OPERATOR_MESSAGE_CONTEXT",
            "done",
            origin=origin_of(conversation),
        )


@pytest.mark.parametrize(
    "origin",
    [
        {"kind": "conversation", "conversation_id": "12"},
        {"kind": "conversation"},
        {"kind": "telegram", "chat": 5},
        ["conversation", 12],
        "conversation:12",
    ],
)
def test_malformed_goal_origin(runtime, origin):
    with in_run("durable", origin=origin):
        assert_rejected_without_writes(
            runtime, emit_recently_concluded, "INVALID_OPERATOR_MESSAGE_ORIGIN", "done"
        )


def test_malformed_origin_from_the_environment(runtime, monkeypatch):
    _, _, ctx = start("durable")
    for name, value in context_to_env(ctx).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GARDEN_GOAL_ORIGIN", "{conversation 12")
    assert_rejected_without_writes(
        runtime, emit_recently_concluded, "INVALID_OPERATOR_MESSAGE_ORIGIN", "done"
    )


def test_malformed_requested_origin(runtime):
    with in_run("durable"):
        assert_rejected_without_writes(
            runtime,
            emit_recently_concluded,
            "INVALID_OPERATOR_MESSAGE_ORIGIN",
            "done",
            origin={"kind": "conversation", "conversation_id": -1},
        )


def test_conversation_not_found(runtime):
    with in_run("durable", origin={"kind": "conversation", "conversation_id": 987654}):
        assert_rejected_without_writes(
            runtime, emit_recently_concluded, "CONVERSATION_NOT_FOUND", "done"
        )


@pytest.mark.parametrize("content", ["", "   ", "\n\t "])
def test_empty_content(runtime, content):
    with in_run("tend"):
        assert_rejected_without_writes(runtime, emit_tend_survey, "EMPTY_CONTENT", content)


# --- IO_ERROR: whatever failed, no record and no file outlives the failure ------------------


def test_io_error_when_the_notes_directory_cannot_be_made(runtime):
    with in_run("tend") as (_, run, _):
        (runtime / "inbox" / GARDEN).mkdir(parents=True)
        (runtime / "inbox" / GARDEN / "notes").write_text("in the way")
        assert_rejected_without_writes(runtime, emit_tend_survey, "IO_ERROR", "hi")
    assert read_operator_message_log(run.run_id).records == []


def test_io_error_when_the_runtime_root_is_under_a_regular_file(settings, tmp_path):
    (tmp_path / "a-file").write_text("")
    settings.GARDEN_RUNTIME_ROOT = tmp_path / "a-file" / "runtime"
    settings.GARDEN_NAME = GARDEN
    ctx = RunContext(goal_id=1, run_id="f" * 32, goal_kind="tend", actor="gardener", origin=None)
    with run_context(ctx):
        result = emit_tend_survey("hi")
    assert (result.ok, result.code) == (False, "IO_ERROR")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_io_error_when_the_record_cannot_be_appended_removes_the_note(runtime):
    with in_run("tend") as (_, run, _):
        (runtime / "runs" / run.run_id / "operator-messages.jsonl").mkdir()
        before = snapshot(runtime)
        result = emit_tend_survey("hi")
    assert (result.ok, result.code) == (False, "IO_ERROR")
    assert snapshot(runtime) == before
    assert list_notes() == []


def test_io_error_on_the_record_rolls_back_the_turn_and_removes_the_copy(runtime, conversation):
    with in_run("durable", origin=origin_of(conversation)) as (_, run, _):
        (runtime / "runs" / run.run_id / "operator-messages.jsonl").mkdir()
        before = snapshot(runtime)
        result = emit_recently_concluded("done")
    assert (result.ok, result.code) == (False, "IO_ERROR")
    assert snapshot(runtime) == before
    assert not Message.objects.exists()
    conversation.refresh_from_db()
    assert conversation.last_seq == 0
    assert list_replies() == []


def test_io_error_when_the_runs_directory_is_a_file(runtime):
    runtime.mkdir()
    (runtime / "runs").write_text("not a directory")
    ctx = RunContext(goal_id=1, run_id="e" * 32, goal_kind="tend", actor="gardener", origin=None)
    with run_context(ctx):
        before = snapshot(runtime)
        result = emit_tend_survey("hi")
    assert (result.ok, result.code) == (False, "IO_ERROR")
    assert snapshot(runtime) == before


def test_a_turn_in_a_one_to_one_conversation_reaches_its_agents_room_live(
    runtime, conversation, django_capture_on_commit_callbacks
):
    """The agent's room carries its 1:1 conversations' events, the gardener's turn too."""
    from groups.services.requests import solo_room_for
    from tests.groups.helpers import listen, next_events

    room = solo_room_for(agent_id=conversation.agent_id)
    layer, channel = listen(room.pk)
    with django_capture_on_commit_callbacks(execute=True):
        with in_run("durable", origin=origin_of(conversation), owner=conversation.owner):
            assert emit_recently_concluded("The tax return is filed.").ok
    [event] = next_events(layer, channel)
    assert event["type"] == "message.created"
    assert event["message"]["conversation"] == conversation.pk
