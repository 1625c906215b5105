"""URL configuration: the admin, the API under /api, the OpenAPI schema, Telegram's webhook."""

from django.contrib import admin
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from dashboard.site import site as dashboard_site
from garden.api.metrics import metrics_view

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="dashboard:index", permanent=False)),
    # Browsers ask for /favicon.ico whatever a page links.
    path(
        "favicon.ico",
        lambda request: HttpResponsePermanentRedirect(static("dashboard/favicon.svg")),
    ),
    path("dashboard/", dashboard_site.urls),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/", include("missions.api.urls")),
    path("api/", include("groups.api.urls")),
    path("api/", include("groups.api.request_urls")),
    path("api/", include("garden.api.urls")),
    path("api/", include("telegram_approvals.api.urls")),
    path("api/", include("notifications.api.urls")),
    path("telegram/", include("telegram_approvals.urls")),
    path("metrics", metrics_view, name="metrics"),
]
