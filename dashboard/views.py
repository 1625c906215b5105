"""The dashboard's pages: roster, agents, an agent, the model accounts, the tools (MCP
servers), a group's room and its Canvas fragment.

Server-rendered; every write goes through the JSON API from the page's script, so the rules,
the CSRF pair and the error shape are the API's. Another owner's rows are a 404.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import content_disposition_header

from dashboard import selectors
from garden.api.artifacts import artifact_payload
from garden.attachments import ACCEPT, IMAGE_TYPES
from garden.credentials import credentials_for
from garden.models import AccessToken, Agent, ModelAccount
from garden.selectors import account_key_status, agent_list, model_account_list
from garden.services.agents import agent_next_colour, assignable_tools
from garden.services.conversations import agent_conversation_open
from garden.storage import owner_artifacts, storage_usage
from garden.tools import is_sourced
from groups.models import DEFAULT_ROOM_CAP_CHARS, MEMORY_SENTENCE, Group
from groups.rules import ROOM_CAP_MIN_CHARS
from groups.selectors import (
    group_get,
    group_list,
    usage_by_owner_day,
    usage_csv,
    usage_range,
    usage_totals,
    webhook_delivery_list,
    webhook_endpoint_list,
)
from groups.services.groups import purge_due_groups_soon
from groups.services.requests import solo_room_for
from groups.services.webhooks import EVENTS as WEBHOOK_EVENTS
from telegram_approvals.bot import configured as telegram_configured
from telegram_approvals.selectors import bot_username, link_get


def _context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    # The dashboard's site set itself on the request (DashboardSite.admin_view).
    return {**request.dashboard_site.each_context(request), **extra}


def face(agent: Agent) -> dict[str, Any]:
    return {
        "id": agent.pk,
        "handle": agent.handle,
        "name": agent.name,
        "colour": agent.colour,
        "can_run": agent.can_run,
        "builtin": agent.builtin,
    }


def roster(request: HttpRequest) -> HttpResponse:
    purge_due_groups_soon(owner=request.user)
    agents = list(agent_list(owner=request.user))
    concierge = next((a for a in agents if a.builtin == Agent.Builtin.CONCIERGE), None)
    groups = list(group_list(owner=request.user))
    states = selectors.group_states(group_ids=[g.pk for g in groups])
    busy = selectors.agent_states(owner=request.user)
    for agent in agents:
        agent.roster_state = busy.get(agent.pk, "")
    for group in groups:
        group.member_agents = [m.agent for m in group.ordered_memberships]
        group.roster_state = states.get(group.pk, "")
    return TemplateResponse(
        request,
        "dashboard/roster.html",
        _context(
            request,
            title="Your agents and groups",
            agents=agents,
            groups=groups,
            can_make_group=selectors.can_make_group(agents),
            candidates=selectors.group_candidates(agents),
            default_coordinator=concierge,
            create_member_ids=[concierge.pk] if concierge else [],
            memory_sentence=MEMORY_SENTENCE,
            room_cap={
                "min": ROOM_CAP_MIN_CHARS,
                "max": settings.GARDEN_MAX_ROOM_CAP_CHARS,
                "default": DEFAULT_ROOM_CAP_CHARS,
            },
        ),
    )


def agents(request: HttpRequest) -> HttpResponse:
    rows = list(agent_list(owner=request.user).select_related("model_account"))
    return TemplateResponse(
        request,
        "dashboard/agents.html",
        _context(
            request,
            title="Agents",
            agents=rows,
            teammates=len(selectors.teammates(rows)),
            next_colour=agent_next_colour(owner=request.user),
        ),
    )


def agent_detail(request: HttpRequest, agent_id: int) -> HttpResponse:
    """An agent's settings, edited in place (PATCH /api/agents/:id), and its removal."""
    agent = (
        agent_list(owner=request.user)
        .prefetch_related("delegation_allowlist")
        .filter(pk=agent_id)
        .first()
    )
    if agent is None:
        raise Http404("No such agent.")
    allowed = {a.pk for a in agent.delegation_allowlist.all()}
    tools = [
        {
            "name": name,
            "description": description,
            "enabled": name in agent.enabled_tools,
            "approval": name in agent.approval_tools,
        }
        for name, description in assignable_tools(builtin=agent.builtin).items()
    ]
    # The owner's MCP tools beside the built-ins, by server, each with its approval policy.
    servers = [
        {
            **server,
            "tools": [
                {
                    **tool,
                    "enabled": tool["agent_tool"] in agent.enabled_tools,
                    "policy": agent.tool_approvals.get(tool["agent_tool"], "annotations"),
                }
                for tool in server["tools"]
                if tool["agent_tool"]
            ],
        }
        for server in selectors.mcp_servers(owner=request.user)
    ]
    offered = {tool["agent_tool"] for server in servers for tool in server["tools"]}
    # Enabled once, no longer listed (its server dropped it): shown, so it can be taken away.
    gone = [n for n in agent.enabled_tools if is_sourced(n) and n not in offered]
    others = [
        {"agent": other, "allowed": other.pk in allowed}
        for other in selectors.group_candidates(agent_list(owner=request.user))
        if other.pk != agent.pk
    ]
    return TemplateResponse(
        request,
        "dashboard/agent.html",
        _context(
            request,
            title=agent.name,
            agent=agent,
            groups=selectors.agent_groups(owner=request.user, agent=agent),
            accounts=model_account_list(owner=request.user),
            tools=tools,
            mcp_servers=servers,
            mcp_gone=gone,
            others=others,
            coordinates=list(
                agent.coordinated_groups.filter(kind=Group.Kind.TEAM, deleted_at__isnull=True)
            ),
        ),
    )


def accounts(request: HttpRequest) -> HttpResponse:
    """The owner's model accounts: where each key comes from, who uses it, a Test button, and
    the form that adds one (POST /api/model-accounts)."""
    rows = list(model_account_list(owner=request.user).prefetch_related("agents"))
    for account in rows:
        account.key_status = account_key_status(account)
        account.users = [a for a in account.agents.all() if a.removed_at is None]
        account.script = json.dumps(account.options, indent=2)
    # Scripted accounts are offered where the site allows them to everyone (development).
    scripted = settings.GARDEN_ALLOW_SCRIPTED_ACCOUNTS
    return TemplateResponse(
        request,
        "dashboard/accounts.html",
        _context(
            request,
            title="Model accounts",
            accounts=rows,
            credentials=credentials_for(request.user),
            scripted_allowed=scripted,
            # Real providers first: the offline one is for trying things out.
            providers=[
                (value, label)
                for value, label in ModelAccount.Provider.choices
                if value != ModelAccount.Provider.SCRIPTED
            ]
            + ([(ModelAccount.Provider.SCRIPTED, "Scripted (offline)")] if scripted else []),
        ),
    )


def tools(request: HttpRequest) -> HttpResponse:
    """The MCP servers whose tools the owner's agents may use: its own, each with its tools,
    Test (POST /api/mcp-servers/:id/refresh) and Remove, and the form that adds one (POST
    /api/mcp-servers); then the site's, read-only. A header's name is shown, never its value."""
    servers = selectors.mcp_servers(owner=request.user)
    return TemplateResponse(
        request,
        "dashboard/tools.html",
        _context(
            request,
            title="Tools",
            own=[s for s in servers if s["offered_by"] == "owner"],
            offered=[s for s in servers if s["offered_by"] != "owner"],
        ),
    )


def mcp_server_tools(request: HttpRequest, server_id: int) -> HttpResponse:
    """One of the owner's MCP servers' tools alone, for the Tools page's script to show again
    after Test; another owner's server is a 404."""
    server = next(
        (s for s in selectors.mcp_servers(owner=request.user) if s["id"] == server_id), None
    )
    if server is None:
        raise Http404("No such MCP server.")
    return TemplateResponse(request, "dashboard/_mcp_tools.html", {"server": server})


def tokens(request: HttpRequest) -> HttpResponse:
    """The owner's live access tokens (never the tokens themselves) and the form that makes
    one; the new token is shown once, by the page's script."""
    return TemplateResponse(
        request,
        "dashboard/tokens.html",
        _context(
            request,
            title="Access tokens",
            tokens=AccessToken.objects.filter(owner=request.user, revoked_at__isnull=True),
        ),
    )


DOCUMENTS_SHOWN = 200


def documents(request: HttpRequest) -> HttpResponse:
    """The owner's documents, newest first, with Delete (DELETE /api/artifacts/:id from the
    page's script), and their storage against GARDEN_MAX_STORAGE_BYTES_PER_OWNER."""
    rows = list(owner_artifacts(owner_id=request.user.pk)[: DOCUMENTS_SHOWN + 1])
    return TemplateResponse(
        request,
        "dashboard/documents.html",
        _context(
            request,
            title="Documents",
            artifacts=[artifact_payload(a) for a in rows[:DOCUMENTS_SHOWN]],
            more=len(rows) > DOCUMENTS_SHOWN,
            usage=storage_usage(owner_id=request.user.pk).to_json(),
        ),
    )


def usage(request: HttpRequest) -> HttpResponse:
    """The owner's calls, tokens and cost per UTC day (theirs alone: their groups' and their
    agents' rooms'), for the days asked (``since``, ``until``), or as CSV (``format=csv``)."""
    try:
        since, until = usage_range(request.GET.get("since"), request.GET.get("until"))
    except ValueError as exc:
        return TemplateResponse(
            request,
            "dashboard/usage.html",
            _context(request, title="Usage and cost", error=str(exc), days=[]),
            status=400,
        )
    days = usage_by_owner_day(owner_id=request.user.pk, since=since, until=until)
    if request.GET.get("format") == "csv":
        response = HttpResponse(usage_csv(days, owners=False), content_type="text/csv")
        response["Content-Disposition"] = content_disposition_header(
            as_attachment=True, filename=f"garden-usage-{since}-{until}.csv"
        )
        return response
    return TemplateResponse(
        request,
        "dashboard/usage.html",
        _context(
            request,
            title="Usage and cost",
            days=days,
            since=since,
            until=until,
            totals=usage_totals(days),
        ),
    )


def telegram(request: HttpRequest) -> HttpResponse:
    """Link a Telegram chat for approvals: the page's script asks for a one-time code
    (POST /api/telegram/link-code) to send the bot as /start <code>, and can unlink."""
    return TemplateResponse(
        request,
        "dashboard/telegram.html",
        _context(
            request,
            title="Telegram",
            configured=telegram_configured(),
            link=link_get(owner=request.user),
            bot_username=bot_username(),
        ),
    )


def _group_or_404(request: HttpRequest, group_id: int) -> Group:
    group = group_get(owner=request.user, group_id=group_id)
    if group is None:
        raise Http404("No such group.")
    return group


def _room_data(
    request: HttpRequest,
    *,
    room_id: int,
    name: str,
    coordinator: int,
    members: list[Agent],
    api: str,
    socket: str,
    canvas: str,
    solo: bool = False,
) -> dict[str, Any]:
    """What a room's script starts from: the room, its members, the person and the URLs it
    talks to — a group's room and an agent's alike."""
    return {
        "solo": solo,
        "group": {
            "id": room_id,
            "name": name,
            "coordinator": coordinator,
            "members": [face(a) for a in members],
            # Members answering from an offline script: the room says so on their turns.
            "scripted": list(
                Agent.objects.filter(
                    pk__in=[a.pk for a in members],
                    model_account__provider=ModelAccount.Provider.SCRIPTED,
                ).values_list("pk", flat=True)
            ),
        },
        "owner": {"name": request.user.get_short_name() or request.user.get_username()},
        "urls": {
            "api": api,
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
    }


def room(request: HttpRequest, group_id: int) -> HttpResponse:
    group = _group_or_404(request, group_id)
    members = [m.agent for m in group.ordered_memberships]
    candidates = selectors.group_candidates(agent_list(owner=request.user))
    data = _room_data(
        request,
        room_id=group.pk,
        name=group.name,
        coordinator=group.coordinator_id,
        members=members,
        api=f"/api/groups/{group.pk}",
        socket=f"/ws/groups/{group.pk}/",
        canvas=reverse("dashboard:canvas", args=[group.pk]),
    )
    return TemplateResponse(
        request,
        "dashboard/room.html",
        _context(
            request,
            title=group.name,
            group=group,
            members=members,
            candidates=candidates,
            member_ids=[a.pk for a in members],
            artifacts=selectors.canvas_versions(
                selectors.group_artifacts(owner=request.user, group=group)
            ),
            attachment_accept=ACCEPT,
            room_data=data,
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


def agent_room(request: HttpRequest, agent_id: int) -> HttpResponse:
    """The room of one agent: the person's latest open 1:1 conversation with it (a first one
    made here), on the same room page as a group's — its messages run on the group loop in
    the agent's own room (groups.services.requests.conversation_request_create)."""
    agent = _agent_or_404(request, agent_id)
    conversation = agent_conversation_open(owner=request.user, agent=agent)
    room = solo_room_for(agent_id=agent.pk)
    data = _room_data(
        request,
        room_id=room.pk,
        name=agent.name,
        coordinator=agent.pk,
        members=[agent],
        api=f"/api/conversations/{conversation.pk}",
        socket=f"/ws/conversations/{conversation.pk}/",
        canvas=reverse("dashboard:agent_canvas", args=[agent.pk]),
        solo=True,
    )
    return TemplateResponse(
        request,
        "dashboard/room.html",
        _context(
            request,
            title=agent.name,
            solo=True,
            agent=agent,
            group={"name": agent.name},
            members=[agent],
            artifacts=selectors.canvas_versions(
                selectors.group_artifacts(owner=request.user, conversation_id=conversation.pk)
            ),
            attachment_accept=ACCEPT,
            room_data=data,
        ),
    )


def agent_canvas(request: HttpRequest, agent_id: int) -> HttpResponse:
    """The Canvas list of the agent's room alone, for the room's script to refresh."""
    agent = _agent_or_404(request, agent_id)
    conversation = agent_conversation_open(owner=request.user, agent=agent)
    return TemplateResponse(
        request,
        "dashboard/_canvas_list.html",
        {
            "artifacts": selectors.canvas_versions(
                selectors.group_artifacts(owner=request.user, conversation_id=conversation.pk)
            ),
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
                selectors.group_artifacts(owner=request.user, group=group)
            ),
        },
    )


WEBHOOK_DELIVERIES_SHOWN = 10


def webhooks(request: HttpRequest) -> HttpResponse:
    """The owner's webhook endpoints, each with its state (a disabled one says why, at the top
    of the page too), its latest deliveries and their attempts; the form that adds one (POST
    /api/webhooks; the secret is shown once, by the page's script), Test, Rotate secret,
    Enable and Remove. The secret itself is never rendered."""
    endpoints = list(webhook_endpoint_list(owner=request.user))
    for endpoint in endpoints:
        endpoint.recent = webhook_delivery_list(endpoint=endpoint, limit=WEBHOOK_DELIVERIES_SHOWN)
    return TemplateResponse(
        request,
        "dashboard/webhooks.html",
        _context(
            request,
            title="Webhooks",
            endpoints=endpoints,
            disabled=[e for e in endpoints if not e.enabled],
            events=WEBHOOK_EVENTS,
            groups=group_list(owner=request.user),
            limit=settings.GARDEN_MAX_WEBHOOKS_PER_OWNER,
        ),
    )
