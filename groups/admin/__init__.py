"""Django admin for groups (edited under the same rule set as the API) and, read-only, their
requests and call reservations, with usage and cost per owner and day, and owners' webhooks.
Each part registers its models when imported here, as the admin autodiscovers this package."""

from groups.admin import groups, requests, webhooks

__all__ = ["groups", "requests", "webhooks"]
