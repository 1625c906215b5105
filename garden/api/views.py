"""The garden API: model accounts, agents and 1:1 conversations. validate → service → serialize."""

from __future__ import annotations

from django.contrib.auth import authenticate
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden import selectors
from garden.api.auth import SessionOnly, has_scope
from garden.api.errors import REFUSED, ErrorOutput
from garden.api.serializers import (
    AccessTokenCreatedOutput,
    AccessTokenInput,
    AccessTokenOutput,
    AccountTestOutput,
    AgentChangeInput,
    AgentInput,
    AgentOutput,
    ConversationChangeInput,
    ConversationInput,
    ConversationListQuery,
    ConversationOutput,
    CredentialOutput,
    ModelAccountChangedOutput,
    ModelAccountChangeInput,
    ModelAccountInput,
    ModelAccountOutput,
)
from garden.credentials import credentials_for
from garden.errors import ServiceError, not_found
from garden.models import AccessToken, Agent
from garden.services.accounts import (
    model_account_create,
    model_account_delete,
    model_account_test,
    model_account_update,
    scripted_account_for,
)
from garden.services.agents import agent_create, agent_remove, agent_update
from garden.services.conversations import agent_conversation_create, conversation_rename
from garden.services.tokens import token_create, token_revoke


class ModelAccountListCreateApi(APIView):
    @extend_schema(responses=ModelAccountOutput(many=True))
    def get(self, request: Request) -> Response:
        accounts = selectors.model_account_list(owner=request.user)
        return Response(ModelAccountOutput(accounts, many=True).data)

    @extend_schema(request=ModelAccountInput, responses={201: ModelAccountOutput})
    def post(self, request: Request) -> Response:
        data = ModelAccountInput(data=request.data)
        data.is_valid(raise_exception=True)
        account = model_account_create(owner=request.user, **data.validated_data)
        return Response(ModelAccountOutput(account).data, status=status.HTTP_201_CREATED)


class ModelAccountDetailApi(APIView):
    def _account(self, request: Request, account_id: int):
        account = selectors.model_account_list(owner=request.user).filter(pk=account_id).first()
        if account is None:
            raise not_found("model account")
        return account

    @extend_schema(responses=ModelAccountOutput)
    def get(self, request: Request, account_id: int) -> Response:
        return Response(ModelAccountOutput(self._account(request, account_id)).data)

    @extend_schema(
        request=ModelAccountChangeInput,
        responses=ModelAccountChangedOutput,
        description="Change what is given. api_key replaces the stored key (write-only); "
        "credential switches to one of the operator's credentials. A new base_url without a "
        "new api_key drops the stored key (api_key_cleared: true): a key never follows the "
        "account to another host.",
    )
    def patch(self, request: Request, account_id: int) -> Response:
        account = self._account(request, account_id)
        data = ModelAccountChangeInput(data=request.data)
        data.is_valid(raise_exception=True)
        change = model_account_update(
            account=account, **data.validated_data, manage=has_scope(request, "manage")
        )
        change.account.api_key_cleared = change.api_key_cleared
        return Response(ModelAccountChangedOutput(change.account).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, account_id: int) -> Response:
        model_account_delete(account=self._account(request, account_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ModelAccountTestApi(APIView):
    # One model call, like posting a message.
    throttle_scopes = {"POST": "messages"}

    @extend_schema(
        request=None,
        responses=AccountTestOutput,
        description="Make one tiny call with the account and say, by name, whether it "
        "works (EGRESS_REFUSED, CREDENTIAL_NOT_ALLOWED, PROVIDER_REJECTED, …).",
    )
    def post(self, request: Request, account_id: int) -> Response:
        account = selectors.model_account_list(owner=request.user).filter(pk=account_id).first()
        if account is None:
            raise not_found("model account")
        return Response(AccountTestOutput(model_account_test(account=account)).data)


class CredentialListApi(APIView):
    @extend_schema(
        responses=CredentialOutput(many=True),
        description="The operator's named credentials you may use (never their keys).",
    )
    def get(self, request: Request) -> Response:
        return Response(CredentialOutput(credentials_for(request.user), many=True).data)


class AgentListCreateApi(APIView):
    @extend_schema(responses=AgentOutput(many=True))
    def get(self, request: Request) -> Response:
        agents = selectors.agent_list(owner=request.user).prefetch_related("delegation_allowlist")
        return Response(AgentOutput(agents, many=True).data)

    @extend_schema(request=AgentInput, responses={201: AgentOutput})
    def post(self, request: Request) -> Response:
        data = AgentInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if "model_account" in v:
            account = _owned_account(request, v["model_account"])
        else:
            account = scripted_account_for(owner=request.user)
        allow = _owned_agents(request, v["delegation_allowlist"])
        agent = agent_create(
            owner=request.user,
            handle=v["handle"],
            name=v["name"],
            model_account=account,
            instructions=v["instructions"],
            colour=v.get("colour"),
            enabled_tools=v["enabled_tools"],
            approval_tools=v["approval_tools"],
            tool_approvals=v["tool_approvals"],
            delegation_allowlist=allow,
            manage=has_scope(request, "manage"),
        )
        return Response(AgentOutput(agent).data, status=status.HTTP_201_CREATED)


def _owned_account(request: Request, account_id: int):
    account = selectors.model_account_list(owner=request.user).filter(pk=account_id).first()
    if account is None:
        raise ServiceError(
            "MODEL_ACCOUNT_NOT_FOUND", "No such model account.", field="model_account"
        )
    return account


def _owned_agents(request: Request, handles: list[str]) -> list[Agent]:
    """The owner's agents of ``handles`` (an allowlist), refusing any it does not name."""
    found = list(selectors.agent_list(owner=request.user).filter(handle__in=handles))
    missing = sorted(set(handles) - {a.handle for a in found})
    if missing:
        raise ServiceError(
            "UNKNOWN_AGENT", f"Unknown agents: {', '.join(missing)}.", field="delegation_allowlist"
        )
    return found


class AgentDetailApi(APIView):
    def _agent(self, request: Request, agent_id: int) -> Agent:
        agent = (
            selectors.agent_list(owner=request.user)
            .prefetch_related("delegation_allowlist")
            .filter(pk=agent_id)
            .first()
        )
        if agent is None:
            raise not_found("agent")
        return agent

    @extend_schema(responses=AgentOutput)
    def get(self, request: Request, agent_id: int) -> Response:
        return Response(AgentOutput(self._agent(request, agent_id)).data)

    @extend_schema(
        request=AgentChangeInput,
        responses=AgentOutput,
        description="Change what is given: name, colour, instructions, model account, enabled "
        "tools, tools needing approval, delegation allowlist (handles). The next step of every "
        "group the agent is in uses the change; the handle stays.",
    )
    def patch(self, request: Request, agent_id: int) -> Response:
        agent = self._agent(request, agent_id)
        data = AgentChangeInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = dict(data.validated_data)
        if "model_account" in v:
            v["model_account"] = _owned_account(request, v["model_account"])
        if "delegation_allowlist" in v:
            v["delegation_allowlist"] = _owned_agents(request, v["delegation_allowlist"])
        agent = agent_update(agent=agent, **v, manage=has_scope(request, "manage"))
        return Response(AgentOutput(self._agent(request, agent.pk)).data)

    @extend_schema(
        request=None,
        responses={204: None},
        description="Remove the agent: it stops running and leaves the agents list; its turns "
        "keep their speaker. 409 BUILTIN_AGENT for Concierge and Agent Father, 409 "
        "AGENT_COORDINATES while it coordinates a group.",
    )
    def delete(self, request: Request, agent_id: int) -> Response:
        agent_remove(agent=self._agent(request, agent_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationListCreateApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("agent", int, description="Only the conversations with this agent."),
            OpenApiParameter("limit", int, description="At most this many (default 50, ≤ 200)."),
            OpenApiParameter(
                "before", str, description="Only those last spoken in before this time."
            ),
        ],
        responses={200: ConversationOutput(many=True), 400: ErrorOutput},
        description="Your 1:1 conversations, the one spoken in last first (by its last turn, "
        "or by when it was started if nothing has been said in it).",
    )
    def get(self, request: Request) -> Response:
        query = ConversationListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = selectors.conversation_summaries(
            owner=request.user, agent_id=query.validated_data.get("agent")
        )
        if "before" in query.validated_data:
            found = found.filter(last_activity_at__lt=query.validated_data["before"])
        page = found[: query.validated_data["limit"]]
        return Response(ConversationOutput(page, many=True).data)

    @extend_schema(
        request=ConversationInput,
        responses={201: ConversationOutput, 400: ErrorOutput},
        description="Start a new conversation with one of your agents (AGENT_NOT_FOUND "
        "otherwise); a title is optional (TITLE_TOO_LONG, TITLE_INVALID).",
    )
    def post(self, request: Request) -> Response:
        data = ConversationInput(data=request.data)
        data.is_valid(raise_exception=True)
        agent = (
            selectors.agent_list(owner=request.user).filter(pk=data.validated_data["agent"]).first()
        )
        if agent is None:
            raise ServiceError("AGENT_NOT_FOUND", "No such agent.", field="agent")
        made = agent_conversation_create(
            owner=request.user, agent=agent, title=data.validated_data["title"]
        )
        return Response(_summary(request, made.pk), status=status.HTTP_201_CREATED)


def _summary(request: Request, conversation_id: int) -> dict:
    """The one shape of a conversation in the API: as its list shows it."""
    found = selectors.conversation_summaries(owner=request.user).filter(pk=conversation_id).first()
    if found is None:
        raise not_found("conversation")
    return ConversationOutput(found).data


class ConversationDetailApi(APIView):
    @extend_schema(responses={200: ConversationOutput, **REFUSED})
    def get(self, request: Request, conversation_id: int) -> Response:
        return Response(_summary(request, conversation_id))

    @extend_schema(
        request=ConversationChangeInput,
        responses={200: ConversationOutput, **REFUSED},
        description="Rename the conversation: TITLE_TOO_LONG past 100 characters, "
        "TITLE_INVALID for a control character; a blank title makes it untitled again. "
        "Another person's conversation is 404.",
    )
    def patch(self, request: Request, conversation_id: int) -> Response:
        conversation = selectors.conversation_get(
            owner=request.user, conversation_id=conversation_id
        )
        if conversation is None:
            raise not_found("conversation")
        data = ConversationChangeInput(data=request.data)
        data.is_valid(raise_exception=True)
        conversation_rename(conversation=conversation, title=data.validated_data["title"])
        return Response(_summary(request, conversation.pk))


def _password_confirmed(request: Request, password: str) -> None:
    """The signed-in person typed their current password again. It is a sign-in like any
    other: a wrong one counts toward the login lockout, and while locked even the right one is
    refused (LOGIN_LOCKED, 429)."""
    django_request = request._request
    user = authenticate(django_request, username=request.user.get_username(), password=password)
    if getattr(django_request, "axes_locked_out", False):
        raise ServiceError(
            "LOGIN_LOCKED",
            "Too many wrong passwords: signing in is locked for a while.",
            field="password",
            status=429,
        )
    if user is None or user.pk != request.user.pk:
        raise ServiceError(
            "PASSWORD_INCORRECT",
            "That is not your current password.",
            field="password",
            status=403,
        )


class AccessTokenListCreateApi(APIView):
    permission_classes = [IsAuthenticated, SessionOnly]

    @extend_schema(responses=AccessTokenOutput(many=True), description="Your live tokens.")
    def get(self, request: Request) -> Response:
        tokens = AccessToken.objects.filter(owner=request.user, revoked_at__isnull=True)
        return Response(AccessTokenOutput(tokens, many=True).data)

    @extend_schema(
        request=AccessTokenInput,
        responses={201: AccessTokenCreatedOutput},
        description="Make a token; the response carries it this once (only its hash is kept). "
        "Needs your current password (403 PASSWORD_INCORRECT; 429 LOGIN_LOCKED after too many "
        "wrong ones). Every token expires: after expires_in_days, 90 days by default.",
    )
    def post(self, request: Request) -> Response:
        data = AccessTokenInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = dict(data.validated_data)
        _password_confirmed(request, v.pop("password"))
        made = token_create(owner=request.user, **v)
        made.token.token = made.secret
        return Response(AccessTokenCreatedOutput(made.token).data, status=status.HTTP_201_CREATED)


class AccessTokenDetailApi(APIView):
    permission_classes = [IsAuthenticated, SessionOnly]

    @extend_schema(request=None, responses={204: None}, description="Revoke the token.")
    def delete(self, request: Request, token_id: int) -> Response:
        token = AccessToken.objects.filter(
            owner=request.user, pk=token_id, revoked_at__isnull=True
        ).first()
        if token is None:
            raise not_found("token")
        token_revoke(token=token)
        return Response(status=status.HTTP_204_NO_CONTENT)
