"""Missions through a real Celery worker: a due run goes the owner's way — the group's request
queue, its twelve calls and its approvals, or the agent's 1:1 path — and ends with the
gardener's recently_concluded note where the mission's origin says."""

from __future__ import annotations

from django.utils import timezone

from garden.models import Agent, Artifact, Goal, Message, Run
from garden.services.conversations import conversation_create
from groups.models import Approval, CallReservation, GroupRequest
from groups.services.approvals import approval_decide
from groups.services.groups import group_delete
from groups.services.requests import request_create
from missions.models import MissionRun
from missions.tasks import run_mission
from tests.conftest import wait_for
from tests.groups.conftest import make_group
from tests.missions.conftest import make_mission, notes, reply_copies, scripted_agent
from tests.support.workers import worker_quiescent

ASK_LEDGER = {
    "name": "group.ask",
    "arguments": {"member": "ledger", "request": "Add one more figure."},
}
WRITE = {
    "name": "file.write",
    "arguments": {"title": "Savings plan", "content": "Save 800 a month."},
}
ASK_TO_WRITE = {
    "name": "group.ask",
    "arguments": {"member": "ledger", "request": "Write the plan down."},
}


def ended(mission, count: int = 1):
    """The mission's runs once ``count`` of them ended and their notes were attempted."""

    def check():
        runs = list(
            MissionRun.objects.filter(mission=mission)
            .exclude(state="active")
            .exclude(report_state="sending")
            .order_by("id")
        )
        return runs if len(runs) >= count else None

    return check


def run_of(mission, state: str = "active"):
    return lambda: MissionRun.objects.filter(mission=mission, state=state).first()


def writing_group(owner, *first_rules: dict):
    group = make_group(
        owner,
        concierge_rules=[
            *first_rules,
            {"after_tool_result": True, "reply": "The plan is written."},
            {"reply": {"tool_calls": [ASK_TO_WRITE]}},
        ],
        members={
            "ledger": [
                {"after_tool_result": True, "reply": "Saved the plan."},
                {"reply": {"text": "Writing it.", "tool_calls": [WRITE]}},
            ]
        },
    )
    Agent.objects.filter(owner=owner, handle="ledger").update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    return group


def test_a_group_mission_is_a_request_with_speakers_and_the_twelve_call_budget(
    celery_worker_thread, owner, runtime
):
    group = make_group(
        owner,
        concierge_rules=[
            {"when": "consolidated answer", "reply": "Final: here is everything we found."},
            {"reply": {"text": "More.", "tool_calls": [ASK_LEDGER]}},
        ],
        members={"ledger": [{"reply": "A figure."}]},
    )
    mission = make_mission(owner, group, prompt="Keep digging into the spending.")
    run_mission.delay(mission_id=mission.pk)  # what beat sends: the entry's kwargs

    [mission_run] = wait_for(ended(mission), timeout=90)
    assert (mission_run.state, mission_run.trigger) == ("concluded", "schedule")
    request = mission_run.group_request
    assert (request.source, request.state, request.outcome_code) == (
        "mission",
        "completed",
        "SYNTHESIZED",
    )
    # The same budget as an owner's request: eleven working calls and the synthesis call.
    assert (request.working_reserved, request.synthesis_reserved) == (11, 1)
    assert CallReservation.objects.filter(request=request).count() == 12
    turns = list(
        Message.objects.filter(request=request, kind="turn")
        .order_by("seq")
        .select_related("speaker_agent")
    )
    # Speakers are trusted metadata: the prompt is posted as the owner, then the members.
    assert (turns[0].speaker_kind, turns[0].text) == ("owner", "Keep digging into the spending.")
    assert turns[0].pk == mission_run.owner_message_id
    handles = {t.speaker_agent.handle for t in turns[1:]}
    assert handles == {"concierge", "ledger"}
    assert turns[-1].speaker_agent.handle == "concierge" and turns[-1].text.startswith("Final:")

    run = Run.objects.get(pk=mission_run.run_id)
    assert (run.status, run.actor) == ("succeeded", f"group:{group.pk}")
    goal = Goal.objects.get(pk=mission_run.goal_id)
    assert (goal.kind, goal.status, goal.origin) == ("mission", "concluded", None)
    # No origin: the gardener's note goes to notes/, not to the reply surface.
    assert mission_run.report_state == "sent"
    [note] = notes(runtime)
    assert "recently_concluded" in note
    assert "Mission “Weekly review” concluded." in note and "Final: here is everything" in note
    assert reply_copies(runtime) == []


def test_an_approval_in_a_mission_suspends_it_until_decided_and_a_due_run_meanwhile_is_skipped(
    celery_worker_thread, owner, runtime
):
    group = writing_group(owner)
    mission = make_mission(owner, group, prompt="Write down the savings plan.")
    run_mission.delay(mission_id=mission.pk)

    mission_run = wait_for(run_of(mission), timeout=30)
    approval = wait_for(
        lambda: Approval.objects.filter(
            request_id=mission_run.group_request_id, status="pending"
        ).first(),
        timeout=30,
    )
    request = GroupRequest.objects.get(pk=mission_run.group_request_id)
    assert request.state == "awaiting_approval"
    assert approval.agent.handle == "ledger" and approval.action == WRITE
    # A schedule is not permission: nothing ran, and nothing runs until a person decides.
    assert Artifact.objects.count() == 0
    snapshot = (
        Message.objects.filter(request=request).exclude(kind="activity").count(),
        CallReservation.objects.count(),
    )
    worker_quiescent()  # whatever the schedule would let run has run by now
    assert (
        Message.objects.filter(request=request).exclude(kind="activity").count(),
        CallReservation.objects.count(),
    ) == snapshot
    assert Artifact.objects.count() == 0

    # The next due run finds this one active: recorded as skipped, not lost, not queued.
    run_mission.delay(mission_id=mission.pk)
    skipped = wait_for(run_of(mission, "skipped"), timeout=30)
    assert skipped.outcome_code == "MISSION_ALREADY_ACTIVE"
    assert f"Run {mission_run.pk}" in skipped.skipped_reason
    assert GroupRequest.objects.filter(group=group).count() == 1
    assert MissionRun.objects.filter(mission=mission, state="active").count() == 1

    approval_decide(user=owner, approval_id=approval.pk, decision="approve")
    wait_for(
        lambda: MissionRun.objects.filter(pk=mission_run.pk, report_state="sent").exists(),
        timeout=30,
    )
    mission_run.refresh_from_db()
    assert mission_run.state == "concluded"
    assert Artifact.objects.filter(title="Savings plan").count() == 1
    [note] = notes(runtime)
    assert "The plan is written." in note


def test_an_agent_mission_posts_on_the_owners_behalf_and_its_note_lands_in_the_origin(
    celery_worker_thread, owner, runtime
):
    writer = scripted_agent(
        owner, "writer", [{"when": "spending", "reply": "You spent 412 this week."}]
    )
    concierge = Agent.objects.get(owner=owner, builtin="concierge")
    origin = conversation_create(owner=owner, agent=concierge, title="Asking for a weekly review")
    mission = make_mission(owner, writer, origin=origin)

    run_mission.delay(mission_id=mission.pk)
    [first] = wait_for(ended(mission), timeout=30)
    assert (first.state, first.outcome_code) == ("concluded", "CONCLUDED")
    mission.refresh_from_db()
    assert first.conversation_id == mission.conversation_id
    said = [
        (m.speaker_kind, m.text)
        for m in Message.objects.filter(conversation_id=mission.conversation_id).order_by("seq")
    ]
    assert said == [
        ("owner", "Review this week's spending."),
        ("agent", "You spent 412 this week."),
    ]
    assert Run.objects.get(pk=first.run_id).actor == f"agent:{writer.pk}"
    # The origin is the conversation: a garden turn there, a reply copy, no note in notes/.
    assert Goal.objects.get(pk=first.goal_id).origin == {
        "kind": "conversation",
        "conversation_id": origin.pk,
    }
    [told] = Message.objects.filter(conversation=origin)
    assert told.speaker_kind == "garden"
    assert told.text == "Mission “Weekly review” concluded.\n\nYou spent 412 this week."
    assert first.report["conversation_message_id"] == told.pk
    assert len(reply_copies(runtime)) == 1 and notes(runtime) == []

    # The next run reuses the mission's conversation.
    run_mission.delay(mission_id=mission.pk)
    runs = wait_for(ended(mission, 2), timeout=30)
    assert runs[1].state == "concluded" and runs[1].conversation_id == mission.conversation_id
    assert Message.objects.filter(conversation_id=mission.conversation_id).count() == 4
    assert Message.objects.filter(conversation=origin).count() == 2


def test_an_agent_mission_whose_reply_did_not_come_ends_honestly(
    celery_worker_thread, owner, runtime, settings
):
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 1
    writer = scripted_agent(owner, "writer", [{"error": "timeout"}])
    mission = make_mission(owner, writer)
    run_mission.delay(mission_id=mission.pk)
    [mission_run] = wait_for(ended(mission), timeout=30)
    assert (mission_run.state, mission_run.outcome_code) == ("failed", "PROVIDER_TIMEOUT")
    assert Run.objects.get(pk=mission_run.run_id).status == "failed"
    assert Goal.objects.get(pk=mission_run.goal_id).status == "failed"
    [note] = notes(runtime)
    assert "Mission “Weekly review” ended without a conclusion (PROVIDER_TIMEOUT)." in note


def test_deleting_the_group_stops_the_missions_request_disables_it_and_says_so(
    celery_worker_thread, owner, runtime
):
    group = writing_group(owner)
    mission = make_mission(owner, group, prompt="Write down the savings plan.")
    run_mission.delay(mission_id=mission.pk)
    mission_run = wait_for(run_of(mission), timeout=30)
    wait_for(
        lambda: Approval.objects.filter(
            request_id=mission_run.group_request_id, status="pending"
        ).exists(),
        timeout=30,
    )

    group_delete(group=group)
    mission.refresh_from_db()
    assert (mission.enabled, mission.disabled_reason) == (False, "The target group was deleted.")
    assert mission.periodic_task.enabled is False
    [mission_run] = wait_for(ended(mission), timeout=30)
    assert (mission_run.state, mission_run.outcome_code) == ("failed", "STOPPED")
    assert Approval.objects.get(request_id=mission_run.group_request_id).status == "rejected"
    assert Artifact.objects.count() == 0
    [note] = notes(runtime)
    assert "ended without a conclusion (STOPPED)" in note and "The group was deleted." in note

    # Its next due run is recorded as skipped, with the reason.
    run_mission.delay(mission_id=mission.pk)
    skipped = wait_for(run_of(mission, "skipped"), timeout=30)
    assert skipped.outcome_code == "MISSION_DISABLED"
    assert skipped.skipped_reason == "The mission is disabled: The target group was deleted."


def test_a_group_mission_queues_behind_the_groups_active_request(
    celery_worker_thread, owner, runtime
):
    group = writing_group(owner, {"when": "Summarise the week", "reply": "Summary: a quiet week."})
    owners = request_create(group=group, text="Write down the savings plan.")
    wait_for(
        lambda: GroupRequest.objects.filter(pk=owners.pk, state="awaiting_approval").exists(),
        timeout=30,
    )
    mission = make_mission(owner, group, prompt="Summarise the week.")
    run_mission.delay(mission_id=mission.pk)
    mission_run = wait_for(run_of(mission), timeout=30)
    worker_quiescent()
    assert GroupRequest.objects.get(pk=mission_run.group_request_id).state == "queued"

    approval = Approval.objects.get(request=owners, status="pending")
    approval_decide(user=owner, approval_id=approval.pk, decision="reject")
    [mission_run] = wait_for(ended(mission), timeout=60)
    owners.refresh_from_db()
    request = GroupRequest.objects.get(pk=mission_run.group_request_id)
    assert owners.finished_at <= request.started_at
    assert (mission_run.state, mission_run.outcome) == ("concluded", "Summary: a quiet week.")
    assert mission.runs.count() == 1 and request.finished_at <= timezone.now()
