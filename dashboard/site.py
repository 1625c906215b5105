"""The dashboard's admin site: any active signed-in person, for their own agents and groups.

Staff keep the ordinary /admin/. This site registers no models; its pages are the roster, the
agents page, an agent's page, the model accounts, the tools (MCP servers), the access tokens,
the webhooks, the documents, usage and cost, the Telegram link, notifications, search and a
group's room, all reads scoped to the signed-in owner; and, open to anyone, the page an
invitation's link opens.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest
from django.urls import URLPattern, path, reverse

from dashboard.views import join, records, rooms, roster, search, settings_pages


class DashboardSite(admin.AdminSite):
    site_header = "garden"
    site_title = "garden"
    index_title = "Your agents and groups"
    site_url = None
    enable_nav_sidebar = False
    # The admin's own form refuses non-staff; anyone active may use their dashboard.
    login_form = AuthenticationForm

    def has_permission(self, request: HttpRequest) -> bool:
        user = request.user
        return bool(user.is_active and user.is_authenticated)

    def each_context(self, request: HttpRequest) -> dict:
        # {% url 'admin:index' %} on this site's pages resolves to this site: the user menu's
        # link to the staff admin is named here.
        return {**super().each_context(request), "staff_admin_url": reverse("admin:index")}

    def admin_view(self, view, cacheable: bool = False):
        """Every page of this site knows its site (the views never import it): namespaced
        admin URLs in the templates resolve here, and the context is the site's."""

        def on_this_site(request: HttpRequest, *args, **kwargs):
            request.current_app = self.name
            request.dashboard_site = self
            return view(request, *args, **kwargs)

        return super().admin_view(on_this_site, cacheable)

    def public_view(self, view):
        """A page of this site for anyone, signed in or not (an invitation's link)."""

        def on_this_site(request: HttpRequest, *args, **kwargs):
            request.current_app = self.name
            request.dashboard_site = self
            return view(request, *args, **kwargs)

        return on_this_site

    def get_urls(self) -> list[URLPattern]:
        own = [
            path("join/<str:secret>/", self.public_view(join.join), name="join"),
            path("agents/", self.admin_view(roster.agents), name="agents"),
            path("agents/<int:agent_id>/", self.admin_view(roster.agent_detail), name="agent"),
            path(
                "agents/<int:agent_id>/room/", self.admin_view(rooms.agent_room), name="agent_room"
            ),
            path(
                "agents/<int:agent_id>/room/canvas",
                self.admin_view(rooms.agent_canvas),
                name="agent_canvas",
            ),
            path("accounts/", self.admin_view(settings_pages.accounts), name="accounts"),
            path("tools/", self.admin_view(settings_pages.tools), name="tools"),
            path(
                "tools/<int:server_id>/list",
                self.admin_view(settings_pages.mcp_server_tools),
                name="mcp_server_tools",
            ),
            path("tokens/", self.admin_view(settings_pages.tokens), name="tokens"),
            path("webhooks/", self.admin_view(settings_pages.webhooks), name="webhooks"),
            path("documents/", self.admin_view(records.documents), name="documents"),
            path("search/", self.admin_view(search.search), name="search"),
            path("usage/", self.admin_view(records.usage), name="usage"),
            path("telegram/", self.admin_view(settings_pages.telegram), name="telegram"),
            path(
                "notifications/",
                self.admin_view(settings_pages.notifications),
                name="notifications",
            ),
            path("groups/<int:group_id>/", self.admin_view(rooms.room), name="room"),
            path("groups/<int:group_id>/canvas", self.admin_view(rooms.canvas), name="canvas"),
            # Cacheable: the view sets its own private Cache-Control, so thumbnails are kept.
            path(
                "artifacts/<int:artifact_id>/file",
                self.admin_view(rooms.artifact_file, cacheable=True),
                name="artifact_file",
            ),
            path(
                "artifacts/<int:artifact_id>/download",
                self.admin_view(records.document_download),
                name="artifact_download",
            ),
        ]
        # Ours first: the admin ends its list with a catch-all.
        return own + super().get_urls()

    def index(self, request: HttpRequest, extra_context: dict | None = None):
        return roster.roster(request)


site = DashboardSite(name="dashboard")
