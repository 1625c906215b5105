"""The requests admin, read-only: group requests with their call reservations, the
reservations themselves, and the usage page (calls, tokens and cost per owner and UTC day, or
as CSV)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.http import content_disposition_header

from garden.admin_base import ReadOnlyAdmin
from groups import selectors
from groups.models import CallReservation, GroupRequest

# A reservation's columns, in the request's inline and on the reservations' own list alike.
RESERVATION_FIELDS = [
    *("purpose", "agent", "fence", "attempt", "status", "reason", "provider", "model"),
    *("input_tokens", "output_tokens", "cost", "created_at", "finished_at"),
]


class CallReservationInline(admin.TabularInline):
    model = CallReservation
    fields = RESERVATION_FIELDS
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(GroupRequest)
class GroupRequestAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "group",
        "source",
        "state",
        "working_reserved",
        "synthesis_reserved",
        "maintenance_reserved",
        "fence",
        "cost",
        "unpriced_calls",
        "outcome_code",
        "created_at",
        "finished_at",
    ]
    list_filter = ["state", "source"]
    search_fields = ["group__name", "outcome_code"]
    list_select_related = ["group"]
    inlines = [CallReservationInline]


@admin.register(CallReservation)
class CallReservationAdmin(ReadOnlyAdmin):
    list_display = ["id", "request", *(f for f in RESERVATION_FIELDS if f != "fence")]
    list_filter = ["purpose", "status", "provider"]
    list_select_related = ["request", "agent"]

    def get_urls(self):
        usage = path(
            "usage/",
            self.admin_site.admin_view(self.usage_view),
            name="groups_callreservation_usage",
        )
        return [usage, *super().get_urls()]

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        """Calls, tokens and cost per owner per UTC day, for the days asked (``since``,
        ``until``) and optionally one owner (``owner``, a username), or as CSV
        (``format=csv``)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        template = "admin/groups/callreservation/usage.html"
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Usage and cost by owner and day",
            "owner": request.GET.get("owner", "").strip(),
        }
        try:
            since, until = selectors.usage_range(request.GET.get("since"), request.GET.get("until"))
        except ValueError as exc:
            return TemplateResponse(request, template, {**context, "error": str(exc)}, status=400)
        owner_id = None
        if context["owner"]:
            found = get_user_model().objects.filter(username=context["owner"]).first()
            if found is None:
                error = f"No user is named {context['owner']!r}."
                return TemplateResponse(request, template, {**context, "error": error}, status=400)
            owner_id = found.pk
        days = selectors.usage_by_owner_day(owner_id=owner_id, since=since, until=until)
        if request.GET.get("format") == "csv":
            response = HttpResponse(selectors.usage_csv(days, owners=True), content_type="text/csv")
            response["Content-Disposition"] = content_disposition_header(
                as_attachment=True, filename=f"garden-usage-by-owner-{since}-{until}.csv"
            )
            return response
        shown = {
            "since": since,
            "until": until,
            **({"owner": found.get_username()} if owner_id else {}),
        }
        return TemplateResponse(
            request,
            template,
            {
                **context,
                **shown,
                "days": days,
                "totals": selectors.usage_totals(days),
                "csv_query": urlencode({**shown, "format": "csv"}),
            },
        )
