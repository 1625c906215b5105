"""URL configuration: the admin, the API under /api, the OpenAPI schema."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from dashboard.site import site as dashboard_site

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="dashboard:index", permanent=False)),
    path("dashboard/", dashboard_site.urls),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/", include("missions.api.urls")),
    path("api/", include("groups.api.urls")),
    path("api/", include("groups.api.request_urls")),
    path("api/", include("garden.api.urls")),
]
