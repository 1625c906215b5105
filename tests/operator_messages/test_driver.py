"""The tend-finished event: note fields derived from the run's valid tend_survey records."""

from __future__ import annotations

import json
import logging

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from garden.runtime import run_context
from operator_messages import emit_tend_survey
from operator_messages.driver import OPERATOR_CHANNEL, _emit_tend_finished, run_goal
from tests.operator_messages.helpers import GARDEN, start

pytestmark = pytest.mark.django_db


def records_file(runtime, run):
    return runtime / "runs" / run.run_id / "operator-messages.jsonl"


def test_a_run_with_a_note(runtime):
    _, run, ctx = start("tend")
    with run_context(ctx):
        note = emit_tend_survey("One approval has waited two hours.")
    event = _emit_tend_finished(run)
    assert event["operator_note_written"] is True
    assert event["operator_note_path"] == str(runtime / note.record["delivery_path"])
    assert event["invalid_record_lines"] == 0
    assert (event["type"], event["run_id"], event["goal_id"]) == (
        "tend.finished",
        run.run_id,
        run.goal_id,
    )


def test_a_run_without_a_note(runtime):
    _, run, _ = start("tend")
    # A stray file in the inbox is not this run's note: only records count.
    (runtime / "inbox" / GARDEN / "notes").mkdir(parents=True)
    (runtime / "inbox" / GARDEN / "notes" / "20260101T000000Z-tend_survey-0000.md").write_text(
        "someone else's"
    )
    event = _emit_tend_finished(run)
    assert (event["operator_note_written"], event["operator_note_path"]) == (False, None)


def test_invalid_lines_are_skipped_and_counted(runtime):
    _, run, ctx = start("tend")
    with run_context(ctx):
        note = emit_tend_survey("Group Household is near its rollover cap.")
    valid = records_file(runtime, run).read_text()
    forged = json.loads(valid)
    forged["delivery_path"] = "inbox/elsewhere/notes/forged.md"
    records_file(runtime, run).write_text(valid + "not json\n" + json.dumps(forged) + "\n")
    event = _emit_tend_finished(run)
    assert event["operator_note_path"] == str(runtime / note.record["delivery_path"])
    assert event["invalid_record_lines"] == 2


def test_only_invalid_lines_means_no_note(runtime):
    _, run, _ = start("tend")
    records_file(runtime, run).write_text('{"kind": "tend_survey"}\n')
    event = _emit_tend_finished(run)
    assert (event["operator_note_written"], event["operator_note_path"]) == (False, None)
    assert event["invalid_record_lines"] == 1


def test_a_record_of_another_run_is_not_this_runs_note(runtime):
    _, other, other_ctx = start("tend")
    _, run, _ = start("tend")
    with run_context(other_ctx):
        emit_tend_survey("the other run's note")
    records_file(runtime, run).write_bytes(records_file(runtime, other).read_bytes())
    event = _emit_tend_finished(run)
    assert (event["operator_note_written"], event["invalid_record_lines"]) == (False, 1)


def test_the_event_is_pushed_to_the_operator_channel_after_commit(
    runtime, django_capture_on_commit_callbacks
):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(OPERATOR_CHANNEL, channel)
    goal, _, _ = start("tend")

    def work(active):
        assert emit_tend_survey("All quiet.").ok

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        result = run_goal(goal, "gardener", work)
    assert len(callbacks) == 1
    pushed = async_to_sync(layer.receive)(channel)
    assert pushed["event"] == result.tend_finished
    assert pushed["event"]["operator_note_written"] is True
    assert pushed["event"]["status"] == "succeeded"


def test_a_failed_tend_run_still_reports_its_note(runtime, caplog):
    goal, _, _ = start("tend")

    def work(active):
        assert emit_tend_survey("Written before the failure.").ok
        raise RuntimeError("survey crashed")

    with (
        caplog.at_level(logging.INFO, logger="operator_messages.driver"),
        pytest.raises(RuntimeError),
    ):
        run_goal(goal, "gardener", work)
    [line] = [r.getMessage() for r in caplog.records if r.name == "operator_messages.driver"]
    event = json.loads(line.removeprefix("tend finished: "))
    assert (event["status"], event["operator_note_written"]) == ("failed", True)
