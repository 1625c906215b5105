"""The roster (the index: the owner's agents and groups), the agents page and an agent's
settings page."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from dashboard import selectors
from dashboard.views.context import page_context
from garden.models import Agent
from garden.selectors import agent_list, model_account_list
from garden.services.agents import agent_next_colour, assignable_tools
from garden.tools import is_sourced
from groups.domain.rules import ROOM_CAP_MIN_CHARS
from groups.models import DEFAULT_ROOM_CAP_CHARS, MEMORY_SENTENCE, Group
from groups.selectors import group_list
from groups.services.groups import purge_due_groups_on_read


def roster(request: HttpRequest) -> HttpResponse:
    purge_due_groups_on_read(owner=request.user)
    agents = list(agent_list(owner=request.user))
    concierge = next((a for a in agents if a.builtin == Agent.Builtin.CONCIERGE), None)
    groups = list(group_list(person=request.user))
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
        page_context(
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
        page_context(
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
        page_context(
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
