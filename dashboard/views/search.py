"""The search page: the person's turns holding the words they typed (GET /api/search's payload,
rendered), each a link to its room at the turn; older results a page at a time."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from dashboard.views.context import page_context
from garden.errors import ServiceError, is_row_id
from groups.api.search import search_payload

RESULTS_SHOWN = 20


def search(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "")
    before = request.GET.get("before", "")
    wanted = before.isascii() and before.isdigit() and is_row_id(int(before))
    before_id = int(before) if wanted else None
    found, error = None, ""
    if q.strip():
        try:
            found = search_payload(owner=request.user, q=q, limit=RESULTS_SHOWN, before=before_id)
        except ServiceError as refusal:
            error = refusal.message
    return TemplateResponse(
        request,
        "dashboard/search.html",
        page_context(request, title="Search", q=q, found=found, error=error, before=before_id),
    )
