"""What a reply notification says, and the one shape of an owner's notification settings: the
``notification.reply`` event the dashboard's pages turn into a browser notification, the text
a Telegram chat is sent, and what GET and PUT /api/notifications answer.

Which turn is a reply is decided here, from the turn alone: an agent's turn (kind ``turn``)
with visible text and no tool call or tool result — the last turn of a step that asked for
nothing more. The coordinator's ask to a member, tool results, activity lines, notices and
rollover summaries are not replies, so they notify nothing."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from garden.payloads import AgentFaceOutput, agent_face_payload

EVENT = "notification.reply"
# A browser notification shows a line or two; Telegram takes 4096 characters a message.
BROWSER_BODY_CHARS = 200
TELEGRAM_TEXT_CHARS = 4096
_NOT_A_REPLY = {"tool_call", "tool_result"}


def owner_channel(owner_id: int) -> str:
    """The Channels group of an owner's open dashboard pages (their roster sockets)."""
    return f"notifications-{owner_id}"


def reply_text(content: Any) -> str:
    """The visible text of an agent's turn when it is a finished reply, else ""."""
    if not isinstance(content, list):
        return ""
    if any(isinstance(b, dict) and b.get("type") in _NOT_A_REPLY for b in content):
        return ""
    parts = [
        b.get("text") or ""
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n\n".join(p.strip() for p in parts if p.strip())


def clip(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class ReplyNotificationEvent(serializers.Serializer):
    """An agent's reply, to show as a notification: always as the agent, with the group it
    was said in (none in the agent's own room); ``url`` opens that room."""

    type = serializers.ChoiceField(choices=[EVENT])
    message = serializers.IntegerField(help_text="The reply's turn.")
    conversation = serializers.IntegerField()
    group = serializers.IntegerField(
        allow_null=True, help_text="The group it was said in; null in the agent's own room."
    )
    group_name = serializers.CharField(allow_blank=True)
    agent = AgentFaceOutput()
    title = serializers.CharField(help_text='"<agent>" or "<agent> in <group>".')
    body = serializers.CharField(allow_blank=True)
    url = serializers.CharField()


def reply_title(*, agent_name: str, group_name: str) -> str:
    return f"{agent_name} in {group_name}" if group_name else agent_name


def reply_notification_event(
    *, message: Any, text: str, group_id: int | None, group_name: str, url: str
) -> dict[str, Any]:
    """The event of ``message`` (a reply turn, its ``speaker_agent`` loaded) with its ``text``;
    ``group_id`` and ``group_name`` for a group's turn, None and "" in the agent's own room."""
    agent = message.speaker_agent
    return {
        "type": EVENT,
        "message": message.pk,
        "conversation": message.conversation_id,
        "group": group_id,
        "group_name": group_name,
        "agent": agent_face_payload(agent),
        "title": reply_title(agent_name=agent.name, group_name=group_name),
        "body": clip(text, BROWSER_BODY_CHARS),
        "url": url,
    }


def telegram_text(*, agent_name: str, group_name: str, text: str) -> str:
    """The message a linked chat is sent: who said it (and where), then the reply, clipped."""
    return clip(
        f"{reply_title(agent_name=agent_name, group_name=group_name)}:\n{text}", TELEGRAM_TEXT_CHARS
    )


class NotificationAgentOutput(AgentFaceOutput):
    muted = serializers.BooleanField(help_text="Its replies notify nothing (approvals still do).")


class NotificationSettingsOutput(serializers.Serializer):
    browser = serializers.BooleanField(help_text="Replies notify your open dashboard pages.")
    telegram = serializers.BooleanField(help_text="Replies are sent to your linked Telegram chat.")
    telegram_configured = serializers.BooleanField(help_text="Whether this site has a bot.")
    telegram_linked = serializers.BooleanField(help_text="Whether you linked a chat.")
    agents = NotificationAgentOutput(
        many=True,
        help_text="Every agent of yours, each with its mute. No group: a group "
        "sends nothing of its own.",
    )
