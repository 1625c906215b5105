"""Signals the group loop sends; receivers are thin and call services."""

from django.dispatch import Signal

# Sent after commit when a request reaches completed, stopped or failed.
# kwargs: request_id (int), state (str), outcome_code (str)
request_finished = Signal()
