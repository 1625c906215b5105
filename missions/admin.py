"""Django admin for staff: missions (name, prompt and enabled edited through the service, the
schedule edited on its beat entry, linked) and, read-only, their runs."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from garden.admin_base import ReadOnlyAdmin
from garden.errors import ServiceError

from .models import Mission, MissionRun
from .selectors import mission_last_run
from .services.checks import check_target
from .services.missions import mission_update
from .services.runs import mission_run_due


def _link(obj, label: str | None = None) -> str:
    if obj is None:
        return "—"
    meta = obj._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label or str(obj))


class MissionRunInline(admin.TabularInline):
    model = MissionRun
    fields = [
        "id",
        "state",
        "trigger",
        "outcome_code",
        "skipped_reason",
        "report_state",
        "created_at",
        "finished_at",
    ]
    readonly_fields = fields
    ordering = ["-id"]
    extra = 0
    max_num = 0
    show_change_link = True
    can_delete = False


class MissionAdminForm(forms.ModelForm):
    """Re-enabling asks what the API asks: is the target still there?"""

    class Meta:
        model = Mission
        fields = ["name", "prompt", "enabled"]

    def clean(self):
        data = super().clean()
        mission = self.instance
        if data.get("enabled") and mission.pk and not mission.enabled:
            try:
                check_target(
                    owner=mission.owner,
                    target_type=mission.target_type,
                    target_id=mission.target_agent_id or mission.target_group_id,
                )
            except ServiceError as exc:
                self.add_error("enabled", f"{exc.message} ({exc.code})")
        return data


@admin.register(Mission)
class MissionAdmin(admin.ModelAdmin):
    form = MissionAdminForm
    list_display = [
        "name",
        "owner",
        "target_type",
        "target_display",
        "enabled",
        "schedule_link",
        "last_run",
        "disabled_reason",
    ]
    list_filter = ["enabled", "target_type"]
    search_fields = ["name", "owner__username"]
    fields = [
        "name",
        "prompt",
        "enabled",
        "disabled_reason",
        "owner",
        "target_type",
        "target_agent",
        "target_group",
        "schedule_link",
        "origin_conversation",
        "conversation",
        "last_run",
        "created_at",
        "updated_at",
    ]
    # Staff change what a mission says and whether it runs; the rest is the services' to set.
    readonly_fields = [f for f in fields if f not in ("name", "prompt", "enabled")]
    inlines = [MissionRunInline]
    actions = ["run_now"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Mission]:
        latest = MissionRun.objects.order_by("-id")[:1]
        return (
            super()
            .get_queryset(request)
            .select_related(
                "owner",
                "target_agent",
                "target_group",
                "periodic_task__interval",
                "periodic_task__crontab",
            )
            .prefetch_related(Prefetch("runs", queryset=latest, to_attr="latest_runs"))
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A mission is created with its target checked and its beat entry: through the API.
        return False

    @admin.display(description="target")
    def target_display(self, mission: Mission) -> str:
        return _link(mission.target)

    @admin.display(description="schedule")
    def schedule_link(self, mission: Mission) -> str:
        task = mission.periodic_task
        if task is None:
            return "— (no beat entry: runs only on demand)"
        schedule = task.interval or task.crontab or task.solar or task.clocked
        return _link(task, f"{schedule} ({'enabled' if task.enabled else 'disabled'})")

    @admin.display(description="last run")
    def last_run(self, mission: Mission) -> str:
        run = mission_last_run(mission)
        if run is None:
            return "—"
        return _link(run, f"{run.state} · {run.created_at:%Y-%m-%d %H:%M}")

    def save_model(self, request: HttpRequest, obj: Mission, form, change: bool) -> None:
        # Through the service, so the beat entry follows "enabled" and its name the mission's.
        try:
            mission_update(
                mission=obj,
                name=form.cleaned_data["name"],
                prompt=form.cleaned_data["prompt"],
                enabled=form.cleaned_data["enabled"],
            )
        except ServiceError as exc:  # the target went away between the form and the save
            self.message_user(request, f"Not saved: {exc.message} ({exc.code})", messages.ERROR)

    @admin.action(description="Run now")
    def run_now(self, request: HttpRequest, queryset: QuerySet[Mission]) -> None:
        for mission in queryset:
            run = mission_run_due(mission_id=mission.pk, trigger=MissionRun.Trigger.MANUAL)
            if run is None:
                continue
            level = messages.WARNING if run.state == MissionRun.State.SKIPPED else messages.INFO
            detail = f": {run.skipped_reason}" if run.skipped_reason else ""
            self.message_user(request, f"{mission}: run {run.pk} {run.state}{detail}", level)


@admin.register(MissionRun)
class MissionRunAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "mission",
        "state",
        "trigger",
        "outcome_code",
        "report_state",
        "created_at",
        "finished_at",
    ]
    list_filter = ["state", "trigger", "report_state"]
    search_fields = ["mission__name", "outcome_code", "skipped_reason"]
    list_select_related = ["mission"]

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        return [field.name for field in self.model._meta.fields]
