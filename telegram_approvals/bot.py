"""The Bot API client: python-telegram-bot's ``Bot``, every request of which goes through the
egress policy's client (purpose ``telegram``: GARDEN_TELEGRAM_API_URL is checked like any
destination before a connection is made), called from sync code — tasks and commands, never
inside a database transaction.

The token travels in the URL, where the Bot API wants it, and nowhere else: it is kept out of
errors, and the loggers that would print a URL have it redacted.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import NetworkError, RetryAfter, TelegramError, TimedOut
from telegram.request import BaseRequest, RequestData

from garden import egress
from garden.retry import RetryPolicy

# A Bot API answer is a few KB; getUpdates of a busy bot a few hundred.
MAX_ANSWER_BYTES = 2_000_000
# getUpdates long-polls this long (seconds); the HTTP read waits a little longer.
POLL_SECONDS = 25

Button = tuple[str, str]  # (label, callback data)


class TelegramNotConfigured(Exception):
    """GARDEN_TELEGRAM_BOT_TOKEN is not set: this site has no Telegram surface."""


class BotApiRefused(TelegramError):
    """The egress policy refused the Bot API's address; nothing was sent."""


def _retry_after(exc: BaseException) -> float:
    wait = exc.retry_after  # seconds, or a timedelta in newer releases
    return (wait.total_seconds() if hasattr(wait, "total_seconds") else float(wait)) + 1


# How a task that calls the Bot API is delivered again (garden.retry.RetryingTask): after the
# wait Telegram asks for when it limits the bot, with back-off when it cannot be reached or
# timed out; five times at most. An egress refusal (BotApiRefused) is never retried.
BOT_API_RETRIES = (
    RetryPolicy(on=(RetryAfter,), backoff=1.0, backoff_max=30.0, times=5, wait_of=_retry_after),
    RetryPolicy(on=(NetworkError,), backoff=1.0, backoff_max=30.0, times=5),
)


def configured() -> bool:
    return bool(settings.GARDEN_TELEGRAM_BOT_TOKEN)


class EgressRequest(BaseRequest):
    """python-telegram-bot's transport, made by the egress policy's shared client: the Bot
    API's host is resolved and checked before every connection, every read and write is bounded
    by the current deadline, and an answer is read up to a cap. Parameters are sent as JSON
    (no uploads: garden sends text and buttons only)."""

    def __init__(self, read_timeout: float) -> None:
        self._read_timeout = read_timeout

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    async def initialize(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        read = read_timeout if isinstance(read_timeout, int | float) else self._read_timeout
        timeout = httpx.Timeout(settings.GARDEN_TELEGRAM_TIMEOUT, read=read)
        # A JSON body with typed values (python-telegram-bot's form encoding sends every
        # value as a string; the Bot API takes either).
        body = json.dumps(request_data.parameters if request_data else {}).encode()
        try:
            # Blocking is fine here: the loop runs this one call (``BotApi._run``).
            with _client().stream(
                method,
                url,
                content=body,
                headers={"Content-Type": "application/json"},
                timeout=timeout,
            ) as response:
                payload, clipped = egress.read_capped(response, MAX_ANSWER_BYTES)
        except egress.EgressRefused as exc:
            raise BotApiRefused(f"Bot API: {exc.message}") from None
        except httpx.TimeoutException:
            raise TimedOut("the Bot API did not answer in time") from None
        except httpx.HTTPError as exc:
            # Named by type only: httpx's message may carry the URL, and the URL the token.
            raise NetworkError(f"Bot API unreachable ({type(exc).__name__})") from None
        if clipped:
            raise NetworkError(f"Bot API answer larger than {MAX_ANSWER_BYTES} bytes")
        return response.status_code, payload


def _client() -> httpx.Client:
    return egress.shared("telegram", lambda: egress.build_client("telegram"))


def keyboard(buttons: Sequence[Button]) -> InlineKeyboardMarkup | None:
    """One row of inline buttons, or none (an edit without a keyboard removes it)."""
    if not buttons:
        return None
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(label, callback_data=data) for label, data in buttons]]
    )


@dataclass(frozen=True)
class BotIdentity:
    id: int
    username: str


class BotApi:
    """The Bot API calls garden makes, as plain sync functions. Each runs within
    GARDEN_TELEGRAM_TIMEOUT seconds (getUpdates within its long poll and that)."""

    def __init__(self) -> None:
        token = settings.GARDEN_TELEGRAM_BOT_TOKEN
        if not token:
            raise TelegramNotConfigured("GARDEN_TELEGRAM_BOT_TOKEN is not set.")
        timeout = settings.GARDEN_TELEGRAM_TIMEOUT
        self._bot = Bot(
            token=token,
            base_url=f"{settings.GARDEN_TELEGRAM_API_URL.rstrip('/')}/bot",
            request=EgressRequest(read_timeout=timeout),
            get_updates_request=EgressRequest(read_timeout=POLL_SECONDS + timeout),
        )

    @property
    def bot(self) -> Bot:
        """python-telegram-bot's Bot, for ``Update.de_json``."""
        return self._bot

    def _run(self, call: Any, *, seconds: float | None = None) -> Any:
        with egress.deadline(seconds or settings.GARDEN_TELEGRAM_TIMEOUT):
            return asyncio.run(call)

    def get_me(self) -> BotIdentity:
        me = self._run(self._bot.get_me())
        return BotIdentity(id=me.id, username=me.username or "")

    def send_message(self, *, chat_id: int, text: str, buttons: Sequence[Button] = ()) -> int:
        """Send ``text`` (plain, no markup) with ``buttons``; the new message's id."""
        message = self._run(
            self._bot.send_message(chat_id=chat_id, text=text, reply_markup=keyboard(buttons))
        )
        return message.message_id

    def edit_message_text(
        self, *, chat_id: int, message_id: int, text: str, buttons: Sequence[Button] = ()
    ) -> None:
        self._run(
            self._bot.edit_message_text(
                chat_id=chat_id, message_id=message_id, text=text, reply_markup=keyboard(buttons)
            )
        )

    def answer_callback_query(self, *, callback_query_id: str, text: str) -> None:
        self._run(self._bot.answer_callback_query(callback_query_id=callback_query_id, text=text))

    def get_updates(self, *, offset: int | None, timeout: int = POLL_SECONDS) -> list[Update]:
        return list(
            self._run(
                self._bot.get_updates(
                    offset=offset, timeout=timeout, allowed_updates=ALLOWED_UPDATES
                ),
                seconds=timeout + settings.GARDEN_TELEGRAM_TIMEOUT,
            )
        )

    def set_webhook(self, *, url: str, secret_token: str) -> None:
        self._run(
            self._bot.set_webhook(
                url=url, secret_token=secret_token, allowed_updates=ALLOWED_UPDATES
            )
        )

    def delete_webhook(self) -> None:
        self._run(self._bot.delete_webhook())


# garden reads commands (/start <code>) and button presses; nothing else is asked for.
ALLOWED_UPDATES = ("message", "callback_query")


class _RedactToken(logging.Filter):
    """The bot token, wherever a library logs a Bot API URL, replaced before it is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        token = settings.GARDEN_TELEGRAM_BOT_TOKEN
        if token:
            message = record.getMessage()
            if token in message:
                record.msg, record.args = message.replace(token, "<bot token>"), ()
        return True


_REDACTING_LOGGERS = ("httpx", "telegram.Bot", "telegram.request.BaseRequest")


def redact_token_in_logs() -> None:
    """Install the redacting filter on the loggers that print Bot API URLs (httpx at INFO,
    python-telegram-bot's Bot at DEBUG); idempotent."""
    for name in _REDACTING_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _RedactToken) for f in logger.filters):
            logger.addFilter(_RedactToken())
