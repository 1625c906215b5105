"""Settings → Notifications over the API: where the owner's agents' replies notify them and
which agents are muted. validate → service → serialize; a session with its CSRF pair, or an
access token (read for GET, write for PUT). Approvals are not here: they cannot be muted."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden.api.errors import REFUSED
from garden.errors import MAX_ID
from notifications.payloads import NotificationSettingsOutput
from notifications.selectors import channels_get, notification_agents
from notifications.services import notification_settings_update
from telegram_approvals.bot import configured
from telegram_approvals.selectors import link_get

TAGS = ["notifications"]
# Bounded by the owner's agents; more ids than this cannot all be theirs.
MAX_MUTED = 1000


class NotificationSettingsInput(serializers.Serializer):
    """The whole preferences: every part is required, and ``muted`` is every agent muted."""

    browser = serializers.BooleanField()
    telegram = serializers.BooleanField()
    muted = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        max_length=MAX_MUTED,
        help_text="Ids of your agents whose replies notify nothing; the rest notify.",
    )


def notification_settings_payload(owner: AbstractBaseUser) -> dict[str, Any]:
    chosen = channels_get(owner_id=owner.pk)
    return NotificationSettingsOutput(
        {
            "browser": chosen.browser,
            "telegram": chosen.telegram,
            "telegram_configured": configured(),
            "telegram_linked": link_get(owner=owner) is not None,
            "agents": notification_agents(owner=owner),
        }
    ).data


class NotificationSettingsApi(APIView):
    @extend_schema(
        tags=TAGS,
        responses={200: NotificationSettingsOutput, **REFUSED},
        description="Where your agents' replies notify you (your open dashboard pages, your "
        "linked Telegram chat) and every agent of yours with its mute. Approvals always notify "
        "and are not listed.",
    )
    def get(self, request: Request) -> Response:
        return Response(notification_settings_payload(request.user))

    @extend_schema(
        tags=TAGS,
        request=NotificationSettingsInput,
        responses={200: NotificationSettingsOutput, **REFUSED},
        description="Replace your notification settings. An agent in ``muted`` that is not a "
        "live agent of yours (NOT_FOUND, 404), or Telegram turned on before a chat is linked "
        "(TELEGRAM_NOT_LINKED), writes nothing.",
    )
    def put(self, request: Request) -> Response:
        data = NotificationSettingsInput(data=request.data)
        data.is_valid(raise_exception=True)
        notification_settings_update(owner=request.user, **data.validated_data)
        return Response(notification_settings_payload(request.user))
