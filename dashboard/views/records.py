"""What the owner keeps and spends: their documents against the storage limit, and their
calls, tokens and cost per day."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.http import content_disposition_header

from dashboard import selectors
from dashboard.views.context import page_context
from garden.api.artifacts import artifact_payload
from garden.storage import owner_artifacts, storage_usage
from groups.selectors import usage_by_owner_day, usage_csv, usage_range, usage_totals

DOCUMENTS_SHOWN = 200


def documents(request: HttpRequest) -> HttpResponse:
    """The owner's documents, newest first, with Delete (DELETE /api/artifacts/:id from the
    page's script), and their storage against GARDEN_MAX_STORAGE_BYTES_PER_OWNER."""
    rows = list(owner_artifacts(owner_id=request.user.pk)[: DOCUMENTS_SHOWN + 1])
    return TemplateResponse(
        request,
        "dashboard/documents.html",
        page_context(
            request,
            title="Documents",
            artifacts=[artifact_payload(a) for a in rows[:DOCUMENTS_SHOWN]],
            more=len(rows) > DOCUMENTS_SHOWN,
            usage=storage_usage(owner_id=request.user.pk).to_json(),
        ),
    )


# A download is a file to keep, never a page to run: no script, no plugin, nothing fetched.
DOWNLOAD_POLICY = "default-src 'none'; sandbox"


def document_download(request: HttpRequest, artifact_id: int) -> HttpResponse:
    """One of the owner's documents (or files, or charts) as a file to save, under its title
    and media type; another owner's, or none, is a 404."""
    found = selectors.artifact_download(owner=request.user, artifact_id=artifact_id)
    if found is None:
        raise Http404("No such document.")
    name, mime, data = found
    text = mime.startswith("text/") or mime.endswith("json")
    response = HttpResponse(data, content_type=f"{mime}; charset=utf-8" if text else mime)
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=name)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = DOWNLOAD_POLICY
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    response["Cache-Control"] = "private, no-store"
    return response


def usage(request: HttpRequest) -> HttpResponse:
    """The owner's calls, tokens and cost per UTC day (theirs alone: their groups' and their
    agents' rooms'), for the days asked (``since``, ``until``), or as CSV (``format=csv``)."""
    try:
        since, until = usage_range(request.GET.get("since"), request.GET.get("until"))
    except ValueError as exc:
        return TemplateResponse(
            request,
            "dashboard/usage.html",
            page_context(request, title="Usage and cost", error=str(exc), days=[]),
            status=400,
        )
    days = usage_by_owner_day(owner_id=request.user.pk, since=since, until=until)
    if request.GET.get("format") == "csv":
        response = HttpResponse(usage_csv(days, owners=False), content_type="text/csv")
        response["Content-Disposition"] = content_disposition_header(
            as_attachment=True, filename=f"garden-usage-{since}-{until}.csv"
        )
        return response
    return TemplateResponse(
        request,
        "dashboard/usage.html",
        page_context(
            request,
            title="Usage and cost",
            days=days,
            since=since,
            until=until,
            totals=usage_totals(days),
        ),
    )
