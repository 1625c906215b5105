"""The owner's settings pages: model accounts, tools (MCP servers), access tokens, webhooks,
the Telegram link for approvals and where replies notify. A secret (a key, a header's value,
a token, a webhook's secret) is never rendered."""

from __future__ import annotations

import json

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from dashboard import selectors
from dashboard.views.context import page_context
from garden.credentials import credentials_for
from garden.models import AccessToken, ModelAccount
from garden.selectors import account_key_status, model_account_list
from groups.selectors import group_list, webhook_delivery_list, webhook_endpoint_list
from groups.services.webhooks import EVENTS as WEBHOOK_EVENTS
from notifications.selectors import channels_get, notification_agents
from telegram_approvals.bot import configured as telegram_configured
from telegram_approvals.selectors import bot_username, link_get


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
        page_context(
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
        page_context(
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
        page_context(
            request,
            title="Access tokens",
            tokens=AccessToken.objects.filter(owner=request.user, revoked_at__isnull=True),
        ),
    )


def telegram(request: HttpRequest) -> HttpResponse:
    """Link a Telegram chat for approvals: the page's script asks for a one-time code
    (POST /api/telegram/link-code) to send the bot as /start <code>, and can unlink."""
    return TemplateResponse(
        request,
        "dashboard/telegram.html",
        page_context(
            request,
            title="Telegram",
            configured=telegram_configured(),
            link=link_get(owner=request.user),
            bot_username=bot_username(),
        ),
    )


def notifications(request: HttpRequest) -> HttpResponse:
    """Where the owner's agents' replies notify them (this browser, their linked Telegram
    chat) and a mute for each agent; the page's script saves each change (PUT
    /api/notifications) and asks the browser's permission when the button is pressed. No group
    is listed, and approvals have no control: they always notify."""
    return TemplateResponse(
        request,
        "dashboard/notifications.html",
        page_context(
            request,
            title="Notifications",
            chosen=channels_get(owner_id=request.user.pk),
            agents=notification_agents(owner=request.user),
            telegram_configured=telegram_configured(),
            link=link_get(owner=request.user),
        ),
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
        page_context(
            request,
            title="Webhooks",
            endpoints=endpoints,
            disabled=[e for e in endpoints if not e.enabled],
            events=WEBHOOK_EVENTS,
            groups=group_list(person=request.user),
            limit=settings.GARDEN_MAX_WEBHOOKS_PER_OWNER,
        ),
    )
