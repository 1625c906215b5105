"""The rooms: a group's and an agent's (its 1:1 conversation) on one page, their Canvas
fragments, and the files attached in them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import content_disposition_header

from dashboard import selectors
from dashboard.views.context import page_context
from garden.api.serializers import ConversationOutput
from garden.attachments import ACCEPT, IMAGE_TYPES
from garden.errors import is_row_id
from garden.models import Agent, Conversation, ModelAccount
from garden.selectors import agent_list, conversation_get, conversation_summaries
from garden.services.conversations import agent_conversation_open
from garden.tools.visits import room_visits
from groups.models import MESSAGE_MAX_CHARS, Group, Membership
from groups.payloads import group_payload
from groups.selectors import group_get, room_conversation
from groups.services.requests import solo_room_for


def _group_or_404(request: HttpRequest, group_id: int) -> Group:
    group = group_get(person=request.user, group_id=group_id)
    if group is None:
        raise Http404("No such group.")
    return group


def _wanted_conversation(request: HttpRequest) -> int | None:
    """The thread a link asks the room to open (``?conversation=``: a search result's)."""
    value = request.GET.get("conversation", "")
    return int(value) if value.isascii() and value.isdigit() and is_row_id(int(value)) else None


def _room_data(
    request: HttpRequest,
    *,
    group: Group,
    api: str,
    socket: str,
    canvas: str,
    solo: bool = False,
    thread: int | None = None,
) -> dict[str, Any]:
    """What a room's script starts from: the room as the API and its events show a group, the
    person and the URLs it talks to — a group's room and an agent's alike."""
    members = [m.agent for m in group.ordered_memberships]
    return {
        "solo": solo,
        # A closed thread shown as it was (``?conversation=``), not the open one: read only.
        "thread": thread,
        "group": group_payload(group),
        # Members answering from an offline script: the room says so on their turns.
        "scripted": list(
            Agent.objects.filter(
                pk__in=[a.pk for a in members],
                model_account__provider=ModelAccount.Provider.SCRIPTED,
            ).values_list("pk", flat=True)
        ),
        "owner": {
            "id": request.user.pk,
            "name": request.user.get_short_name() or request.user.get_username(),
        },
        "urls": {
            "api": api,
            # The room's history as a download (?format=markdown|json).
            "export": f"{api}/export",
            "approvals": "/api/approvals",
            "socket": socket,
            "canvas": canvas,
            "roster": reverse("dashboard:index"),
            "agent": reverse("dashboard:agent", args=[0]),
            "file": reverse("dashboard:artifact_file", args=[0]),
        },
        "attachments": {
            "max": settings.GARDEN_MAX_ATTACHMENTS,
            "max_bytes": settings.GARDEN_ATTACHMENT_MAX_BYTES,
        },
        # The composer counts towards it as the person types (the API refuses past it).
        "message_max_chars": MESSAGE_MAX_CHARS,
    }


def room(request: HttpRequest, group_id: int) -> HttpResponse:
    group = _group_or_404(request, group_id)
    members = [m.agent for m in group.ordered_memberships]
    candidates = selectors.group_candidates(agent_list(owner=request.user))
    wanted = _wanted_conversation(request)
    thread = room_conversation(group=group, conversation_id=wanted) if wanted else None
    closed = thread if thread and thread.status == Conversation.Status.CLOSED else None
    data = _room_data(
        request,
        group=group,
        api=f"/api/groups/{group.pk}",
        socket=f"/ws/groups/{group.pk}/",
        canvas=reverse("dashboard:canvas", args=[group.pk]),
        thread=closed.pk if closed else None,
    )
    return TemplateResponse(
        request,
        "dashboard/room.html",
        page_context(
            request,
            title=group.name,
            group=group,
            members=members,
            candidates=candidates,
            member_ids=[a.pk for a in members],
            artifacts=selectors.canvas_versions(
                selectors.group_artifacts(owner=group.owner, group=group)
            ),
            visits=room_visits(owner=request.user, group_id=group.pk),
            attachment_accept=ACCEPT,
            room_data=data,
            closed_thread=closed,
            room_url=reverse("dashboard:room", args=[group.pk]),
        ),
    )


# A file is shown, never run: no script, no plugin, no form, nothing fetched, no same origin.
FILE_POLICY = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox"


def artifact_file(request: HttpRequest, artifact_id: int) -> HttpResponse:
    """A file the owner attached, as it was stored: a picture shown in place, anything else
    downloaded; another owner's is a 404."""
    found = selectors.attachment_file(owner=request.user, artifact_id=artifact_id)
    if found is None:
        raise Http404("No such file.")
    artifact, data = found
    picture = artifact.mime_type in IMAGE_TYPES
    text = artifact.mime_type.startswith("text/") or artifact.mime_type == "application/json"
    response = HttpResponse(
        data, content_type=f"{artifact.mime_type}; charset=utf-8" if text else artifact.mime_type
    )
    response["Content-Disposition"] = content_disposition_header(
        as_attachment=not picture, filename=artifact.title
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = FILE_POLICY
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    response["Cache-Control"] = "private, max-age=300"
    return response


def _agent_or_404(request: HttpRequest, agent_id: int) -> Agent:
    agent = agent_list(owner=request.user).filter(pk=agent_id).first()
    if agent is None:
        raise Http404("No such agent.")
    return agent


def _agent_thread(request: HttpRequest, agent: Agent) -> Conversation:
    """The conversation with ``agent`` a link asks for (``?conversation=``, one of the
    person's with it, open or closed), else the open one spoken in last."""
    wanted = _wanted_conversation(request)
    asked = conversation_get(owner=request.user, conversation_id=wanted) if wanted else None
    if asked is not None and asked.agent_id == agent.pk:
        return asked
    return agent_conversation_open(owner=request.user, agent=agent)


# How many of an agent's conversations its room lists.
ROOM_CONVERSATIONS = 50


def agent_room(request: HttpRequest, agent_id: int) -> HttpResponse:
    """The room of one agent: one of the person's 1:1 conversations with it (the one asked
    for, else the open one spoken in last; a first one made here) beside the list of them all,
    on the same room page as a group's — its messages run on the group loop in the agent's own
    room (groups.services.requests.conversation_request_create)."""
    agent = _agent_or_404(request, agent_id)
    conversation = _agent_thread(request, agent)
    closed = conversation if conversation.status == Conversation.Status.CLOSED else None
    room_url = reverse("dashboard:agent_room", args=[agent.pk])
    # Its conversations, the one spoken in last first: the room's list, each a link to it —
    # the newest ROOM_CONVERSATIONS, and the one shown when it is older (search finds the rest).
    summaries = conversation_summaries(owner=request.user, agent_id=agent.pk)
    threads = list(summaries[: ROOM_CONVERSATIONS + 1])
    older = len(threads) > ROOM_CONVERSATIONS
    threads = threads[:ROOM_CONVERSATIONS]
    if all(t.pk != conversation.pk for t in threads):
        threads += list(summaries.filter(pk=conversation.pk))
    conversations = ConversationOutput(threads, many=True).data
    current = next((c for c in conversations if c["id"] == conversation.pk), None)
    room = solo_room_for(agent_id=agent.pk)
    # An agent's own room shows it as a team of one, under its own name.
    room.name, room.coordinator = agent.name, agent
    room.ordered_memberships = [Membership(group=room, agent=agent, position=0)]
    data = _room_data(
        request,
        group=room,
        api=f"/api/conversations/{conversation.pk}",
        socket=f"/ws/conversations/{conversation.pk}/",
        canvas=reverse("dashboard:agent_canvas", args=[agent.pk])
        + f"?conversation={conversation.pk}",
        solo=True,
        thread=closed.pk if closed else None,
    )
    data["agent"] = agent.pk
    data["conversation"] = current
    data["urls"].update(conversations="/api/conversations", room=room_url)
    return TemplateResponse(
        request,
        "dashboard/room.html",
        page_context(
            request,
            title=agent.name,
            solo=True,
            agent=agent,
            group={"name": agent.name},
            members=[agent],
            artifacts=selectors.canvas_versions(
                selectors.group_artifacts(owner=request.user, conversation_id=conversation.pk)
            ),
            visits=room_visits(owner=request.user, conversation_id=conversation.pk),
            attachment_accept=ACCEPT,
            room_data=data,
            closed_thread=closed,
            room_url=room_url,
            # Each with its row, for the times the list shows in the person's zone.
            conversations=list(zip(threads, conversations, strict=True)),
            conversations_older=older,
            conversation=current,
        ),
    )


def agent_canvas(request: HttpRequest, agent_id: int) -> HttpResponse:
    """The Canvas list of the agent's room alone (of the conversation it shows,
    ``?conversation=``), for the room's script to refresh."""
    agent = _agent_or_404(request, agent_id)
    conversation = _agent_thread(request, agent)
    return TemplateResponse(
        request,
        "dashboard/_canvas_list.html",
        {
            "artifacts": selectors.canvas_versions(
                selectors.group_artifacts(owner=request.user, conversation_id=conversation.pk)
            ),
            "visits": room_visits(owner=request.user, conversation_id=conversation.pk),
        },
    )


def canvas(request: HttpRequest, group_id: int) -> HttpResponse:
    """The Canvas list alone, for the room's script to refresh in place."""
    group = _group_or_404(request, group_id)
    return TemplateResponse(
        request,
        "dashboard/_canvas_list.html",
        {
            "artifacts": selectors.canvas_versions(
                selectors.group_artifacts(owner=group.owner, group=group)
            ),
            "visits": room_visits(owner=request.user, group_id=group.pk),
        },
    )
