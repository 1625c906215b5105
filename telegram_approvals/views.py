"""The webhook Telegram posts updates to (deployments; development may poll instead).

Only a request carrying the secret set with the webhook (X-Telegram-Bot-Api-Secret-Token,
compared in constant time) is read; anything else is a 403 and nothing is processed. The
update is handled at once (a press decides through the one decide path), and its answers —
the Bot API calls — go to a worker, so Telegram gets its 200 without waiting on them.
"""

from __future__ import annotations

import hmac
import json
import logging

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from telegram import Update

from telegram_approvals import scheduling
from telegram_approvals.bot import configured
from telegram_approvals.services import update_handle

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def _secret_ok(request: HttpRequest) -> bool:
    expected = settings.GARDEN_TELEGRAM_WEBHOOK_SECRET
    given = request.headers.get(SECRET_HEADER, "")
    # Unset, no update is trusted: the webhook is off.
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


@csrf_exempt  # Telegram authenticates with the secret header, not a browser's CSRF pair
@require_POST
def webhook(request: HttpRequest) -> HttpResponse:
    if not configured():
        raise Http404("Telegram is not configured on this site.")
    if not _secret_ok(request):
        return HttpResponseForbidden("wrong or missing secret token")
    try:
        data = json.loads(request.body)
        update = Update.de_json(data, None)
    except (ValueError, TypeError, KeyError, AttributeError):
        return HttpResponse("not a Telegram update", status=400, content_type="text/plain")
    replies = update_handle(update=update)
    scheduling.send_replies(replies)
    return HttpResponse(status=200)
