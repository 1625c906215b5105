"""Approvals and Stop through a real worker: the whole request suspends, the exact action runs
once on approval, a rejection resumes without it, and Stop wins over a late approval."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from garden.errors import ServiceError
from garden.models import Agent, Artifact, Message
from groups.models import Approval, CallReservation, GroupRequest
from groups.services.approvals import approval_decide, sweep_stranded
from groups.services.requests import request_create, request_stop_active
from tests.conftest import wait_for
from tests.groups.conftest import ASK_LEDGER, WRITE
from tests.support.workers import queued_tasks, worker_quiescent


def ledger_asked(group_factory, owner, calls, *, tools, waiting, after="Done."):
    """Concierge asks Ledger, whose reply makes ``calls`` (and, once a result came, ``after``),
    with ``tools`` enabled and ``waiting`` among them waiting for approval."""
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Concluded."},
            {"reply": {"tool_calls": [ASK_LEDGER]}},
        ],
        members={
            "ledger": [
                {"after_tool_result": True, "reply": after},
                {"reply": {"tool_calls": calls}},
            ]
        },
    )
    Agent.objects.filter(owner=owner, handle="ledger").update(
        enabled_tools=tools, approval_tools=waiting
    )
    return group


def state_of(request):
    request.refresh_from_db()
    return request.state


def pending_approval(request):
    return wait_for(
        lambda: Approval.objects.filter(request=request, status="pending").first(), timeout=30
    )


def test_an_approval_suspends_the_whole_request_and_approve_runs_the_action_once(
    celery_worker_thread, writing_group, owner
):
    request = request_create(group=writing_group, text="Write down the savings plan.")
    approval = pending_approval(request)
    assert state_of(request) == "awaiting_approval"
    assert approval.agent.handle == "ledger" and approval.action == WRITE
    second = request_create(group=writing_group, text="And then summarise it.")
    snapshot = (
        Message.objects.filter(request=request).exclude(kind="activity").count(),
        CallReservation.objects.count(),
    )
    worker_quiescent()  # whatever the pause would let run has run by now
    assert (
        Message.objects.filter(request=request).exclude(kind="activity").count(),
        CallReservation.objects.count(),
    ) == snapshot
    assert state_of(second) == "queued" and Artifact.objects.count() == 0

    decision = approval_decide(user=owner, approval_id=approval.pk, decision="approve")
    assert not decision.repeated
    wait_for(lambda: state_of(request) == "completed", timeout=30)
    assert Artifact.objects.count() == 1
    assert Artifact.objects.get().title == "Savings plan"
    result = Message.objects.filter(
        request=request, content__0__type="tool_result", content__0__call_id=approval.tool_call_id
    ).get()
    assert (
        result.speaker_agent.handle == "ledger" and "Wrote artifact" in result.content[0]["content"]
    )
    wait_for(
        lambda: (
            state_of(second) in GroupRequest.FINISHED_STATES
            or state_of(second) == "awaiting_approval"
        ),
        timeout=30,
    )
    # A repeated identical decision returns the first outcome and runs nothing.
    again = approval_decide(
        user=owner, approval_id=approval.pk, decision="approve", surface="telegram"
    )
    assert again.repeated and again.approval.surface == "dashboard"
    with pytest.raises(ServiceError) as err:
        approval_decide(user=owner, approval_id=approval.pk, decision="reject")
    assert (err.value.code, err.value.status) == ("APPROVAL_ALREADY_DECIDED", 409)
    worker_quiescent()
    assert (
        Artifact.objects.filter(title="Savings plan", conversation=request.conversation).count()
        == 1
    )


def test_reject_resumes_without_the_action(celery_worker_thread, writing_group, owner):
    request = request_create(group=writing_group, text="Write down the savings plan.")
    approval = pending_approval(request)
    approval_decide(user=owner, approval_id=approval.pk, decision="reject", surface="telegram")
    wait_for(lambda: state_of(request) == "completed", timeout=30)
    assert Artifact.objects.count() == 0
    result = Message.objects.get(
        request=request, content__0__call_id=approval.tool_call_id, content__0__type="tool_result"
    )
    assert result.content[0]["is_error"] and "REJECTED" in result.content[0]["content"]
    approval.refresh_from_db()
    assert (approval.status, approval.surface) == ("rejected", "telegram")
    # The member was resumed inside the group request, never as an ordinary 1:1 turn.
    assert not Message.objects.filter(conversation__agent__isnull=False).exists()


def test_stop_then_approve_is_refused_and_nothing_runs(celery_worker_thread, writing_group, owner):
    request = request_create(group=writing_group, text="Write down the savings plan.")
    approval = pending_approval(request)
    stopped = request_stop_active(group=writing_group)
    assert stopped.pk == request.pk
    with pytest.raises(ServiceError) as err:
        approval_decide(user=owner, approval_id=approval.pk, decision="approve")
    assert err.value.status == 409
    worker_quiescent()
    assert state_of(request) == "stopped" and Artifact.objects.count() == 0
    approval.refresh_from_db()
    assert approval.status == "rejected" and approval.executed_at is None
    notice = Message.objects.filter(request=request, kind="notice").last()
    assert notice.text.startswith("Stopped")


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_duplicate_approvals_run_the_action_once(writing_group, owner):
    from groups.services.approvals import approval_execute
    from tests.support.driving import drive

    request = request_create(group=writing_group, text="Write down the savings plan.")
    drive(request, "awaiting_approval")
    approval = Approval.objects.get(request=request, status="pending")
    results, errors = [], []
    barrier = threading.Barrier(50)

    def decide_and_execute():
        try:
            barrier.wait()
            results.append(
                approval_decide(user=owner, approval_id=approval.pk, decision="approve").repeated
            )
            results.append(approval_execute(approval_id=approval.pk))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=decide_and_execute) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    assert [r for r in results if r is False] == [False]  # exactly one first decision
    assert results.count("executed") == 1
    assert Artifact.objects.count() == 1


def test_without_a_worker_an_approved_request_stays_suspended_until_one_runs(
    writing_group, owner, transactional_db
):
    from config.celery import app
    from tests.support.driving import drive
    from tests.support.workers import threads_worker

    app.control.purge()
    request = request_create(group=writing_group, text="Write down the savings plan.")
    drive(request, "awaiting_approval")
    approval = Approval.objects.get(request=request, status="pending")
    before = queued_tasks()
    approval_decide(user=owner, approval_id=approval.pk, decision="approve", surface="telegram")
    # The approved action's task is in the broker, and with no worker nothing has taken it.
    assert queued_tasks() == before + 1
    assert state_of(request) == "awaiting_approval" and Artifact.objects.count() == 0
    with threads_worker(2, purge=False):
        wait_for(lambda: state_of(request) == "completed", timeout=30)
    assert Artifact.objects.count() == 1


def test_an_approved_action_whose_task_was_lost_is_sent_again_and_runs_once(
    celery_worker_thread, writing_group, owner
):
    request = request_create(group=writing_group, text="Write down the savings plan.")
    approval = pending_approval(request)
    # Decided as a process that died before its task went out leaves it: approved, unclaimed.
    Approval.objects.filter(pk=approval.pk).update(
        status="approved", decided_by=owner, decided_at=timezone.now() - timedelta(minutes=10)
    )
    assert sweep_stranded(older_than_seconds=60)["approvals_resent"] == 1
    wait_for(lambda: state_of(request) == "completed", timeout=30)
    assert Artifact.objects.filter(title="Savings plan").count() == 1
    assert sweep_stranded(older_than_seconds=0)["approvals_resent"] == 0


def test_an_action_whose_worker_died_running_it_gets_an_unknown_outcome_and_never_runs_again(
    celery_worker_thread, writing_group, owner
):
    request = request_create(group=writing_group, text="Write down the savings plan.")
    approval = pending_approval(request)
    long_ago = timezone.now() - timedelta(minutes=10)
    # Claimed by a worker that died before it recorded the result (it may have run).
    Approval.objects.filter(pk=approval.pk).update(
        status="approved", decided_by=owner, decided_at=long_ago, executed_at=long_ago
    )
    swept = sweep_stranded(older_than_seconds=60)
    assert swept["approvals_unknown"] == 1 and swept["approvals_resent"] == 0
    wait_for(lambda: state_of(request) == "completed", timeout=30)
    assert Artifact.objects.count() == 0, "the action was not run again"
    results = [
        b
        for m in Message.objects.filter(request=request, speaker_agent=approval.agent)
        for b in m.content
        if b.get("type") == "tool_result" and b.get("call_id") == approval.tool_call_id
    ]
    assert len(results) == 1 and results[0]["is_error"]
    assert "outcome unknown" in results[0]["content"]
    # The room and the approval say it may not have run, not that it ran.
    lines = [
        m.content[0]["text"]
        for m in Message.objects.filter(request=request, kind="activity")
        if "was allowed to" in m.content[0].get("text", "")
    ]
    assert len(lines) == 1 and "whether it ran is unknown" in lines[0], lines
    assert "it ran." not in lines[0]
    approval.refresh_from_db()
    assert approval.reason.startswith("outcome unknown")
    assert sweep_stranded(older_than_seconds=0)["approvals_unknown"] == 0
    # The request waits again, on a newer approval: the old one's result is not recorded again.
    GroupRequest.objects.filter(pk=request.pk).update(state="awaiting_approval")
    Approval.objects.create(
        owner=owner,
        request=request,
        conversation_id=request.conversation_id,
        agent=approval.agent,
        action=WRITE,
        tool_call_id="call_next",
    )
    assert sweep_stranded(older_than_seconds=0)["approvals_unknown"] == 0


def test_a_decision_after_a_clear_finds_the_approval_decided(
    celery_worker_thread, writing_group, owner, api
):
    from groups.services.groups import group_clear

    request = request_create(group=writing_group, text="Write down the savings plan.")
    approval = pending_approval(request)
    group_clear(group=writing_group)
    assert not Message.objects.filter(conversation__group=writing_group).exists()

    # A late approval (from another surface, a stale page) finds the decision the clear made,
    # not a 404; the action never runs.
    late = api.post(f"/api/approvals/{approval.pk}/decide", {"decision": "approve"})
    assert late.status_code == 409, late.content
    body = late.json()
    assert body["code"] == "APPROVAL_ALREADY_DECIDED"
    assert body["message"].startswith("This action was already rejected")
    same = api.post(
        f"/api/approvals/{approval.pk}/decide", {"decision": "reject", "surface": "api"}
    )
    assert same.status_code == 200, same.content
    approval.refresh_from_db()
    assert approval.status == "rejected" and approval.executed_at is None
    assert Artifact.objects.count() == 0
    # Cleared history leaves the approvals list with the rest of it.
    listed = api.get("/api/approvals")
    assert listed.status_code == 200
    assert approval.pk not in {a["id"] for a in listed.json()["approvals"]}


def test_a_threads_approvals_are_listed_decided_ones_too(
    celery_worker_thread, writing_group, owner, api, stranger
):
    from rest_framework.test import APIClient

    request = request_create(group=writing_group, text="Write down the savings plan.")
    approval = pending_approval(request)
    thread = request.conversation_id
    approval_decide(user=owner, approval_id=approval.pk, decision="reject")
    listed = api.get(f"/api/approvals?conversation={thread}").json()["approvals"]
    assert [(a["id"], a["status"]) for a in listed] == [(approval.pk, "rejected")]
    assert listed[0]["label"] == "Ledger wants to write Savings plan"
    assert api.get("/api/approvals?state=pending").json()["approvals"] == []
    assert api.get("/api/approvals?conversation=abc").status_code == 400
    theirs = APIClient()
    theirs.force_login(stranger)
    assert theirs.get(f"/api/approvals?conversation={thread}").json()["approvals"] == []


# --- approve with changes -------------------------------------------------------------------


@pytest.mark.redis
def test_an_action_approved_with_changes_runs_once_with_the_changed_arguments(
    celery_worker_thread, api, owner
):
    from garden.models import Artifact, Message
    from groups.models import Approval
    from tests.conftest import wait_for
    from tests.groups.helpers import answer_of, one_to_one, writer

    request = one_to_one(owner, writer(owner), "Write the plan.")
    approval = wait_for(lambda: Approval.objects.filter(request=request).first(), timeout=30)
    url = f"/api/approvals/{approval.pk}/decide"
    changed = {"title": "Plan", "content": "Save 900."}

    bad = api.post(url, {"decision": "approve", "arguments": {"title": "Plan"}})
    assert bad.status_code == 400 and bad.json()["code"] == "INVALID_ARGUMENTS", bad.content
    assert "content" in bad.json()["message"]
    refused = api.post(url, {"decision": "reject", "arguments": changed})
    assert refused.json()["code"] == "ARGUMENTS_NOT_ALLOWED"
    approval.refresh_from_db()
    assert (approval.status, approval.approved_arguments) == ("pending", None)

    decided = api.post(url, {"decision": "approve", "arguments": changed})
    assert decided.status_code == 200, decided.content
    assert decided.json()["approved_arguments"] == changed
    wait_for(lambda: Artifact.objects.filter(title="Plan").exists(), timeout=30)
    wait_for(lambda: answer_of(request).text == "Written.", timeout=30)
    # The same decision again repeats; other changes after it are refused.
    assert api.post(url, {"decision": "approve", "arguments": changed}).json()["repeated"]
    other = api.post(url, {"decision": "approve", "arguments": {**changed, "content": "x"}})
    assert other.status_code == 409
    [made] = Artifact.objects.filter(title="Plan")
    assert made.content == "Save 900."
    approval.refresh_from_db()
    assert approval.action["arguments"] == {"title": "Plan", "content": "Save 800."}
    assert approval.approved_arguments == changed
    # What the agent reads back says the owner changed it, and the room says so too.
    result = next(
        b
        for m in Message.objects.filter(request=request, kind="turn")
        for b in m.content
        if b["type"] == "tool_result"
    )
    assert result["content"].startswith(
        '[The owner changed the arguments before approving, to {"title":"Plan",'
    )
    lines = [m.text for m in Message.objects.filter(request=request, kind="activity")]
    assert any("(approved with changes on dashboard); it ran." in line for line in lines), lines


@pytest.mark.django_db
def test_telegram_cannot_carry_changed_arguments_and_unchanged_ones_are_no_change(owner):
    from garden.errors import ServiceError
    from groups.models import Approval
    from groups.services.approvals import approval_decide
    from tests.groups.helpers import one_to_one, writer
    from tests.support.driving import drive

    request = one_to_one(owner, writer(owner), "Write the plan.")
    drive(request, "awaiting_approval")
    approval = Approval.objects.get(request=request)
    with pytest.raises(ServiceError) as refused:
        approval_decide(
            user=owner,
            approval_id=approval.pk,
            decision="approve",
            surface="telegram",
            arguments={"title": "x", "content": "y"},
        )
    assert refused.value.code == "ARGUMENTS_NOT_ALLOWED"
    same = approval.action["arguments"]
    decided = approval_decide(
        user=owner, approval_id=approval.pk, decision="approve", arguments=dict(same)
    )
    assert decided.approval.approved_arguments is None


# --- a paused turn ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_members_pause_ends_the_coordinators_turn_and_its_other_calls_do_not_run(
    group_factory, owner
):
    """Concierge asks Ledger and Advisor in one reply; Ledger's reply writes (waiting for
    approval) and remembers. The remember call is answered NOT_RUN at once; after the
    approval, Ledger finishes and the turn is Concierge's — Advisor's ask from the paused
    turn is answered NOT_RUN and Advisor never speaks."""
    from groups.services.approvals import approval_execute
    from tests.support.driving import drive

    write = {"name": "file.write", "arguments": {"title": "Plan", "content": "Save 800."}}
    remember = {"name": "memory.remember", "arguments": {"text": "Rent 1,400"}}
    asks = [
        {"name": "group.ask", "arguments": {"member": "ledger", "request": "Write the plan."}},
        {"name": "group.ask", "arguments": {"member": "advisor", "request": "Advise."}},
    ]
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Concluded."},
            {"when": "plan", "reply": {"tool_calls": asks}},
        ],
        members={
            "ledger": [
                {"after_tool_result": True, "reply": "Written."},
                {"reply": {"tool_calls": [write, remember]}},
            ],
            "advisor": [{"reply": "Advice."}],
        },
    )
    Agent.objects.filter(owner=owner, handle="ledger").update(
        enabled_tools=["file.write", "memory.remember"], approval_tools=["file.write"]
    )
    request = request_create(group=group, text="Make a plan.")
    drive(request, "awaiting_approval")
    results = {
        b["call_id"]: b
        for m in Message.objects.filter(request=request, kind="turn")
        for b in m.content
        if b["type"] == "tool_result"
    }
    not_run = [b for b in results.values() if b["content"].startswith("NOT_RUN")]
    assert len(not_run) == 2, results  # Ledger's remember, and Concierge's ask of Advisor
    approval = Approval.objects.get(request=request)
    approval_decide(user=owner, approval_id=approval.pk, decision="approve")
    assert approval_execute(approval_id=approval.pk) == "executed"
    drive(request)
    assert request.state == "completed"
    spoke = [
        m.speaker_agent.handle
        for m in Message.objects.filter(request=request, kind="turn", speaker_kind="agent")
        .select_related("speaker_agent")
        .order_by("seq")
        if any(b["type"] == "text" and b.get("text") for b in m.content)
    ]
    assert spoke == ["ledger", "concierge"], spoke
    assert not Message.objects.filter(request=request, speaker_agent__handle="advisor").exists()
    from garden.models import MemoryNote

    assert not MemoryNote.objects.exists()


def _spoke(request) -> list[str]:
    """The handles of the agents that said something in ``request``, in order."""
    return [
        m.speaker_agent.handle
        for m in Message.objects.filter(request=request, kind="turn", speaker_kind="agent")
        .select_related("speaker_agent")
        .order_by("seq")
        if any(b["type"] == "text" and b.get("text") for b in m.content)
    ]


def _result_of(request, name: str) -> dict:
    calls = {
        b["id"]: b["name"]
        for m in Message.objects.filter(request=request)
        for b in m.content
        if b["type"] == "tool_call"
    }
    (found,) = [
        b
        for m in Message.objects.filter(request=request)
        for b in m.content
        if b["type"] == "tool_result" and calls.get(b["call_id"]) == name
    ]
    return found


def test_help_asked_beside_a_call_that_waits_is_not_run_and_the_helper_never_speaks(
    celery_worker_thread, group_factory, owner
):
    """Ledger's one reply asks for Advisor's help and writes a file that waits for approval:
    the pause ends the turn, so the help is answered NOT_RUN at once (never "Scheduled…"),
    and after the approval Advisor is never run from the paused turn."""
    help_advisor = {
        "name": "group.request_help",
        "arguments": {"member": "advisor", "request": "Check my plan."},
    }
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Concluded."},
            {"reply": {"tool_calls": [ASK_LEDGER]}},
        ],
        members={
            "ledger": [
                {"after_tool_result": True, "reply": "Written."},
                {"reply": {"tool_calls": [help_advisor, WRITE]}},
            ],
            "advisor": [{"reply": "Plan checked."}],
        },
    )
    ledger = Agent.objects.get(owner=owner, handle="ledger")
    ledger.delegation_allowlist.add(Agent.objects.get(owner=owner, handle="advisor"))
    Agent.objects.filter(pk=ledger.pk).update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    request = request_create(group=group, text="Write down the savings plan.")
    approval = pending_approval(request)
    helped = _result_of(request, "group.request_help")
    assert helped["is_error"] and helped["content"].startswith("NOT_RUN"), helped
    assert not Message.objects.filter(request=request, kind="coordination", speaker_agent=ledger)
    approval_decide(user=owner, approval_id=approval.pk, decision="approve")
    wait_for(lambda: state_of(request) == "completed", timeout=30)
    worker_quiescent()
    assert Artifact.objects.filter(title="Savings plan").count() == 1
    assert _spoke(request) == ["ledger", "concierge"]
    assert not Message.objects.filter(request=request, speaker_agent__handle="advisor").exists()


def test_the_asks_beside_a_coordinators_own_call_that_waits_do_not_run_after_a_rejection(
    celery_worker_thread, group_factory, owner
):
    """Concierge's one reply asks Ledger and writes a file itself, which waits for approval:
    the ask is answered NOT_RUN with the pause, and after a rejection Ledger never speaks;
    the coordinator's turn is what comes next."""
    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Nothing was written."},
            {"reply": {"tool_calls": [ASK_LEDGER, WRITE]}},
        ],
        members={"ledger": [{"reply": "Saved the plan."}]},
    )
    Agent.objects.filter(pk=group.coordinator_id).update(
        enabled_tools=["file.write"], approval_tools=["file.write"]
    )
    request = request_create(group=group, text="Write down the savings plan.")
    approval = pending_approval(request)
    assert approval.agent_id == group.coordinator_id
    asked = _result_of(request, "group.ask")
    assert asked["is_error"] and asked["content"].startswith("NOT_RUN"), asked
    request.refresh_from_db()
    assert request.queue == []
    approval_decide(user=owner, approval_id=approval.pk, decision="reject")
    wait_for(lambda: state_of(request) == "completed", timeout=30)
    worker_quiescent()
    assert Artifact.objects.count() == 0
    assert not Message.objects.filter(request=request, speaker_agent__handle="ledger").exists()
    assert _spoke(request) == ["concierge"]


@pytest.mark.django_db
def test_a_document_written_before_stop_stays_written(group_factory, owner):
    """Stop ends the request; what completed before it (a document Ledger wrote without
    asking) stays in the library and in the thread, while the action that waited is
    rejected and never runs."""
    from garden.models import MemoryNote
    from tests.support.driving import drive

    figures = {"name": "file.write", "arguments": {"title": "Figures", "content": "Rent 1,400."}}
    remember = {"name": "memory.remember", "arguments": {"text": "Rent is 1,400."}}
    group = ledger_asked(
        group_factory,
        owner,
        [figures],
        tools=["file.write", "memory.remember"],
        waiting=["memory.remember"],
        after={"tool_calls": [remember]},
    )
    request = request_create(group=group, text="Write it all down.")
    drive(request, "awaiting_approval")
    written = Artifact.objects.get(title="Figures")
    request_stop_active(group=group)
    drive(request)
    assert request.state == "stopped"
    written.refresh_from_db()
    assert written.conversation_id == request.conversation_id and written.content == "Rent 1,400."
    result = _result_of(request, "file.write")
    assert not result["is_error"] and "Figures" in result["content"]
    assert Approval.objects.get(request=request).status == "rejected"
    assert not MemoryNote.objects.exists()


# --- what is offered for approval ---------------------------------------------------------

UNEVEN_CHART = {
    "name": "chart.create",
    "arguments": {
        "title": "Spending",
        "type": "bar",
        "labels": ["Jan", "Feb", "Mar"],
        "series": [{"name": "Rent", "values": [800, 800]}],
    },
}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("call", "code"),
    [
        (UNEVEN_CHART, "INVALID_CHART"),
        (
            {"name": "chart.create", "arguments": {"title": "Spending", "type": "radar"}},
            "INVALID_TOOL_ARGUMENTS",
        ),
    ],
)
def test_a_call_that_can_never_run_is_not_offered_and_goes_back_to_the_model_at_once(
    group_factory, owner, call, code
):
    """Scribe's chart call needs approval, but its arguments can never run: no one is asked;
    the refusal is the call's result at once, and Scribe answers it in the same request."""
    from tests.support.driving import drive

    group = group_factory(
        concierge_rules=[
            {"after_tool_result": True, "reply": "Concluded."},
            {
                "reply": {
                    "tool_calls": [
                        {**ASK_LEDGER, "arguments": {"member": "scribe", "request": "Chart it."}}
                    ]
                }
            },
        ],
        members={
            "scribe": [
                {"after_tool_error": True, "reply": "The chart failed."},
                {"reply": {"tool_calls": [call]}},
            ]
        },
    )
    Agent.objects.filter(owner=owner, handle="scribe").update(
        enabled_tools=["chart.create"], approval_tools=["chart.create"]
    )
    request = request_create(group=group, text="Chart the spending.")
    drive(request, limit=40)
    assert request.state == "completed", request.outcome
    assert not Approval.objects.exists()
    result = _result_of(request, "chart.create")
    assert result["is_error"] and result["content"].startswith(code), result
    assert not Artifact.objects.exists()
    said = Message.objects.filter(
        request=request, speaker_agent__handle="scribe", kind="turn", content__0__type="text"
    ).values_list("content", flat=True)
    assert any(c[0]["text"].startswith("The chart failed") for c in said), list(said)


@pytest.mark.django_db
def test_an_approved_action_that_could_not_run_is_never_said_to_have_run(writing_group, owner):
    from groups.services.approvals import approval_execute
    from tests.support.driving import drive

    request = request_create(group=writing_group, text="Write down the savings plan.")
    drive(request, "awaiting_approval")
    approval = Approval.objects.get(request=request, status="pending")
    # The tool is taken off Ledger while the approval waits.
    Agent.objects.filter(owner=owner, handle="ledger").update(enabled_tools=[])
    approval_decide(user=owner, approval_id=approval.pk, decision="approve")
    assert approval_execute(approval_id=approval.pk) == "executed"
    (line,) = [
        m.content[0]["text"]
        for m in Message.objects.filter(request=request, kind="activity")
        if "was allowed to" in m.content[0]["text"]
    ]
    assert "it ran." not in line and "could not run: NOT_RUN" in line, line
    assert Artifact.objects.count() == 0
    # Every surface reads it from the approval: Telegram's message says the same.
    approval.refresh_from_db()
    assert approval.reason.startswith("could not run: NOT_RUN")


@pytest.mark.django_db
def test_a_call_that_would_wait_but_cannot_run_yet_is_answered_at_once_and_never_runs_later(
    group_factory, owner, settings
):
    """A tool that needs approval and is not there when the reply is recorded (an owner's
    server not listing it for a moment) is refused in that write: it never waits for a tool
    slot, so it cannot run unapproved once the tool is back."""
    from garden.providers import ToolSpec
    from garden.tools import _REGISTRY, Tool, ToolOutcome, register
    from tests.support.driving import drive

    ran = []
    gated = {"name": "test.gated", "arguments": {}}
    group = ledger_asked(
        group_factory, owner, [gated], tools=["test.gated"], waiting=["test.gated"]
    )
    settings.GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER = 0  # a tool run would wait for a slot
    request = request_create(group=group, text="Go.")
    outcomes = drive(request, "awaiting_approval", "completed", until_waiting=True, limit=20)
    # The tool comes back, and so do the slots.
    register(
        Tool(
            spec=ToolSpec(name="test.gated", description="Gated.", parameters={"type": "object"}),
            handler=lambda ctx, args: ran.append(args) or ToolOutcome("ran"),
        )
    )
    try:
        settings.GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER = 2
        drive(request, limit=20)
    finally:
        _REGISTRY.pop("test.gated", None)
    assert "waiting_for_tools" not in outcomes, outcomes
    assert ran == [] and not Approval.objects.exists()
    result = _result_of(request, "test.gated")
    assert result["is_error"] and result["content"].startswith("TOOL_NOT_AVAILABLE"), result


@pytest.mark.django_db
def test_changed_arguments_that_cannot_run_are_said_by_their_refusal(group_factory, owner):
    """Approved with changes that pass the schema but not the chart's own check: the line and
    the approval name the refusal, never the note that the owner changed them."""
    from groups.services.approvals import approval_execute
    from tests.support.driving import drive

    chart = {
        "name": "chart.create",
        "arguments": {
            "title": "Spending",
            "type": "bar",
            "labels": ["Jan", "Feb"],
            "series": [{"name": "Rent", "values": [800, 800]}],
        },
    }
    group = ledger_asked(
        group_factory, owner, [chart], tools=["chart.create"], waiting=["chart.create"]
    )
    request = request_create(group=group, text="Chart it.")
    drive(request, "awaiting_approval")
    approval = Approval.objects.get(request=request)
    uneven = {**chart["arguments"], "series": [{"name": "Rent", "values": [800]}]}
    approval_decide(user=owner, approval_id=approval.pk, decision="approve", arguments=uneven)
    assert approval_execute(approval_id=approval.pk) == "executed"
    approval.refresh_from_db()
    assert approval.reason.startswith("could not run: INVALID_CHART"), approval.reason
    (line,) = [
        m.text
        for m in Message.objects.filter(request=request, kind="activity")
        if "was allowed to" in m.text
    ]
    assert "could not run: INVALID_CHART" in line and "changed the arguments" not in line, line
