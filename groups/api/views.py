"""The groups API: owner-only, CSRF on every write. validate → service → serialize.

Another owner's group, like a deleted one, is a 404 on every route.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden.api.errors import FORBIDDEN, INVALID, ErrorOutput, not_found_response
from groups import selectors
from groups.api.requests import reachable_group
from groups.api.serializers import (
    GroupChangeInput,
    GroupClearedOutput,
    GroupCreateInput,
    GroupDeletedOutput,
)
from groups.payloads import GroupOutput, group_payload
from groups.services.groups import (
    group_archive,
    group_clear,
    group_create,
    group_create_starter,
    group_delete,
    group_restore,
    group_update,
    purge_due_groups_on_read,
)

TAGS = ["groups"]
_NOT_FOUND = not_found_response("group")


def _group_response(request: Request, group_id: int, status_code: int = 200) -> Response:
    return Response(group_payload(reachable_group(request, group_id)), status=status_code)


class GroupListCreateApi(APIView):
    @extend_schema(
        tags=TAGS,
        responses={200: GroupOutput(many=True), 403: FORBIDDEN},
        description="The roster: groups neither deleted nor archived. A read that finds "
        "a group deleted more than a minute ago removes it for good.",
    )
    def get(self, request: Request) -> Response:
        purge_due_groups_on_read(owner=request.user)
        return Response([group_payload(g) for g in selectors.group_list(person=request.user)])

    @extend_schema(
        tags=TAGS,
        request=GroupCreateInput,
        responses={201: GroupOutput, 400: INVALID, 403: FORBIDDEN},
    )
    def post(self, request: Request) -> Response:
        data = GroupCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        group = group_create(owner=request.user, **data.validated_data)
        return _group_response(request, group.pk, status.HTTP_201_CREATED)


class GroupStarterApi(APIView):
    @extend_schema(
        tags=TAGS,
        request=None,
        responses={201: GroupOutput, 403: FORBIDDEN, 409: INVALID, 429: INVALID},
        description='A first run\'s team in one step: "Household finances", Concierge '
        "coordinating Ledger and Finance Advisor on offline scripted models. Only for an "
        "owner with no group yet (409 ROSTER_NOT_EMPTY).",
    )
    def post(self, request: Request) -> Response:
        group = group_create_starter(owner=request.user)
        return _group_response(request, group.pk, status.HTTP_201_CREATED)


class GroupDetailApi(APIView):
    @extend_schema(
        tags=TAGS,
        responses={200: GroupOutput, 403: FORBIDDEN, 404: _NOT_FOUND},
        description="One group; an archived group still reads, a deleted one does not.",
    )
    def get(self, request: Request, group_id: int) -> Response:
        return _group_response(request, group_id)

    @extend_schema(
        tags=TAGS,
        request=GroupChangeInput,
        responses={200: GroupOutput, 400: INVALID, 403: FORBIDDEN, 404: _NOT_FOUND},
        description="Change the name, the coordinator, the membership (the whole list, in "
        "order) and/or the room cap under the creation rules; only what the change brings "
        "in is checked.",
    )
    def patch(self, request: Request, group_id: int) -> Response:
        group = reachable_group(request, group_id)
        data = GroupChangeInput(data=request.data)
        data.is_valid(raise_exception=True)
        group_update(group=group, **data.validated_data)
        return _group_response(request, group_id)

    @extend_schema(
        tags=TAGS,
        request=None,
        responses={200: GroupDeletedOutput, 403: FORBIDDEN, 404: _NOT_FOUND},
        description="Stop the group's work and delete it, with a minute to undo.",
    )
    def delete(self, request: Request, group_id: int) -> Response:
        group = reachable_group(request, group_id)
        undo_until = group_delete(group=group)
        return Response(GroupDeletedOutput({"undoUntil": undo_until}).data)


class GroupRestoreApi(APIView):
    # What cannot be taken back: not with a token that lacks the manage scope.
    token_scopes = {"POST": "manage"}

    @extend_schema(
        tags=TAGS,
        request=None,
        responses={
            200: GroupOutput,
            403: FORBIDDEN,
            404: _NOT_FOUND,
            410: OpenApiResponse(ErrorOutput, description="UNDO_EXPIRED: the minute has passed."),
        },
        description="Bring a deleted group back as it was, until its undoUntil.",
    )
    def post(self, request: Request, group_id: int) -> Response:
        group = group_restore(owner=request.user, group_id=group_id)
        return _group_response(request, group.pk)


class GroupClearApi(APIView):
    # What cannot be taken back: not with a token that lacks the manage scope.
    token_scopes = {"POST": "manage"}

    @extend_schema(
        tags=TAGS,
        request=None,
        responses={200: GroupClearedOutput, 403: FORBIDDEN, 404: _NOT_FOUND},
        description="Stop the group's work and delete every conversation of it. The "
        "group, its members, its coordinator and its memory stay.",
    )
    def post(self, request: Request, group_id: int) -> Response:
        group = reachable_group(request, group_id)
        count = group_clear(group=group)
        return Response(GroupClearedOutput({"conversations": count}).data)


class GroupArchiveApi(APIView):
    # What cannot be taken back: not with a token that lacks the manage scope.
    token_scopes = {"POST": "manage"}

    @extend_schema(
        tags=TAGS,
        request=None,
        responses={200: GroupOutput, 403: FORBIDDEN, 404: _NOT_FOUND},
        description="The room leaves the roster and keeps its transcript.",
    )
    def post(self, request: Request, group_id: int) -> Response:
        group = reachable_group(request, group_id)
        group_archive(group=group)
        return _group_response(request, group_id)
