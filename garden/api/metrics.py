"""GET /metrics: this host's Prometheus samples (web and the workers sharing its
GARDEN_METRICS_DIR) and the figures read from the database, for the bearer of
GARDEN_METRICS_TOKEN alone. Unset, there is no such page."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from garden import metrics_exposition


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not settings.GARDEN_METRICS_TOKEN:
        raise Http404()
    authorization = request.headers.get("Authorization")
    if not authorization:
        response = HttpResponse(status=401)
        response["WWW-Authenticate"] = "Bearer"
        return response
    if not metrics_exposition.bearer_allowed(authorization):
        return HttpResponse(status=403)
    return HttpResponse(
        metrics_exposition.exposition(), content_type=metrics_exposition.CONTENT_TYPE
    )
