"""GET /metrics: this host's Prometheus samples (web and the workers sharing its
GARDEN_METRICS_DIR) and the figures read from the database, for the bearer of
GARDEN_METRICS_TOKEN alone (a client address that keeps guessing it is held off: 429).
Unset, there is no such page."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from garden import metrics_exposition
from garden.attempts import client_address


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not settings.GARDEN_METRICS_TOKEN:
        raise Http404()
    refusal = metrics_exposition.bearer_refusal(
        request.headers.get("Authorization"), address=client_address(request.META)
    )
    if refusal is not None:
        response = HttpResponse(status=refusal.status)
        if refusal.status == 401:
            response["WWW-Authenticate"] = "Bearer"
        if refusal.retry_after:
            response["Retry-After"] = str(refusal.retry_after)
        return response
    return HttpResponse(
        metrics_exposition.exposition(), content_type=metrics_exposition.CONTENT_TYPE
    )
