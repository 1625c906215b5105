"""The room's API: post a message (a request), read the transcript, a request's state and
budget, Stop; and the approvals a person decides. validate → service → serialize."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden.api.errors import ApiError
from garden.models import Approval, Conversation, Message
from garden.services.conversations import message_payload
from groups import selectors
from groups.models import Group, GroupRequest
from groups.services.approvals import ApprovalError, approval_decide
from groups.services.requests import RequestError, request_create, request_stop_active


def request_payload(request: GroupRequest) -> dict:
    return {
        "id": request.pk,
        "group": request.group_id,
        "conversation": request.conversation_id,
        "source": request.source,
        "state": request.state,
        "fence": request.fence,
        "budget": {
            "working_reserved": request.working_reserved,
            "working_limit": 11,
            "synthesis_reserved": request.synthesis_reserved,
            "synthesis_limit": 1,
            "maintenance_reserved": request.maintenance_reserved,
            "maintenance_limit": 1,
        },
        "queue": request.queue,
        "waiting_for": request.waiting_for or None,
        "outcome_code": request.outcome_code,
        "outcome": request.outcome,
        "created_at": request.created_at.isoformat(),
        "started_at": request.started_at.isoformat() if request.started_at else None,
        "finished_at": request.finished_at.isoformat() if request.finished_at else None,
    }


def approval_payload(approval: Approval) -> dict:
    agent = approval.agent
    return {
        "id": approval.pk,
        "status": approval.status,
        "agent": {
            "id": agent.pk,
            "handle": agent.handle,
            "name": agent.name,
            "colour": agent.colour,
        },
        "action": approval.action,
        "tool_call_id": approval.tool_call_id,
        "request": approval.request_id,
        "group": approval.request.group_id if approval.request_id else None,
        "conversation": approval.conversation_id,
        "surface": approval.surface,
        "reason": approval.reason,
        "created_at": approval.created_at.isoformat(),
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
    }


def _group(request: Request, group_id: int) -> Group:
    group = selectors.group_get(owner=request.user, group_id=group_id)
    if group is None:
        raise ApiError("NOT_FOUND", "No such group.", status_code=status.HTTP_404_NOT_FOUND)
    return group


class RoomMessageInput(serializers.Serializer):
    text = serializers.CharField(max_length=20_000, trim_whitespace=True)


class GroupMessagesApi(APIView):
    # Posting a message starts model calls: its own, tighter rate.
    throttle_scopes = {"POST": "messages"}

    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="Only turns with a greater seq."),
            OpenApiParameter("conversation", int, description="A closed thread of the group."),
        ],
        responses={200: dict},
    )
    def get(self, request: Request, group_id: int) -> Response:
        group = _group(request, group_id)
        try:
            after = max(0, int(request.query_params.get("after", 0)))
            wanted = request.query_params.get("conversation")
            wanted = int(wanted) if wanted else None
        except ValueError as exc:
            raise ApiError(
                "invalid", "after and conversation must be integers.", field="after"
            ) from exc
        conversations = Conversation.objects.filter(group=group)
        conversation = (
            conversations.filter(pk=wanted).first()
            if wanted
            else conversations.filter(status="open").order_by("-id").first()
        )
        if wanted and conversation is None:
            raise ApiError("NOT_FOUND", "No such conversation in this group.", status_code=404)
        messages = []
        if conversation is not None:
            messages = [
                message_payload(m)
                for m in Message.objects.filter(conversation=conversation, seq__gt=after)
                .select_related("speaker_agent")
                .order_by("seq")[:500]
            ]
        active = GroupRequest.objects.filter(
            group=group, state__in=GroupRequest.ACTIVE_STATES
        ).first()
        queued = GroupRequest.objects.filter(group=group, state=GroupRequest.State.QUEUED).count()
        return Response(
            {
                "group": group.pk,
                "conversation": conversation.pk if conversation else None,
                "carried_summary": conversation.carried_summary if conversation else "",
                "last_seq": conversation.last_seq if conversation else 0,
                "messages": messages,
                "active_request": request_payload(active) if active else None,
                "queued_requests": queued,
            }
        )

    @extend_schema(request=RoomMessageInput, responses={202: dict})
    def post(self, request: Request, group_id: int) -> Response:
        group = _group(request, group_id)
        data = RoomMessageInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            created = request_create(group=group, text=data.validated_data["text"])
        except RequestError as exc:
            raise ApiError(exc.code, str(exc), field=exc.field, status_code=exc.status) from exc
        return Response(
            {"request": request_payload(created), "message": message_payload(created.message)},
            status=status.HTTP_202_ACCEPTED,
        )


class GroupRequestDetailApi(APIView):
    @extend_schema(responses={200: dict})
    def get(self, request: Request, group_id: int, request_id: int) -> Response:
        group = _group(request, group_id)
        found = GroupRequest.objects.filter(group=group, pk=request_id).first()
        if found is None:
            raise ApiError("NOT_FOUND", "No such request.", status_code=404)
        return Response(request_payload(found))


class GroupStopApi(APIView):
    @extend_schema(request=None, responses={200: dict})
    def post(self, request: Request, group_id: int) -> Response:
        group = _group(request, group_id)
        stopped = request_stop_active(group=group, reason="Stopped by the owner.")
        return Response({"stopped": request_payload(stopped) if stopped else None})


class ApprovalListApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("state", str, enum=["pending", "approved", "rejected"])],
        responses={200: dict},
    )
    def get(self, request: Request) -> Response:
        state = request.query_params.get("state")
        approvals = Approval.objects.filter(owner=request.user).select_related("agent", "request")
        if state:
            if state not in Approval.Status.values:
                raise ApiError(
                    "invalid_choice",
                    f"state must be one of {', '.join(Approval.Status.values)}.",
                    field="state",
                )
            approvals = approvals.filter(status=state)
        approvals = approvals.exclude(request__group__deleted_at__isnull=False).order_by("id")[:200]
        return Response({"approvals": [approval_payload(a) for a in approvals]})


class DecisionInput(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "reject"])
    surface = serializers.ChoiceField(
        choices=["dashboard", "telegram", "api", "admin"], default="dashboard"
    )


class ApprovalDecideApi(APIView):
    @extend_schema(request=DecisionInput, responses={200: dict, 409: dict})
    def post(self, request: Request, approval_id: int) -> Response:
        data = DecisionInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            decision = approval_decide(
                user=request.user,
                approval_id=approval_id,
                decision=data.validated_data["decision"],
                surface=data.validated_data["surface"],
            )
        except ApprovalError as exc:
            raise ApiError(exc.code, str(exc), field=exc.field, status_code=exc.status) from exc
        body = approval_payload(decision.approval)
        body["repeated"] = decision.repeated
        return Response(body)


class MemoryImportInput(serializers.Serializer):
    note = serializers.IntegerField(min_value=1)


def note_payload(note) -> dict:
    return {
        "id": note.pk,
        "kind": note.kind,
        "text": note.text,
        "scope": note.scope,
        "created_at": note.created_at.isoformat(),
    }


class GroupMemoryApi(APIView):
    @extend_schema(responses={200: dict})
    def get(self, request: Request, group_id: int) -> Response:
        from groups.services.memory import MEMORY_SENTENCE, group_memory

        group = _group(request, group_id)
        return Response(
            {
                "memory_sentence": MEMORY_SENTENCE,
                "notes": [note_payload(n) for n in group_memory(group=group)],
            }
        )


class GroupMemoryImportApi(APIView):
    @extend_schema(request=MemoryImportInput, responses={201: dict})
    def post(self, request: Request, group_id: int) -> Response:
        from groups.services.memory import memory_import_private_note

        group = _group(request, group_id)
        data = MemoryImportInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            note = memory_import_private_note(
                owner=request.user, group=group, note_id=data.validated_data["note"]
            )
        except RequestError as exc:
            raise ApiError(exc.code, str(exc), field=exc.field, status_code=exc.status) from exc
        return Response(note_payload(note), status=status.HTTP_201_CREATED)
