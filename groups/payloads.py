"""The one payload of a group, a group request and an approval: what the API returns and what
the events carry, so the browser never reconciles two shapes; and the draft of a reply being
generated, which only an event carries. The serializers are the schema the OpenAPI document
shows; the ``*Event`` serializers describe each live event (``garden.event_schema``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from garden.heartbeat import workers_alive
from garden.models import Agent
from garden.payloads import AgentFaceOutput, agent_face_payload
from garden.providers import retry_may_help
from garden.tools import describe_action
from groups.models import (
    MAINTENANCE_CALLS,
    MEMORY_SENTENCE,
    SYNTHESIS_CALLS,
    WORKING_CALLS,
    Approval,
    Group,
    GroupRequest,
)


class BudgetOutput(serializers.Serializer):
    """The request's calls: reserved so far against each limit (11 working, 1 synthesis, and
    1 maintenance call for a rollover, never taken from the twelve)."""

    working_reserved = serializers.IntegerField()
    working_limit = serializers.SerializerMethodField()
    synthesis_reserved = serializers.IntegerField()
    synthesis_limit = serializers.SerializerMethodField()
    maintenance_reserved = serializers.IntegerField()
    maintenance_limit = serializers.SerializerMethodField()

    def get_working_limit(self, _request: GroupRequest) -> int:
        return WORKING_CALLS

    def get_synthesis_limit(self, _request: GroupRequest) -> int:
        return SYNTHESIS_CALLS

    def get_maintenance_limit(self, _request: GroupRequest) -> int:
        return MAINTENANCE_CALLS


class WorkingOutput(serializers.Serializer):
    """The member whose model call is out now, and since when (the page counts from it)."""

    agent = AgentFaceOutput(source="working_agent")
    since = serializers.DateTimeField(source="working_since")
    step = serializers.IntegerField(source="working_fence")


class UsageOutput(serializers.Serializer):
    """Tokens of the request's calls whose replies were recorded, as their providers counted
    them (a provider that reports none adds nothing), and what they cost."""

    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cost = serializers.DecimalField(
        max_digits=18,
        decimal_places=9,
        help_text="US dollars, a decimal string: the sum of the recorded calls' costs at the "
        "price table's prices (and the operator's overrides). Calls whose model has no price "
        "add nothing and are counted in unpriced_calls.",
    )
    unpriced_calls = serializers.IntegerField(
        help_text="Recorded calls whose model has no price: the cost leaves them out."
    )


class RequestOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    group = serializers.IntegerField(source="group_id")
    conversation = serializers.IntegerField(source="conversation_id")
    source = serializers.CharField()
    state = serializers.CharField()
    fence = serializers.IntegerField()
    budget = BudgetOutput(source="*")
    usage = UsageOutput(source="*")
    working = serializers.SerializerMethodField(
        help_text="The member whose model call is out now ({agent, since, step}), or null."
    )
    queue = serializers.JSONField()
    waiting_for = serializers.SerializerMethodField(
        help_text="What the request waits for besides its turn: calls_in_flight (every "
        "model-call slot of its owner is in use), tools_in_flight (its reply is recorded and "
        "its tools wait for one of the owner's tool slots), token_budget (this minute's token "
        "budget of its owner on the operator's credential is spent: the call goes out in the "
        "next minute), worker (no worker is running: it is answered when one starts), or null."
    )
    outcome_code = serializers.CharField()
    outcome = serializers.CharField()
    retry_may_help = serializers.SerializerMethodField(
        help_text="The request failed on a model call that may well succeed if the owner sends "
        "the message again (the model server was down, slow or busy); false otherwise."
    )
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_waiting_for(self, request: GroupRequest) -> str | None:
        return request.waiting_for or None

    def get_retry_may_help(self, request: GroupRequest) -> bool:
        return request.state == GroupRequest.State.FAILED and retry_may_help(request.outcome_code)

    @extend_schema_field(WorkingOutput(allow_null=True))
    def get_working(self, request: GroupRequest) -> dict[str, Any] | None:
        # Checked before the agent is read: a request with no call out costs no query.
        return _WORKING_OUTPUT.to_representation(request) if request.working_now else None


class ApprovalOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    status = serializers.CharField()
    agent = AgentFaceOutput()
    action = serializers.JSONField(
        help_text="The tool call as the agent asked for it: {name, arguments}."
    )
    approved_arguments = serializers.JSONField(
        allow_null=True,
        help_text="The arguments it was approved with when the person changed them (what "
        "runs), else null.",
    )
    tool_call_id = serializers.CharField()
    request = serializers.IntegerField(source="request_id", allow_null=True)
    group = serializers.SerializerMethodField()
    conversation = serializers.IntegerField(source="conversation_id", allow_null=True)
    label = serializers.SerializerMethodField(
        help_text='What it asks, in words: "Ledger wants to write plan.md".'
    )
    surface = serializers.CharField()
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)

    def get_group(self, approval: Approval) -> int | None:
        return approval.request.group_id if approval.request_id else None

    def get_label(self, approval: Approval) -> str:
        return approval_label(approval)


def approval_label(approval: Approval) -> str:
    action = approval.action or {}
    return f"{approval.agent.name} wants to {describe_action(action.get('name', '?'), action.get('arguments'))}"


# One instance of each, its fields bound once: serialising is read-only, so threads share them.
_REQUEST_OUTPUT = RequestOutput()
_WORKING_OUTPUT = WorkingOutput()
_APPROVAL_OUTPUT = ApprovalOutput()


# A request in these states waits for a worker to take it further.
_WORKED = frozenset(
    {GroupRequest.State.QUEUED, GroupRequest.State.RUNNING, GroupRequest.State.SYNTHESIZING}
)


def request_payload(request: GroupRequest, *, workers_alive: bool | None = None) -> dict[str, Any]:
    """The request's payload. Given ``workers_alive`` (the API's reads, once per read), a
    request that waits for a worker while none is alive says ``waiting_for: "worker"``."""
    payload = _REQUEST_OUTPUT.to_representation(request)
    if workers_alive is False and payload["waiting_for"] is None and request.state in _WORKED:
        payload["waiting_for"] = "worker"
    return payload


def approval_payload(approval: Approval) -> dict[str, Any]:
    return _APPROVAL_OUTPUT.to_representation(approval)


def request_event(request: GroupRequest) -> dict[str, Any]:
    """The request changed: its whole payload, as the API returns it. A queued request's
    event (sent by the web process that took the message) says whether a worker is alive to
    start it; a started request's events come from the worker working it."""
    return {
        "type": "request.state",
        "request": request_payload(
            request,
            workers_alive=workers_alive() if request.state == GroupRequest.State.QUEUED else None,
        ),
    }


def draft_event(
    *, request_id: int, step: int, agent: Agent, text: str, offset: int = 0
) -> dict[str, Any]:
    """What is new of the reply ``agent`` is generating in the step at fence ``step``: ``text``
    follows the first ``offset`` characters the drafts before it carried (an empty ``text`` at
    offset 0: the call failed). Never stored: the turn is written once, whole, when the step
    records it, and the page drops the draft then, or when the request ends or a later step
    starts."""
    return {
        "type": "request.draft",
        "request": request_id,
        "step": step,
        "agent": agent_face_payload(agent),
        "offset": offset,
        "text": text,
    }


def approval_event(approval: Approval) -> dict[str, Any]:
    """An approval was created or decided: its whole payload, as the API returns it."""
    kind = "approval.created" if approval.status == Approval.Status.PENDING else "approval.decided"
    return {"type": kind, "approval": approval_payload(approval)}


class GroupMemberOutput(AgentFaceOutput):
    """A member's face, whether it can run now, and whether it was removed."""

    can_run = serializers.BooleanField()
    removed = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_removed(self, agent: Agent) -> bool:
        return agent.removed_at is not None


class GroupOutput(serializers.Serializer):
    """A group as the API, its events and its room page show it; members in their order."""

    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    coordinator = AgentFaceOutput()
    members = serializers.SerializerMethodField()
    room_cap_chars = serializers.IntegerField()
    workspace = serializers.IntegerField(
        source="workspace_id",
        allow_null=True,
        help_text="The workspace whose people share the room; null: only its owner's.",
    )
    owner = serializers.CharField(
        source="owner.get_username", help_text="Whose agents and accounts it runs on."
    )
    memory_sentence = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    archived_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(GroupMemberOutput(many=True))
    def get_members(self, group: Group) -> list[dict[str, Any]]:
        return [_GROUP_MEMBER_OUTPUT.to_representation(m.agent) for m in _memberships(group)]

    @extend_schema_field(OpenApiTypes.STR)
    def get_memory_sentence(self, _group: Group) -> str:
        return MEMORY_SENTENCE


def _memberships(group: Group) -> list[Any]:
    """The group's memberships in order: prefetched by the selectors (``ordered_memberships``),
    else read here."""
    found = getattr(group, "ordered_memberships", None)
    if found is None:
        found = list(group.memberships.select_related("agent").order_by("position", "id"))
    return found


_GROUP_MEMBER_OUTPUT = GroupMemberOutput()
_GROUP_OUTPUT = GroupOutput()


def group_payload(group: Group) -> dict[str, Any]:
    """The one JSON shape of a group."""
    return _GROUP_OUTPUT.to_representation(group)


def group_event(group: Group, *, change: str) -> dict[str, Any]:
    """The group was created, changed, cleared, archived, restored (``group.updated``) or
    deleted (``group.deleted``); ``change`` says which. The group row is the one the service
    changed, its members read afresh."""
    group.ordered_memberships = list(
        group.memberships.select_related("agent").order_by("position", "id")
    )
    event_type = "group.deleted" if change == "deleted" else "group.updated"
    return {"type": event_type, "change": change, "group": group_payload(group)}


# --- the live events' payloads (registered from GroupsConfig.ready) ------------------------


class RequestStateEvent(serializers.Serializer):
    type = serializers.ChoiceField(choices=["request.state"])
    request = RequestOutput()


class RequestDraftEvent(serializers.Serializer):
    type = serializers.ChoiceField(choices=["request.draft"])
    request = serializers.IntegerField()
    step = serializers.IntegerField()
    agent = AgentFaceOutput()
    offset = serializers.IntegerField()
    text = serializers.CharField(allow_blank=True)


class ApprovalEvent(serializers.Serializer):
    type = serializers.ChoiceField(choices=["approval.created", "approval.decided"])
    approval = ApprovalOutput()


class GroupChangedEvent(serializers.Serializer):
    type = serializers.ChoiceField(choices=["group.updated", "group.deleted"])
    change = serializers.ChoiceField(
        choices=["created", "changed", "cleared", "archived", "restored", "deleted"]
    )
    group = GroupOutput()


class ConversationRolledEvent(serializers.Serializer):
    """The group's thread rolled over: ``old`` closed, ``conversation`` opened from a summary."""

    type = serializers.ChoiceField(choices=["conversation.rolled"])
    old = serializers.IntegerField()
    conversation = serializers.IntegerField()


def conversation_rolled_event(*, old: int, new: int) -> dict[str, Any]:
    return {"type": "conversation.rolled", "old": old, "conversation": new}


EVENT_TYPES = {
    "request.state": RequestStateEvent,
    "request.draft": RequestDraftEvent,
    "approval.created": ApprovalEvent,
    "approval.decided": ApprovalEvent,
    "group.updated": GroupChangedEvent,
    "group.deleted": GroupChangedEvent,
    "conversation.rolled": ConversationRolledEvent,
}


# The webhook event a request's ending announces (docs/webhooks.md), by its final state.
WEBHOOK_REQUEST_EVENTS = {
    GroupRequest.State.COMPLETED: "request.completed",
    GroupRequest.State.STOPPED: "request.stopped",
    GroupRequest.State.FAILED: "request.failed",
}


def request_webhook_event(request: GroupRequest, *, at: datetime) -> dict[str, Any]:
    """``request.completed`` / ``request.stopped`` / ``request.failed``: the Standard Webhooks
    body ({type, timestamp, data}) whose data carries the request's payload, as the API
    returns it (its outcome, never the thread's text), and its group and conversation."""
    return {
        "type": WEBHOOK_REQUEST_EVENTS[request.state],
        "timestamp": at.isoformat(),
        "data": {
            "group": request.group_id,
            "conversation": request.conversation_id,
            "request": request_payload(request),
        },
    }


def approval_webhook_event(approval: Approval, *, at: datetime) -> dict[str, Any]:
    """``approval.pending``: the approval's payload, as the API returns it, and its request's."""
    request = approval.request
    return {
        "type": "approval.pending",
        "timestamp": at.isoformat(),
        "data": {
            "group": request.group_id if request else None,
            "conversation": approval.conversation_id,
            "approval": approval_payload(approval),
            "request": request_payload(request) if request else None,
        },
    }
