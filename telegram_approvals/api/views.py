"""The link page's API: the owner's link, a one-time code to make one, unlinking. A signed-in
session only (with its CSRF pair): an access token cannot link a chat that could then decide
the owner's approvals."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden.errors import ServiceError
from telegram_approvals.bot import configured
from telegram_approvals.selectors import bot_username, link_get
from telegram_approvals.services import link_code_create, link_delete


class LinkOutput(serializers.Serializer):
    configured = serializers.BooleanField(help_text="Whether this site has a Telegram bot.")
    linked = serializers.BooleanField()
    username = serializers.CharField(
        allow_blank=True, help_text="The linked Telegram account's @name, if it has one."
    )
    linked_at = serializers.DateTimeField(allow_null=True)


class LinkCodeOutput(serializers.Serializer):
    code = serializers.CharField(help_text="Send /start <code> to the bot; shown this once.")
    command = serializers.CharField(help_text='"/start <code>"')
    expires_at = serializers.DateTimeField()
    bot_username = serializers.CharField(allow_blank=True)
    link_url = serializers.CharField(
        allow_blank=True, help_text="https://t.me/<bot>?start=<code> when the bot's name is known."
    )


def _not_configured() -> ServiceError:
    return ServiceError(
        "TELEGRAM_NOT_CONFIGURED", "Telegram is not configured on this site.", status=404
    )


def _link_payload(request: Request) -> dict:
    link = link_get(owner=request.user)
    return {
        "configured": configured(),
        "linked": link is not None,
        "username": link.username if link else "",
        "linked_at": link.linked_at if link else None,
    }


class TelegramLinkApi(APIView):
    authentication_classes = [SessionAuthentication]

    @extend_schema(responses=LinkOutput, description="Your linked Telegram chat, if any.")
    def get(self, request: Request) -> Response:
        return Response(LinkOutput(_link_payload(request)).data)

    @extend_schema(
        request=None,
        responses={204: None},
        description="Unlink your Telegram chat: approvals stop going there.",
    )
    def delete(self, request: Request) -> Response:
        link_delete(owner=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TelegramLinkCodeApi(APIView):
    authentication_classes = [SessionAuthentication]

    @extend_schema(
        request=None,
        responses={201: LinkCodeOutput},
        description="A one-time code that links the Telegram chat sending /start <code> to the "
        "bot; it expires (GARDEN_TELEGRAM_LINK_CODE_SECONDS) and replaces any earlier one.",
    )
    def post(self, request: Request) -> Response:
        if not configured():
            raise _not_configured()
        made = link_code_create(owner=request.user)
        name = bot_username(ask=True)
        payload = {
            "code": made.code,
            "command": f"/start {made.code}",
            "expires_at": made.expires_at,
            "bot_username": name,
            "link_url": f"https://t.me/{name}?start={made.code}" if name else "",
        }
        return Response(LinkCodeOutput(payload).data, status=status.HTTP_201_CREATED)
