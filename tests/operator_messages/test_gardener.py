"""The gardener: its tend survey, the note it leaves, recently-concluded notes, and the ways
tend is started (management command, Celery task, beat entry)."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from garden.models import Agent, Conversation, Goal, Message, Run
from garden.services.conversations import message_append, text_block
from garden.services.runs import goal_create, run_finish, run_start
from groups.models import Approval, Group, GroupRequest
from operator_messages.gardener import conclude_durable_goal, tend
from operator_messages.inbox import list_notes, list_replies
from operator_messages.records import read_operator_message_records

pytestmark = pytest.mark.django_db


@pytest.fixture
def group(owner):
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    group = Group.objects.create(
        owner=owner, name="Household", coordinator=concierge, room_cap_chars=1_000
    )
    conversation = Conversation.objects.create(owner=owner, group=group)
    return group, conversation


def ago(**kw) -> timezone.datetime:
    return timezone.now() - timedelta(**kw)


def stuck_request(group, conversation, state="running", idle=timedelta(hours=2)):
    request = GroupRequest.objects.create(group=group, conversation=conversation, state=state)
    GroupRequest.objects.filter(pk=request.pk).update(updated_at=timezone.now() - idle)
    return request


def pending_approval(owner, conversation, waited=timedelta(hours=3), call_id="call-1"):
    agent = Agent.objects.get(owner=owner, handle="concierge")
    approval = Approval.objects.create(
        owner=owner,
        conversation=conversation,
        agent=agent,
        tool_call_id=call_id,
        action={"name": "bank.transfer", "arguments": {"amount": 120}},
    )
    Approval.objects.filter(pk=approval.pk).update(created_at=timezone.now() - waited)
    return approval


def test_tend_notes_a_stuck_request_and_a_long_pending_approval(runtime, owner, group):
    group, conversation = group
    request = stuck_request(group, conversation)
    approval = pending_approval(owner, conversation)

    result = tend()

    assert [r.request_id for r in result.survey.stuck_requests] == [request.pk]
    assert [a.approval_id for a in result.survey.pending_approvals] == [approval.pk]
    [note] = list_notes()
    assert str(note.path) == result.note_path
    assert f"Request {request.pk} in Household" in note.body
    assert f"Approval {approval.pk}: Concierge wants to run bank.transfer" in note.body
    assert list_replies() == []  # background notes stay off the reply surface
    assert result.finished_event["operator_note_written"] is True
    run = Run.objects.get(run_id=result.run_id)
    assert (run.status, run.actor, run.goal.kind, run.goal.status, run.goal.owner) == (
        "succeeded",
        "gardener",
        "tend",
        "concluded",
        None,
    )
    assert run.outcome["findings"]["stuck_requests"] == 1
    [record] = read_operator_message_records(result.run_id)
    assert (record["kind"], record["delivery_policy"]) == ("tend_survey", "out_of_band_note")


def test_fresh_requests_and_approvals_are_not_news(runtime, owner, group):
    group, conversation = group
    stuck_request(group, conversation, idle=timedelta(minutes=5))
    waiting = Group.objects.create(owner=owner, name="Waiting", coordinator=group.coordinator)
    # Awaiting approval waits on a person, not on a worker: the approval is the news.
    stuck_request(
        waiting, Conversation.objects.create(owner=owner, group=waiting), state="awaiting_approval"
    )
    pending_approval(owner, conversation, waited=timedelta(minutes=10))
    result = tend()
    assert result.survey.is_quiet
    assert result.note is None and result.note_path is None
    assert list_notes() == []
    assert result.finished_event["operator_note_written"] is False


def test_tend_notes_rollover_failed_requests_and_failed_runs(runtime, owner, group):
    group, conversation = group
    message_append(
        conversation_id=conversation.pk, speaker_kind="owner", content=[text_block("x" * 850)]
    )
    failed = GroupRequest.objects.create(
        group=group,
        conversation=conversation,
        state="failed",
        outcome_code="PROVIDER_UNAVAILABLE",
        finished_at=timezone.now(),
    )
    mission = goal_create(kind="mission")
    broken = run_start(goal=mission, actor="gardener")
    run_finish(run=broken, status="failed", outcome={"error": "RuntimeError: boom"})

    result = tend()

    assert [(g.group_id, g.used_chars) for g in result.survey.near_rollover] == [(group.pk, 850)]
    assert [r.request_id for r in result.survey.failed_requests] == [failed.pk]
    assert [r.run_id for r in result.survey.failed_runs] == [broken.run_id]
    body = list_notes()[0].body
    assert "Household (group" in body and "850 of 1,000 characters" in body
    assert "PROVIDER_UNAVAILABLE" in body and "RuntimeError: boom" in body


def test_failures_are_news_once(runtime, group):
    group, conversation = group
    GroupRequest.objects.create(
        group=group, conversation=conversation, state="failed", finished_at=ago(minutes=1)
    )
    assert len(tend().survey.failed_requests) == 1
    assert tend().survey.failed_requests == ()  # reported by the previous survey


def test_note_when_quiet_leaves_an_all_quiet_note(runtime):
    result = tend(note_when_quiet=True)
    assert result.note is not None and result.note.ok
    assert "Nothing needs your attention" in list_notes()[0].body


def test_a_tend_whose_note_cannot_be_written_fails_its_run_and_goal(runtime):
    (runtime / "inbox" / "testgarden").mkdir(parents=True)
    (runtime / "inbox" / "testgarden" / "notes").write_text("in the way")
    with pytest.raises(Exception, match="IO_ERROR"):
        tend(note_when_quiet=True)
    run = Run.objects.get(goal__kind="tend")
    assert run.status == "failed" and run.goal.status == "failed"


def test_conclude_durable_goal_tells_the_originating_conversation(
    runtime, owner, django_capture_on_commit_callbacks
):
    conversation = Conversation.objects.create(
        owner=owner, agent=Agent.objects.get(owner=owner, handle="concierge")
    )
    goal = goal_create(
        kind="durable",
        owner=owner,
        title="File the taxes",
        origin={"kind": "conversation", "conversation_id": conversation.pk},
    )
    # The reply copy is put in place once the turn commits.
    with django_capture_on_commit_callbacks(execute=True):
        result = conclude_durable_goal(goal, "The tax return is filed.")
    assert result.ok, result
    message = Message.objects.get(conversation=conversation)
    assert (message.speaker_kind, message.text) == ("garden", "The tax return is filed.")
    assert [r.body.strip() for r in list_replies()] == ["The tax return is filed."]
    goal.refresh_from_db()
    assert goal.status == "concluded"


def test_conclude_refuses_a_goal_that_is_not_durable(runtime, owner):
    goal = goal_create(kind="converse", owner=owner)
    result = conclude_durable_goal(goal, "Done.")
    assert (result.ok, result.code) == (False, "INVALID_OPERATOR_MESSAGE_CONTEXT")
    goal.refresh_from_db()
    assert goal.status == Goal.Status.OPEN
    assert Run.objects.get(goal=goal).status == "failed"
    assert list_notes() == [] and list_replies() == []


def test_manage_py_tend_prints_the_note_path(runtime, owner, group):
    group, conversation = group
    stuck_request(group, conversation)
    out = StringIO()
    call_command("tend", stdout=out)
    path = out.getvalue().strip()
    assert path == str(list_notes()[0].path)


def test_manage_py_tend_says_when_there_is_no_note(runtime):
    out = StringIO()
    call_command("tend", stdout=out)
    assert out.getvalue().startswith("no note")


def test_the_celery_task_runs_one_tend(runtime):
    from config.celery import app
    from operator_messages.tasks import tend as tend_task

    assert app.tasks["operator_messages.tend"].name == tend_task.name == "operator_messages.tend"
    tend_task()
    assert Run.objects.filter(goal__kind="tend", status="succeeded").count() == 1


def test_beat_runs_tend_every_fifteen_minutes():
    entry = PeriodicTask.objects.get(name="gardener: tend")
    assert entry.task == "operator_messages.tend" and entry.enabled
    assert (entry.interval.every, entry.interval.period) == (15, "minutes")
