"""Workspaces: the ones a person is in, a team workspace made, and its people (listed by anyone
in it, changed by its admins; anyone may leave). A workspace a person is not in is 404."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden import selectors
from garden.errors import ServiceError, not_found
from garden.models import WorkspaceMember
from garden.models.workspaces import WORKSPACE_NAME_MAX_CHARS
from garden.services.workspaces import (
    workspace_create,
    workspace_member_add,
    workspace_member_change,
    workspace_member_remove,
)


class WorkspaceOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=["personal", "team"])
    role = serializers.ChoiceField(choices=WorkspaceMember.Role.values, help_text="Yours.")
    approver = serializers.BooleanField(help_text="Whether you may decide its approvals.")
    member_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class WorkspaceInput(serializers.Serializer):
    name = serializers.CharField(max_length=WORKSPACE_NAME_MAX_CHARS)


class MemberOutput(serializers.Serializer):
    user_id = serializers.IntegerField()
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=WorkspaceMember.Role.values)
    approver = serializers.BooleanField()
    added_at = serializers.DateTimeField()


class MemberInput(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=WorkspaceMember.Role.values, default="member")
    approver = serializers.BooleanField(default=False)


class MemberChangeInput(serializers.Serializer):
    role = serializers.ChoiceField(choices=WorkspaceMember.Role.values, required=False)
    approver = serializers.BooleanField(required=False)


def _membership(request: Request, workspace_id: int, right: str = "read") -> WorkspaceMember:
    membership = selectors.workspace_membership(user=request.user, workspace_id=workspace_id)
    if membership is None:
        raise not_found("workspace")
    if not selectors.workspace_may(membership, right):
        raise ServiceError(
            "WORKSPACE_ROLE",
            "Only an admin of this workspace may change its people.",
            status=403,
        )
    return membership


def _person(workspace_id: int, user_id: int) -> WorkspaceMember:
    found = (
        WorkspaceMember.objects.filter(workspace_id=workspace_id, user_id=user_id)
        .select_related("user")
        .first()
    )
    if found is None:
        raise not_found("member of this workspace")
    return found


class WorkspaceListCreateApi(APIView):
    token_scopes = {"POST": "manage"}

    @extend_schema(
        responses=WorkspaceOutput(many=True),
        description="The workspaces you are in, your own first, each with your role.",
    )
    def get(self, request: Request) -> Response:
        return Response(
            WorkspaceOutput(selectors.workspace_list(user=request.user), many=True).data
        )

    @extend_schema(
        request=WorkspaceInput,
        responses={201: WorkspaceOutput},
        description="Make a team workspace, with you as its admin (409 WORKSPACE_LIMIT past "
        "the site's limit on team workspaces per person).",
    )
    def post(self, request: Request) -> Response:
        data = WorkspaceInput(data=request.data)
        data.is_valid(raise_exception=True)
        made = workspace_create(name=data.validated_data["name"], by=request.user)
        shown = selectors.workspace_list(user=request.user).get(pk=made.pk)
        return Response(WorkspaceOutput(shown).data, status=status.HTTP_201_CREATED)


class WorkspaceMemberListCreateApi(APIView):
    token_scopes = {"POST": "manage"}

    @extend_schema(responses=MemberOutput(many=True), description="The workspace's people.")
    def get(self, request: Request, workspace_id: int) -> Response:
        _membership(request, workspace_id)
        people = WorkspaceMember.objects.filter(workspace_id=workspace_id).select_related("user")
        return Response(MemberOutput(people, many=True).data)

    @extend_schema(
        request=MemberInput,
        responses={201: MemberOutput},
        description="Put a person in this team workspace (its admins only: 403 WORKSPACE_ROLE). "
        "An unknown username is 404; a personal workspace is refused (WORKSPACE_PERSONAL).",
    )
    def post(self, request: Request, workspace_id: int) -> Response:
        membership = _membership(request, workspace_id, "manage")
        data = MemberInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        user = get_user_model().objects.filter(username=v["username"], is_active=True).first()
        if user is None:
            raise not_found("person", field="username")
        added = workspace_member_add(
            workspace=membership.workspace,
            user=user,
            role=v["role"],
            approver=v["approver"],
            by=request.user,
        )
        return Response(MemberOutput(added).data, status=status.HTTP_201_CREATED)


class WorkspaceMemberDetailApi(APIView):
    token_scopes = {"PATCH": "manage", "DELETE": "manage"}

    @extend_schema(
        request=MemberChangeInput,
        responses=MemberOutput,
        description="Change a person's role or approver right (admins only). The last admin "
        "stays one (409 WORKSPACE_LAST_ADMIN).",
    )
    def patch(self, request: Request, workspace_id: int, user_id: int) -> Response:
        membership = _membership(request, workspace_id, "manage")
        data = MemberChangeInput(data=request.data)
        data.is_valid(raise_exception=True)
        person = _person(workspace_id, user_id)
        changed = workspace_member_change(
            workspace=membership.workspace, user=person.user, **data.validated_data
        )
        return Response(MemberOutput(changed).data)

    @extend_schema(
        request=None,
        responses={204: None},
        description="Take a person out (admins), or leave (anyone, for themselves). The last "
        "admin stays (409 WORKSPACE_LAST_ADMIN).",
    )
    def delete(self, request: Request, workspace_id: int, user_id: int) -> Response:
        leaving = user_id == request.user.pk
        membership = _membership(request, workspace_id, "read" if leaving else "manage")
        person = _person(workspace_id, user_id)
        workspace_member_remove(workspace=membership.workspace, user=person.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
