"""Signal receivers: a request that ended (``groups.signals.request_finished``, after commit)
has its replies notified, in a worker — the step that ended it only enqueues."""

from __future__ import annotations

import logging

from django.dispatch import receiver

from groups.signals import request_finished
from notifications import scheduling

log = logging.getLogger(__name__)


@receiver(request_finished, dispatch_uid="notifications_request_finished")
def _request_finished(sender, request_id, **kwargs) -> None:
    try:
        scheduling.notify_replies(request_id)
    except Exception:  # a notification never fails the reply it is about
        log.exception("replies of request %s not notified", request_id)
