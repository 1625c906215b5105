"""The search page: the person's turns holding the words they typed (GET /api/search's payload,
rendered), each a link to its room at the turn; older results a page at a time."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from dashboard.views.context import page_context
from garden.api.throttles import OwnerRateThrottle, OwnerThrottled
from garden.errors import ServiceError, is_row_id
from groups.api.search import SearchApi, search_payload

RESULTS_SHOWN = 20


def search(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "")
    before = request.GET.get("before", "")
    wanted = before.isascii() and before.isdigit() and is_row_id(int(before))
    before_id = int(before) if wanted else None
    found, error, status = None, "", 200
    if q.strip():
        try:
            # The API's rate, shared with it: the page is no way round it.
            OwnerRateThrottle().allow_request(request, SearchApi)
            found = search_payload(owner=request.user, q=q, limit=RESULTS_SHOWN, before=before_id)
        except ServiceError as refusal:
            error = refusal.message
        except OwnerThrottled as throttled:
            error, status = str(throttled.detail), 429
    return TemplateResponse(
        request,
        "dashboard/search.html",
        page_context(request, title="Search", q=q, found=found, error=error, before=before_id),
        status=status,
    )
