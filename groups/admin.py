"""Django admin for groups (edited under the same rule set as the API) and, read-only, their
requests and call reservations, with usage and cost per owner and day."""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.http import content_disposition_header

from garden.admin_base import ReadOnlyAdmin
from garden.models import Agent
from groups import rules, selectors
from groups.models import (
    CallReservation,
    Group,
    GroupRequest,
    Membership,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from groups.services.groups import group_check_change, group_update


class DeletedListFilter(admin.SimpleListFilter):
    """Deleted groups are hidden unless staff ask for them."""

    title = "deleted"
    parameter_name = "deleted"

    def lookups(self, request, model_admin):
        return (("no", "No"), ("yes", "Yes"))

    def queryset(self, request, queryset):
        return queryset.filter(deleted_at__isnull=self.value() != "yes")

    def choices(self, changelist):
        for lookup, title in self.lookup_choices:
            yield {
                "selected": (self.value() or "no") == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }


class StateListFilter(admin.SimpleListFilter):
    title = "archived"
    parameter_name = "archived"

    def lookups(self, request, model_admin):
        return (("no", "No"), ("yes", "Yes"))

    def queryset(self, request, queryset):
        if self.value() in ("no", "yes"):
            return queryset.filter(archived_at__isnull=self.value() == "no")
        return queryset


class MembershipInline(admin.TabularInline):
    model = Membership
    fields = ["position", "agent", "added_at"]
    readonly_fields = ["added_at"]
    ordering = ["position", "id"]
    extra = 1

    def get_formset(self, request, obj=None, **kwargs):
        self._owner_id = obj.owner_id if obj is not None else None
        return super().get_formset(request, obj, **kwargs)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "agent" and getattr(self, "_owner_id", None) is not None:
            # Removed agents and the maker are listed so the rules can say why they are refused.
            kwargs["queryset"] = Agent.objects.filter(owner_id=self._owner_id)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class GroupAdminForm(forms.ModelForm):
    """Name and coordinator here, membership in the inline; ``clean`` runs the rule set on the
    resulting group and attaches each refusal to its field (members' to the form)."""

    # The rule set decides about blank and long names, with its own messages.
    name = forms.CharField(required=False, strip=False, widget=forms.TextInput(attrs={"size": 60}))
    membership_formset: type | None = None

    class Meta:
        model = Group
        fields = ["name", "coordinator", "room_cap_chars"]
        help_texts = {
            "room_cap_chars": "Characters of the room sent with each call; longer threads are "
            "bounded to it or rolled over into a summary."
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk and "coordinator" in self.fields:
            self.fields["coordinator"].queryset = Agent.objects.filter(
                owner_id=self.instance.owner_id
            )
        self.resolved: rules.GroupShape | None = None

    def _posted_members(self) -> list[int] | None:
        """The membership the inline asks for, in order; None when it was not posted or is
        itself invalid (its own errors then show on the inline)."""
        formset_class = self.membership_formset
        if formset_class is None or not self.is_bound:
            return None
        prefix = formset_class.get_default_prefix()
        if f"{prefix}-TOTAL_FORMS" not in self.data:
            return None
        formset = formset_class(self.data, self.files, instance=self.instance, prefix=prefix)
        if not formset.is_valid():
            return None
        rows = []
        for index, form in enumerate(formset.forms):
            data = form.cleaned_data
            if not data or data.get("DELETE") or data.get("agent") is None:
                continue
            rows.append((data.get("position") or 0, index, data["agent"].pk))
        return [agent_id for _, _, agent_id in sorted(rows)]

    def clean(self):
        cleaned = super().clean()
        if not self.instance.pk:
            return cleaned
        coordinator = cleaned.get("coordinator")
        _, result = group_check_change(
            group=self.instance,
            name=cleaned.get("name", ""),
            members=self._posted_members(),
            coordinator=coordinator.pk if coordinator else None,
        )
        cap_errors = rules.check_room_cap(
            cleaned.get("room_cap_chars"), maximum=settings.GARDEN_MAX_ROOM_CAP_CHARS
        )
        for error in [*result.errors, *cap_errors]:
            field = error.field if error.field in self.fields else None
            self.add_error(field, forms.ValidationError(error.message, code=error.code))
        self.resolved = result.shape
        return cleaned


@admin.register(Group)
class GroupAdmin(admin.ModelAdmin):
    form = GroupAdminForm
    list_display = ["name", "owner", "member_handles", "coordinator", "state", "created_at"]
    list_filter = [DeletedListFilter, StateListFilter]
    search_fields = ["name", "owner__username"]
    readonly_fields = [
        "owner",
        "state",
        "created_at",
        "updated_at",
        "archived_at",
        "deleted_at",
    ]
    fields = ["name", "coordinator", "room_cap_chars", *readonly_fields]
    inlines = [MembershipInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Group]:
        ordered = Membership.objects.select_related("agent").order_by("position", "id")
        return (
            super()
            .get_queryset(request)
            # An agent's own room is not a group to manage: its requests are under Requests.
            .filter(kind=Group.Kind.TEAM)
            .select_related("owner", "coordinator")
            .prefetch_related(
                Prefetch("memberships", queryset=ordered, to_attr="ordered_memberships")
            )
        )

    @admin.display(description="members")
    def member_handles(self, group: Group) -> str:
        memberships = getattr(group, "ordered_memberships", None) or group.memberships.all()
        return ", ".join(f"@{m.agent.handle}" for m in memberships)

    @admin.display(description="state")
    def state(self, group: Group) -> str:
        if group.deleted_at:
            return "deleted"
        return "archived" if group.archived_at else "active"

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        formset = MembershipInline(self.model, self.admin_site).get_formset(request, obj)
        return type(form.__name__, (form,), {"membership_formset": formset})

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Groups are created by their owner, whose Concierge coordinates by default.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Group | None = None) -> bool:
        # Deletion is the owner's, with a minute of undo; the admin never hard-deletes.
        return False

    def has_change_permission(self, request: HttpRequest, obj: Group | None = None) -> bool:
        if obj is not None and obj.deleted_at is not None:
            return False
        return super().has_change_permission(request, obj)

    def save_model(self, request, obj: Group, form: GroupAdminForm, change: bool) -> None:
        shape = form.resolved
        group_update(
            group=obj,
            name=shape.name,
            members=list(shape.members),
            coordinator=shape.coordinator,
            room_cap_chars=form.cleaned_data.get("room_cap_chars"),
        )

    def save_formset(self, request, form, formset, change) -> None:
        if formset.model is Membership:
            # group_update already wrote the membership; this only records what changed.
            formset.save(commit=False)
            return
        super().save_formset(request, form, formset, change)


class CallReservationInline(admin.TabularInline):
    model = CallReservation
    fields = [
        "purpose",
        "agent",
        "fence",
        "attempt",
        "status",
        "reason",
        "model",
        "input_tokens",
        "output_tokens",
        "cost",
        "created_at",
        "finished_at",
    ]
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
    list_display = [
        "id",
        "request",
        "purpose",
        "agent",
        "attempt",
        "status",
        "reason",
        "provider",
        "model",
        "input_tokens",
        "output_tokens",
        "cost",
        "created_at",
        "finished_at",
    ]
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


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    fields = ["number", "at", "status", "error", "duration_ms"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyAdmin):
    """Owners' endpoints; the signing secret is never shown, even encrypted."""

    list_display = [
        "id",
        "owner",
        "group",
        "url",
        "events",
        "named_only",
        "enabled",
        "consecutive_failures",
        "disabled_reason",
        "created_at",
    ]
    list_filter = ["enabled", "named_only"]
    search_fields = ["url", "owner__username", "description"]
    list_select_related = ["owner", "group"]
    exclude = ["secret_encrypted"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "endpoint",
        "event_type",
        "event_id",
        "state",
        "attempts",
        "last_status",
        "next_attempt_at",
        "created_at",
        "finished_at",
    ]
    list_filter = ["state", "event_type"]
    search_fields = ["event_id"]
    list_select_related = ["endpoint"]
    inlines = [WebhookAttemptInline]
