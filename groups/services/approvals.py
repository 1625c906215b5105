"""Deciding a member's pending action: approve runs exactly that action once and resumes the
request; reject records the refusal as the tool result and resumes. Stop wins over both.

Every surface (the dashboard, Telegram, …) comes through ``approval_decide``; the member is
never run as an ordinary 1:1 turn. Lock order: group, then request, then approval.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import OuterRef, Q, Subquery
from django.utils import timezone

from garden import events, metrics, telemetry
from garden.errors import ServiceError, not_found
from garden.models import Message
from garden.providers import ToolResult
from garden.retry import retry_on_lock_conflict
from garden.services.conversations import message_append, text_block
from garden.slots import TOOLS, slot_backoff, slot_hold
from garden.tools import (
    ToolOutcome,
    check_arguments,
    describe_action,
    get_tool,
    run_tool,
)
from garden.tools.schema_limits import SchemaTooSlow
from garden.transcript import block_to_json
from groups import lock_order, scheduling
from groups.domain.rendering import compact_json
from groups.faults import fault_point
from groups.group_tools import tool_context
from groups.models import Approval, GroupRequest
from groups.payloads import approval_event, request_event
from groups.selectors import (
    approval_trace_context,
    approvals_decidable,
    request_trace_context,
)
from groups.services.request_sweep import request_sweep
from groups.signals import approvals_changed_on_commit

DECISIONS = {"approve": Approval.Status.APPROVED, "reject": Approval.Status.REJECTED}
SURFACES = ("dashboard", "telegram", "api", "admin")


@dataclass(frozen=True)
class Decision:
    approval: Approval
    repeated: bool  # True when this call found the same decision already made


@retry_on_lock_conflict
def approval_decide(
    *,
    user: AbstractBaseUser,
    approval_id: int,
    decision: str,
    surface: str = "dashboard",
    arguments: dict[str, Any] | None = None,
) -> Decision:
    """Decide once. A repeated identical decision returns the first outcome and runs nothing;
    a different one is refused (409). A request already finished — stopped, say — has had
    its approval rejected, so a late approve is refused too.

    ``arguments`` approves with changes: the action runs with them instead of the requested
    ones (exactly once), after they pass the tool's own schema (400 INVALID_ARGUMENTS,
    nothing written); the approval keeps both, and the agent's result says they changed.
    Only an approval carries them, and not from Telegram (its buttons cannot)."""
    if decision not in DECISIONS:
        raise ServiceError(
            "INVALID_DECISION", "decision must be 'approve' or 'reject'.", field="decision"
        )
    if surface not in SURFACES:
        raise ServiceError(
            "INVALID_SURFACE", f"surface must be one of {', '.join(SURFACES)}.", field="surface"
        )
    if arguments is not None and (decision != "approve" or surface == "telegram"):
        raise ServiceError(
            "ARGUMENTS_NOT_ALLOWED",
            "Changed arguments come with an approval made in the room or through the API.",
            field="arguments",
        )
    wanted = DECISIONS[decision]
    head = (
        approvals_decidable(person=user)
        .filter(pk=approval_id)
        .values("request__group_id", "request_id", "action", "status", "owner_id")
        .first()
    )
    if head is None:
        raise not_found("approval", field="approval")
    proposed = _proposed_arguments(head["action"], arguments)
    # A decided approval is answered at once: nothing validated, no row locked.
    if head["status"] != Approval.Status.PENDING:
        found = Approval.objects.get(pk=approval_id)
        return _decided_already(found, wanted, arguments, proposed)
    # Changed arguments are checked before any row is locked or transaction opened (a tool of
    # the owner's server is looked up there, and its schema applied within
    # GARDEN_TOOL_SCHEMA_SECONDS): a slow check holds no lock another decision waits on.
    changed = _changed_arguments(head["action"], proposed, head["owner_id"])
    with transaction.atomic():
        _, request = lock_order.lock_group_and_request(
            head["request__group_id"], head["request_id"]
        )
        approval = lock_order.lock_approval(approval_id)
        if approval.status != Approval.Status.PENDING:  # decided meanwhile
            return _decided_already(approval, wanted, arguments, proposed)
        if approval.conversation_id is None:  # detached by a clear, which decides them all
            raise ServiceError(
                "APPROVAL_ALREADY_DECIDED",
                "This action's history was cleared.",
                field="decision",
                status=409,
            )
        approval.status = wanted
        approval.decided_by = user
        approval.surface = surface
        approval.decided_at = timezone.now()
        approval.approved_arguments = changed
        approval.save(
            update_fields=["status", "decided_by", "surface", "decided_at", "approved_arguments"]
        )
        waited = (approval.decided_at - approval.created_at).total_seconds()
        transaction.on_commit(lambda: metrics.approval_decided(wanted, waited))
        channel = (
            events.group_channel(request.group_id)
            if request
            else events.conversation_channel(approval.conversation_id)
        )
        events.send_event_on_commit(channel=channel, event=approval_event(approval))
        approvals_changed_on_commit([approval.pk])
        if wanted == Approval.Status.REJECTED:
            _record_and_resume(
                approval,
                request,
                ToolOutcome(
                    f"REJECTED: {user.get_username()} rejected {approval.action.get('name')} on {surface}; "
                    "it did not run.",
                    is_error=True,
                    code="REJECTED",
                ),
            )
        else:
            scheduling.execute_approval_on_commit(approval.pk)
    # The decision, in the request's trace (the step or action it sends links back here).
    telemetry.mark(
        "garden.approval.decided",
        trace_context=lambda: request_trace_context(request_id=head["request_id"]),
        attributes={
            "garden.request.id": head["request_id"],
            "garden.approval.id": approval.pk,
            "garden.approval.decision": wanted,
            "garden.approval.surface": surface,
        },
    )
    return Decision(approval, repeated=False)


def _decided_already(
    approval: Approval, wanted: str, arguments: dict | None, proposed: dict | None
) -> Decision:
    """A decision on an approval already decided: the same one again returns the first
    outcome (repeated); any other is refused, 409 APPROVAL_ALREADY_DECIDED."""
    if approval.status == wanted and (arguments is None or proposed == approval.approved_arguments):
        return Decision(approval, repeated=True)
    raise ServiceError(
        "APPROVAL_ALREADY_DECIDED",
        f"This action was already {approval.status}"
        + (f" ({approval.reason})" if approval.reason else "")
        + ".",
        field="decision",
        status=409,
    )


def _proposed_arguments(action: dict | None, arguments: dict[str, Any] | None) -> dict | None:
    """``arguments`` when they differ from the requested ones; None when there are none or
    they are the same (it runs as requested). Compares only, validates nothing."""
    if arguments is None or arguments == ((action or {}).get("arguments") or {}):
        return None
    return arguments


def _changed_arguments(
    action: dict | None, proposed: dict[str, Any] | None, owner_id: int
) -> dict | None:
    """``proposed`` once it passes its tool's schema (400 INVALID_ARGUMENTS, or
    SCHEMA_TOO_SLOW when the schema takes longer than GARDEN_TOOL_SCHEMA_SECONDS to apply).
    Caller holds no lock and no transaction: the tool may be looked up on the owner's
    server."""
    if proposed is None:
        return None
    name = (action or {}).get("name", "")
    tool = get_tool(name, owner_id=owner_id)
    try:
        problem = (
            "this tool is not available any more"
            if tool is None
            else check_arguments(tool, proposed)
        )
    except SchemaTooSlow as slow:
        raise ServiceError(
            slow.code,
            f"The changed arguments of {name} could not be checked: {slow}.",
            field="arguments",
        ) from None
    if problem:
        raise ServiceError(
            "INVALID_ARGUMENTS",
            f"The changed arguments do not fit {name}: {problem}.",
            field="arguments",
        )
    return proposed


def approval_execute(*, approval_id: int, waits: int = 0) -> str:
    """Run an approved action exactly once (claimed by ``executed_at``), outside any
    transaction, then record its result and resume the request.

    The action never starts once its request has stopped: the claim checks the request is
    still awaiting this approval, under the request's row lock. It runs holding one of its
    owner's tool slots, as a step's tools do (GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER): with none
    free it is sent again later (``slot_backoff``), having claimed nothing, and holds no worker
    meanwhile; ``waits`` counts those looks.
    """
    head = (
        Approval.objects.filter(pk=approval_id)
        .values("owner_id", "status", "executed_at", "request__state")
        .first()
    )
    if head is None or head["status"] != Approval.Status.APPROVED or head["executed_at"]:
        return "already_executed"
    if head["request__state"] not in (None, GroupRequest.State.AWAITING_APPROVAL):
        return "request_not_waiting"
    slot = slot_hold(owner_id=head["owner_id"], kind=TOOLS)
    if slot is None:
        metrics.slot_wait("tools")
        pause = slot_backoff(waits)
        # The look's time is on the row, so the sweep does not start a second loop of looks.
        Approval.objects.filter(pk=approval_id, executed_at__isnull=True).update(
            next_try_at=timezone.now() + timedelta(seconds=pause)
        )
        scheduling.send(
            scheduling.EXECUTE_APPROVAL, approval_id=approval_id, waits=waits + 1, countdown=pause
        )
        return "waiting_for_tool_slot"
    with slot:
        with transaction.atomic():
            approval = Approval.objects.select_related("agent").get(pk=approval_id)
            _, request = lock_order.lock_group_and_request(
                approval.request.group_id if approval.request_id else None, approval.request_id
            )
            if request is not None and request.state != GroupRequest.State.AWAITING_APPROVAL:
                return "request_not_waiting"
            claimed = Approval.objects.filter(
                pk=approval_id, status=Approval.Status.APPROVED, executed_at__isnull=True
            ).update(executed_at=timezone.now())
            if not claimed:
                return "already_executed"
        # A crash from here until the result is recorded leaves the approval claimed and the
        # request waiting: the sweeper records the outcome as unknown (approval_sweep), and
        # the action never runs again.
        fault_point("approval_claimed")
        outcome = _run(approval)
    fault_point("approval_ran")
    with transaction.atomic():
        if request is not None:
            _, request = lock_order.lock_group_and_request(request.group_id, request.pk)
        _record_and_resume(approval, request, outcome)
        approvals_changed_on_commit([approval.pk])
    return "executed"


def _run(approval: Approval) -> ToolOutcome:
    request = approval.request
    if request is None:
        # Its history was cleared: decided and detached, never run (approval_execute).
        return ToolOutcome("NOT_RUN: the request is gone.", is_error=True, code="NOT_RUN")
    name = approval.action.get("name", "")
    if name not in (approval.agent.enabled_tools or []):
        # Taken off the agent (or its server removed) while the approval waited.
        return ToolOutcome(
            f"NOT_RUN: {name} is no longer among @{approval.agent.handle}'s tools.",
            is_error=True,
            code="NOT_RUN",
        )
    ctx = tool_context(request=request, group=request.group, agent_id=approval.agent_id)
    arguments = approval.arguments_to_run
    with telemetry.tool_call(name=name, call_id=approval.tool_call_id, arguments=arguments) as span:
        outcome = span.done(run_tool(ctx, name, arguments))
    if approval.approved_arguments is None:
        return outcome
    # The agent learns that what ran is not exactly what it asked for.
    changed = compact_json(approval.approved_arguments)
    return ToolOutcome(
        f"{CHANGED_NOTE} {changed}]\n{outcome.content}",
        is_error=outcome.is_error,
        code=outcome.code,
        artifacts=outcome.artifacts,
    )


def _record_and_resume(
    approval: Approval, request: GroupRequest | None, outcome: ToolOutcome
) -> None:
    """Record the action's result under the requesting agent and, if the request is still
    waiting on it, resume from where it stopped. Caller holds the group and request locks."""
    channel = events.group_channel(request.group_id) if request else None
    message_append(
        conversation_id=approval.conversation_id,
        speaker_kind=Message.SpeakerKind.AGENT,
        speaker_agent=approval.agent,
        request_id=approval.request_id,
        channel=channel,
        content=[
            block_to_json(
                ToolResult(
                    call_id=approval.tool_call_id,
                    content=outcome.content,
                    is_error=outcome.is_error,
                )
            )
        ],
    )
    if approval.status == Approval.Status.APPROVED:
        failed = _failure_words(outcome)
        if failed:
            # What every surface says of it (Telegram's message reads the reason); never over
            # a reason written meanwhile (the sweeper's "outcome unknown").
            Approval.objects.filter(pk=approval.pk, reason="").update(reason=failed[:200])
        message_append(
            conversation_id=approval.conversation_id,
            speaker_kind=Message.SpeakerKind.AGENT,
            speaker_agent=approval.agent,
            request_id=approval.request_id,
            channel=channel,
            kind=Message.Kind.ACTIVITY,
            content=[text_block(_ran_line(approval, outcome))],
        )
    if request is None or request.state != GroupRequest.State.AWAITING_APPROVAL:
        return
    if Approval.objects.filter(request=request, status=Approval.Status.PENDING).exists():
        return
    request.state = GroupRequest.State.RUNNING
    request.completed_fence = request.fence
    request.save(update_fields=["state", "completed_fence", "updated_at"])
    events.send_event_on_commit(channel=channel, event=request_event(request))
    scheduling.enqueue_step_on_commit(request.pk, request.fence, group_id=request.group_id)


def _ran_line(approval: Approval, outcome: ToolOutcome) -> str:
    """The activity line of an approved action: that it ran, or — the worker running it having
    stopped before its result was recorded — that nobody knows whether it did."""
    action = approval.action or {}
    what = describe_action(action.get("name", "?"), approval.arguments_to_run)
    approved = "approved with changes" if approval.approved_arguments is not None else "approved"
    where = f"{approved} on {approval.surface}" if approval.surface else approved
    if outcome.code == "UNKNOWN":
        return (
            f"{approval.agent.name} was allowed to {what} ({where}), but the worker running it "
            "stopped before its result was recorded: whether it ran is unknown, and it was "
            "not run again."
        )
    failed = _failure_words(outcome)
    if failed:
        return f"{approval.agent.name} was allowed to {what} ({where}), but it {failed}"
    return f"{approval.agent.name} was allowed to {what} ({where}); it ran."


def _failure_words(outcome: ToolOutcome) -> str:
    """How an approved action's error result is said — "could not run: …" when it never
    started, "failed: …" when it ran and failed — or "" for a result that is no error."""
    if not outcome.is_error or outcome.code == "UNKNOWN":
        return ""
    # The note that the owner changed the arguments says what was asked, not what happened.
    lines = [line for line in outcome.content.splitlines() if not line.startswith(CHANGED_NOTE)]
    why = lines[0][:300] if lines else outcome.code
    if outcome.code in NEVER_RAN_CODES or outcome.code.startswith("INVALID_"):
        return f"could not run: {why}"
    return f"failed: {why}"


# What an action approved with changed arguments tells its agent first, before the result.
CHANGED_NOTE = "[The owner changed the arguments before approving, to"

# An approved action's outcome codes that say it never started (any other error: it ran and
# failed).
NEVER_RAN_CODES = frozenset({"NOT_RUN", "TOOL_NOT_AVAILABLE"})


# On an approved approval, ``reason`` says its outcome is unknown (surfaces word it so).
OUTCOME_UNKNOWN_REASON = "outcome unknown: the worker running it stopped"

UNKNOWN_OUTCOME = (
    "[outcome unknown: the worker running this approved action stopped before its result was "
    "recorded; it was not run again]"
)


def approval_sweep(*, older_than_seconds: float) -> dict[str, int]:
    """Approvals a crash left between decision and result, put back on their way: an approved
    action never claimed (its task was lost, or the look of one waiting for a tool slot is
    ``older_than_seconds`` overdue) is sent again — the claim keeps it to one run;
    one claimed whose result never came (its worker died running it) gets an honest unknown
    outcome, and its request resumes. Only approvals decided or claimed ``older_than_seconds``
    ago, longer than a task can live."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    # A request waits on one approval at a time, its newest: an older one of a request that
    # waits again has had its result.
    newest = Subquery(
        Approval.objects.filter(request_id=OuterRef("request_id")).order_by("-pk").values("pk")[:1]
    )
    waiting = Approval.objects.filter(
        status=Approval.Status.APPROVED,
        request__state=GroupRequest.State.AWAITING_APPROVAL,
        pk=newest,
    )
    found = {"approvals_resent": 0, "approvals_unknown": 0}
    # One waiting for a tool slot is left to its own next look until that is overdue as long.
    unclaimed = waiting.filter(executed_at__isnull=True, decided_at__lte=cutoff).filter(
        Q(next_try_at__isnull=True) | Q(next_try_at__lte=cutoff)
    )
    for pk in unclaimed.values_list("pk", flat=True):
        telemetry.mark(
            "garden.sweep.recover",
            trace_context=lambda: approval_trace_context(approval_id=pk),  # noqa: B023
            attributes={"garden.approval.id": pk, "garden.sweep.action": "approval_resent"},
        )
        scheduling.send(scheduling.EXECUTE_APPROVAL, approval_id=pk)
        found["approvals_resent"] += 1
    for pk in waiting.filter(executed_at__lte=cutoff).values_list("pk", flat=True):
        with transaction.atomic():
            approval = Approval.objects.select_related("agent", "request").get(pk=pk)
            _, request = lock_order.lock_group_and_request(
                approval.request.group_id, approval.request_id
            )
            # Recording the result moves the request on in the same transaction: a request
            # still waiting, on this approval, has not had its result.
            if (
                request is None
                or request.state != GroupRequest.State.AWAITING_APPROVAL
                or not waiting.filter(pk=pk).exists()
            ):
                continue
            approval.reason = OUTCOME_UNKNOWN_REASON
            approval.save(update_fields=["reason"])
            _record_and_resume(
                approval, request, ToolOutcome(UNKNOWN_OUTCOME, is_error=True, code="UNKNOWN")
            )
            approvals_changed_on_commit([approval.pk])
            found["approvals_unknown"] += 1
    return found


def sweep_stranded(*, older_than_seconds: float | None = None) -> dict[str, int]:
    """What a crash may have stranded, put back on its way: requests (``request_sweep``) and
    approvals (``approval_sweep``), untouched for ``older_than_seconds`` (default
    GARDEN_SWEEP_AFTER_SECONDS)."""
    age = settings.GARDEN_SWEEP_AFTER_SECONDS if older_than_seconds is None else older_than_seconds
    return {
        **request_sweep(older_than_seconds=age),
        **approval_sweep(older_than_seconds=age),
    }
