"""The one payload of a group request and of an approval: what the API returns and what the
events carry, so the browser never reconciles two shapes. The serializers are the schema the
OpenAPI document shows."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from garden.heartbeat import workers_alive
from garden.models import Approval
from groups.models import MAINTENANCE_CALLS, SYNTHESIS_CALLS, WORKING_CALLS, GroupRequest


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


class RequestOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    group = serializers.IntegerField(source="group_id")
    conversation = serializers.IntegerField(source="conversation_id")
    source = serializers.CharField()
    state = serializers.CharField()
    fence = serializers.IntegerField()
    budget = BudgetOutput(source="*")
    queue = serializers.JSONField()
    waiting_for = serializers.SerializerMethodField(
        help_text="What the request waits for besides its turn: calls_in_flight (every "
        "model-call slot of its owner is in use), worker (no worker is running: it is "
        "answered when one starts), or null."
    )
    outcome_code = serializers.CharField()
    outcome = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_waiting_for(self, request: GroupRequest) -> str | None:
        return request.waiting_for or None


class AgentFaceOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    handle = serializers.CharField()
    name = serializers.CharField()
    colour = serializers.CharField()


class ApprovalOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    status = serializers.CharField()
    agent = AgentFaceOutput()
    action = serializers.JSONField(help_text="The tool call waiting: {name, arguments}.")
    tool_call_id = serializers.CharField()
    request = serializers.IntegerField(source="request_id", allow_null=True)
    group = serializers.SerializerMethodField()
    conversation = serializers.IntegerField(source="conversation_id")
    surface = serializers.CharField()
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)

    def get_group(self, approval: Approval) -> int | None:
        return approval.request.group_id if approval.request_id else None


# One instance of each, its fields bound once: serialising is read-only, so threads share them.
_REQUEST_OUTPUT = RequestOutput()
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


def approval_event(approval: Approval) -> dict[str, Any]:
    """An approval was created or decided: its whole payload, as the API returns it."""
    kind = "approval.created" if approval.status == Approval.Status.PENDING else "approval.decided"
    return {"type": kind, "approval": approval_payload(approval)}
