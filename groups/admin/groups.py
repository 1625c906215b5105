"""The groups admin: a group's name, coordinator, room cap and members edited under the same
rule set as the API (``groups.domain.rules``), written through ``group_update``; deleted
groups are hidden unless asked for, and never deleted here."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest

from garden.models import Agent
from groups.domain import rules
from groups.models import Group, Membership
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
