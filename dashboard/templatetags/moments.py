"""Template filters for the moments payloads carry as ISO 8601 text (the one shape the API and
the pages share): ``{{ doc.created_at|moment|date:"j M Y, H:i" }}``."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils.dateparse import parse_datetime

register = template.Library()


@register.filter
def moment(value: str | datetime | None) -> datetime | None:
    """The datetime an ISO 8601 string names (a datetime passes through); None when it names
    none, so ``date`` then writes nothing."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        return parse_datetime(value)
    except ValueError:
        return None
