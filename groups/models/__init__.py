"""Groups' rows: a team of agents in one conversation, its requests and the budget's audit rows,
the approvals its members wait on, and its owner's webhooks."""

from groups.models.approvals import Approval
from groups.models.groups import (
    DEFAULT_ROOM_CAP_CHARS,
    MAINTENANCE_CALLS,
    MEMORY_SENTENCE,
    MESSAGE_MAX_CHARS,
    SYNTHESIS_CALLS,
    WORKING_CALLS,
    Group,
    Membership,
)
from groups.models.requests import CallReservation, GroupRequest
from groups.models.webhooks import WebhookAttempt, WebhookDelivery, WebhookEndpoint

__all__ = [
    "DEFAULT_ROOM_CAP_CHARS",
    "MAINTENANCE_CALLS",
    "MEMORY_SENTENCE",
    "MESSAGE_MAX_CHARS",
    "SYNTHESIS_CALLS",
    "WORKING_CALLS",
    "Approval",
    "CallReservation",
    "Group",
    "GroupRequest",
    "Membership",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEndpoint",
]
