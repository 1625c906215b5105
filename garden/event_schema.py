"""The registry of live event types: each names the serializer of its payload, and an event is
checked against it, field by field, with no field left undeclared (Zulip's
``zerver/lib/event_schema.py`` rule: every event the code sends is validated by a test).

Apps register their event types from ``AppConfig.ready()``. ``garden.events`` checks every
event it is handed when ``GARDEN_CHECK_EVENTS`` (or ``DEBUG``) is on, as the test suite runs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_framework import serializers

_REGISTRY: dict[str, type[serializers.Serializer]] = {}


class EventSchemaError(ValueError):
    """An event whose type is not registered, or whose payload its serializer does not
    describe (a field missing, undeclared, or of another type)."""


def register_event_type(event_type: str, serializer: type[serializers.Serializer]) -> None:
    """``event_type``'s payload is described by ``serializer`` (whose ``type`` field names it)."""
    known = _REGISTRY.get(event_type)
    if known is not None and known is not serializer:
        raise ValueError(f"event type {event_type!r} is registered already, by {known.__name__}")
    _REGISTRY[event_type] = serializer


def event_types() -> dict[str, type[serializers.Serializer]]:
    """Every registered event type and the serializer of its payload."""
    return dict(_REGISTRY)


def check_event(event: dict[str, Any]) -> None:
    """Raise ``EventSchemaError`` unless ``event`` (as JSON carries it) is of a registered
    type and matches its serializer exactly."""
    errors = event_errors(event)
    if errors:
        raise EventSchemaError("; ".join(errors))


def event_errors(event: Any) -> list[str]:
    """What is wrong with ``event``: empty when it validates."""
    if not isinstance(event, dict):
        return [f"an event is an object, not {type(event).__name__}"]
    event_type = event.get("type")
    serializer = _REGISTRY.get(event_type) if isinstance(event_type, str) else None
    if serializer is None:
        return [f"event type {event_type!r} is not registered (garden.event_schema)"]
    return _errors(serializer(), event, str(event_type))


def _errors(field: serializers.Field, value: Any, path: str) -> list[str]:
    if isinstance(field, serializers.SerializerMethodField):
        described = _method_annotation(field)
        return [] if described is None else _errors(described, value, path)
    if value is None:
        return [] if getattr(field, "allow_null", False) else [f"{path}: null"]
    if isinstance(field, serializers.ListSerializer):
        if not isinstance(value, list):
            return [f"{path}: not a list"]
        return [
            e for i, item in enumerate(value) for e in _errors(field.child, item, f"{path}[{i}]")
        ]
    if isinstance(field, serializers.BaseSerializer):
        return _object_errors(field, value, path)
    if isinstance(field, serializers.ListField):
        if not isinstance(value, list):
            return [f"{path}: not a list"]
        return [
            e for i, item in enumerate(value) for e in _errors(field.child, item, f"{path}[{i}]")
        ]
    return _scalar_errors(field, value, path)


def _object_errors(serializer: serializers.BaseSerializer, value: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: not an object"]
    fields = serializer.fields
    errors = [
        f"{path}.{name}: not declared by {type(serializer).__name__}"
        for name in value.keys() - fields.keys()
    ]
    for name, field in fields.items():
        if field.write_only:
            continue
        if name not in value:
            errors.append(f"{path}.{name}: missing")
        else:
            errors += _errors(field, value[name], f"{path}.{name}")
    return errors


def _method_annotation(field: serializers.SerializerMethodField) -> serializers.Field | None:
    """The field a method field's ``extend_schema_field`` says it returns, if it says."""
    parent = field.parent
    method = getattr(parent, field.method_name, None) if parent is not None else None
    annotation = getattr(method, "_spectacular_annotation", None)
    if isinstance(annotation, serializers.Field):
        return annotation
    return None


def _scalar_errors(field: serializers.Field, value: Any, path: str) -> list[str]:
    if isinstance(field, serializers.BooleanField):
        ok = isinstance(value, bool)
    elif isinstance(field, serializers.IntegerField):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(field, serializers.FloatField):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(field, serializers.DecimalField):
        ok = isinstance(value, str | int | float) and not isinstance(value, bool)
    elif isinstance(field, serializers.DateTimeField):
        ok = isinstance(value, str) and _is_datetime(value)
    elif isinstance(field, serializers.ChoiceField):
        ok = str(value) in field.choice_strings_to_values
    elif isinstance(field, serializers.CharField):
        ok = isinstance(value, str)
    elif isinstance(field, serializers.DictField):
        ok = isinstance(value, dict)
    else:  # JSONField and the like: any JSON value
        ok = True
    return [] if ok else [f"{path}: {value!r} is not a {type(field).__name__}"]


def _is_datetime(value: str) -> bool:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True
