"""Workspaces: the ones a person is in, a team workspace made, its people (listed by anyone in
it, changed by its admins; anyone may leave) and its invitations (made and withdrawn by its
admins, taken up by the person named). A workspace a person is not in is 404."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden import selectors
from garden.api.auth import SessionOnly
from garden.errors import ServiceError, not_found
from garden.models import WorkspaceInvitation, WorkspaceMember
from garden.models.workspaces import WORKSPACE_NAME_MAX_CHARS
from garden.services.workspaces import (
    invitation_accept,
    invitation_create,
    invitation_revoke,
    invitations_open,
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


class InvitationInput(serializers.Serializer):
    email = serializers.EmailField(required=False, allow_blank=True, default="")
    username = serializers.CharField(max_length=150, required=False, allow_blank=True, default="")
    role = serializers.ChoiceField(choices=WorkspaceMember.Role.values, default="member")
    approver = serializers.BooleanField(default=False)
    expires_in_days = serializers.IntegerField(required=False, min_value=1, max_value=366)


class InvitationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.CharField()
    username = serializers.CharField()
    role = serializers.ChoiceField(choices=WorkspaceMember.Role.values)
    approver = serializers.BooleanField()
    invited_by = serializers.CharField(source="invited_by.username", default=None)
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()


class InvitationMadeOutput(InvitationOutput):
    link = serializers.CharField(help_text="The invitation's link, shown this once.")


class InvitationAcceptInput(serializers.Serializer):
    secret = serializers.CharField(max_length=200)


class WorkspaceInvitationListCreateApi(APIView):
    token_scopes = {"GET": "manage", "POST": "manage"}

    @extend_schema(
        responses=InvitationOutput(many=True),
        description="The workspace's open invitations (admins only): not used, withdrawn or "
        "expired.",
    )
    def get(self, request: Request, workspace_id: int) -> Response:
        membership = _membership(request, workspace_id, "manage")
        found = invitations_open(workspace=membership.workspace).select_related("invited_by")
        return Response(InvitationOutput(found, many=True).data)

    @extend_schema(
        request=InvitationInput,
        responses={201: InvitationMadeOutput},
        description="Invite one person, by email address or by username (not both: "
        "INVITATION_NAMES_ONE), as a role (admins only). The response carries the link, this "
        "once; it works once, for expires_in_days (GARDEN_INVITATION_DAYS by default, at most "
        "GARDEN_INVITATION_MAX_DAYS: INVITATION_DAYS). 409 INVITATION_LIMIT past the site's "
        "open invitations per workspace.",
    )
    def post(self, request: Request, workspace_id: int) -> Response:
        membership = _membership(request, workspace_id, "manage")
        data = InvitationInput(data=request.data)
        data.is_valid(raise_exception=True)
        made = invitation_create(
            workspace=membership.workspace, by=request.user, **data.validated_data
        )
        made.invitation.link = request.build_absolute_uri(
            reverse("dashboard:join", args=[made.secret])
        )
        return Response(InvitationMadeOutput(made.invitation).data, status=status.HTTP_201_CREATED)


class WorkspaceInvitationDetailApi(APIView):
    token_scopes = {"DELETE": "manage"}

    @extend_schema(request=None, responses={204: None}, description="Withdraw the invitation.")
    def delete(self, request: Request, workspace_id: int, invitation_id: int) -> Response:
        membership = _membership(request, workspace_id, "manage")
        invitation = WorkspaceInvitation.objects.filter(
            workspace=membership.workspace, pk=invitation_id
        ).first()
        if invitation is None:
            raise not_found("invitation")
        invitation_revoke(invitation=invitation)
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationAcceptApi(APIView):
    # Joining a workspace is a person's own act, from their session: a token cannot.
    permission_classes = [IsAuthenticated, SessionOnly]

    @extend_schema(
        request=InvitationAcceptInput,
        responses={201: MemberOutput},
        description="Take up an invitation meant for you (its username, or your account's "
        "email address): 404 INVITATION_INVALID, 409 INVITATION_USED, 410 INVITATION_EXPIRED or "
        "INVITATION_REVOKED, 403 INVITATION_NOT_YOURS.",
    )
    def post(self, request: Request) -> Response:
        data = InvitationAcceptInput(data=request.data)
        data.is_valid(raise_exception=True)
        joined = invitation_accept(secret=data.validated_data["secret"], user=request.user)
        return Response(MemberOutput(joined).data, status=status.HTTP_201_CREATED)
