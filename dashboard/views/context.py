"""What every page of the dashboard renders with: its site's context (the admin's header, the
user menu) and the page's own."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def page_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    """The site's context (the site set itself on the request: DashboardSite.admin_view), with
    the page's own."""
    return {**request.dashboard_site.each_context(request), **extra}
