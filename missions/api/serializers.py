"""Input and output serializers of the missions API."""

from __future__ import annotations

import zoneinfo
from typing import Any

from django_celery_beat import validators as cron
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from garden.api.errors import ErrorOutput
from missions.models import Mission, MissionRun
from missions.selectors import mission_last_run
from missions.services.checks import MAX_ID
from missions.services.schedules import (
    CRONTAB_FIELDS,
    MAX_EVERY_SECONDS,
    MIN_EVERY_SECONDS,
    Schedule,
)

# Seconds per IntervalSchedule period, for schedules staff set in the beat admin.
_PERIOD_SECONDS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "microseconds": 1e-6}


class ScheduleInput(serializers.Serializer):
    """``every_seconds``, or crontab fields (each ``*`` when left out) with a time zone."""

    every_seconds = serializers.IntegerField(
        required=False, min_value=MIN_EVERY_SECONDS, max_value=MAX_EVERY_SECONDS
    )
    minute = serializers.CharField(
        required=False, max_length=240, validators=[cron.minute_validator]
    )
    hour = serializers.CharField(required=False, max_length=96, validators=[cron.hour_validator])
    day_of_week = serializers.CharField(
        required=False, max_length=64, validators=[cron.day_of_week_validator]
    )
    day_of_month = serializers.CharField(
        required=False, max_length=124, validators=[cron.day_of_month_validator]
    )
    month_of_year = serializers.CharField(
        required=False, max_length=64, validators=[cron.month_of_year_validator]
    )
    timezone = serializers.CharField(
        required=False, max_length=63, help_text="An IANA time zone; UTC when left out."
    )

    def validate_timezone(self, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except Exception as exc:  # any name ZoneInfo cannot load is not a time zone
            raise serializers.ValidationError("Not a known time zone.", code="invalid") from exc
        return value


def schedule_from(data: dict[str, Any]) -> Schedule:
    """The validated schedule input as a Schedule; raises on neither or both kinds."""
    crontab = {name: data[name] for name in (*CRONTAB_FIELDS, "timezone") if name in data}
    if "every_seconds" in data and crontab:
        raise serializers.ValidationError(
            "Give every_seconds or crontab fields, not both.", code="SCHEDULE_CONFLICT"
        )
    if "every_seconds" in data:
        return Schedule(every_seconds=data["every_seconds"])
    if not any(name in crontab for name in CRONTAB_FIELDS):
        raise serializers.ValidationError(
            "Give every_seconds or at least one crontab field.", code="SCHEDULE_EMPTY"
        )
    return Schedule(**crontab)


class MissionCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    prompt = serializers.CharField(
        max_length=20_000, help_text="Posted on the owner's behalf at every due run."
    )
    target_type = serializers.ChoiceField(choices=Mission.TargetType.choices)
    target_id = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, help_text="The id of the owner's agent or group."
    )
    schedule = ScheduleInput()
    enabled = serializers.BooleanField(required=False, default=True)
    origin_conversation = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=MAX_ID,
        help_text="Where the owner asked for it; its recently_concluded notes go there.",
    )

    def validate_schedule(self, value: dict[str, Any]) -> Schedule:
        return schedule_from(value)


class MissionChangeInput(serializers.Serializer):
    """Every part is optional; what is left out stays as it is. ``target_type`` and
    ``target_id`` go together; ``origin_conversation: null`` clears the origin."""

    name = serializers.CharField(required=False, max_length=100)
    prompt = serializers.CharField(required=False, max_length=20_000)
    target_type = serializers.ChoiceField(required=False, choices=Mission.TargetType.choices)
    target_id = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    schedule = ScheduleInput(required=False)
    enabled = serializers.BooleanField(required=False)
    origin_conversation = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_ID
    )

    def validate_schedule(self, value: dict[str, Any]) -> Schedule:
        return schedule_from(value)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("target_type" in data) != ("target_id" in data):
            missing = "target_id" if "target_type" in data else "target_type"
            raise serializers.ValidationError(
                {
                    missing: serializers.ErrorDetail(
                        "Give target_type and target_id together.", code="TARGET_INCOMPLETE"
                    )
                }
            )
        return data


class ScheduleOutput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["interval", "crontab", "other"])
    every_seconds = serializers.IntegerField(allow_null=True)
    minute = serializers.CharField(allow_null=True)
    hour = serializers.CharField(allow_null=True)
    day_of_week = serializers.CharField(allow_null=True)
    day_of_month = serializers.CharField(allow_null=True)
    month_of_year = serializers.CharField(allow_null=True)
    timezone = serializers.CharField(allow_null=True)
    description = serializers.CharField()


def schedule_payload(mission: Mission) -> dict[str, Any] | None:
    task = mission.periodic_task
    if task is None:
        return None
    out: dict[str, Any] = {
        "kind": "other",
        "every_seconds": None,
        "timezone": None,
        **dict.fromkeys(CRONTAB_FIELDS),
        "description": "",
    }
    if task.interval is not None:
        seconds = task.interval.every * _PERIOD_SECONDS.get(task.interval.period, 1)
        out.update(kind="interval", every_seconds=int(seconds), description=str(task.interval))
    elif task.crontab is not None:
        out.update(
            kind="crontab",
            timezone=str(task.crontab.timezone),
            description=str(task.crontab),
            **{name: getattr(task.crontab, name) for name in CRONTAB_FIELDS},
        )
    else:
        out["description"] = str(task.schedule) if (task.solar or task.clocked) else ""
    return out


class TargetOutput(serializers.Serializer):
    type = serializers.CharField()
    id = serializers.IntegerField()
    name = serializers.CharField()


class MissionRunOutput(serializers.ModelSerializer):
    run = serializers.SlugRelatedField(slug_field="run_id", read_only=True, allow_null=True)

    class Meta:
        model = MissionRun
        fields = [
            "id",
            "mission",
            "state",
            "trigger",
            "outcome_code",
            "outcome",
            "skipped_reason",
            "goal",
            "run",
            "group_request",
            "conversation",
            "owner_message",
            "report_state",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields


class MissionOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    prompt = serializers.CharField()
    target_type = serializers.CharField()
    target = serializers.SerializerMethodField()
    schedule = serializers.SerializerMethodField()
    periodic_task = serializers.IntegerField(source="periodic_task_id", allow_null=True)
    enabled = serializers.BooleanField()
    disabled_reason = serializers.CharField()
    origin_conversation = serializers.IntegerField(source="origin_conversation_id", allow_null=True)
    conversation = serializers.IntegerField(
        source="conversation_id",
        allow_null=True,
        help_text="Agent missions: the 1:1 conversation the runs post to, as the owner.",
    )
    last_run = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(TargetOutput)
    def get_target(self, mission: Mission) -> dict[str, Any]:
        target = mission.target
        return {"type": mission.target_type, "id": target.pk, "name": target.name}

    @extend_schema_field(ScheduleOutput(allow_null=True))
    def get_schedule(self, mission: Mission) -> dict[str, Any] | None:
        return schedule_payload(mission)

    @extend_schema_field(MissionRunOutput(allow_null=True))
    def get_last_run(self, mission: Mission) -> dict[str, Any] | None:
        run = mission_last_run(mission)
        return MissionRunOutput(run).data if run is not None else None


class MissionRunRefusedOutput(ErrorOutput):
    """A run-now that was recorded as skipped: the error, and the skipped run."""

    mission_run = MissionRunOutput()
