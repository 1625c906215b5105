"""A streamed reply read as it arrives: the server-sent events of a 2xx ``text/event-stream``
answer fed to the adapter's StreamAssembler, which hands the text on as it comes and builds
the reply the same call would give unstreamed, cut as soon as it passes the call's limits."""

from __future__ import annotations

import json
from typing import Any

import httpx

from garden import egress

from ._wire import DECODING_ERRORS
from .types import MalformedReply, ReplyTooLarge, TextSink


class StreamAssembler:
    """Builds one reply from a stream's events, in the shape the non-streamed call returns, so
    the adapter's ``_parse`` reads both and a streamed call gives the same ChatReply. Text
    deltas go to ``on_text`` as they come; every piece is counted first (``grow``), so the
    stream is cut, named REPLY_TOO_LARGE, as soon as it passes the call's ``limit``."""

    def __init__(self, on_text: TextSink) -> None:
        self.on_text = on_text
        # Whether any event came: a server that ignores ``stream`` answers in one piece.
        self.fed = False
        self.size = 0
        self.limit: int | None = None
        self.provider = ""

    def grow(self, piece: str) -> None:
        """Count ``piece`` (text, a tool name or arguments) against the call's limit, before
        it is kept or shown; past the limit the reply is ReplyTooLarge."""
        self.size += len(piece)
        if self.limit is not None and self.size > self.limit:
            raise ReplyTooLarge(
                f"{self.provider}: the streamed reply passed {self.limit:,} characters, the "
                f"most this call allows; reading stopped there"
            )

    def feed(self, event: str, data: Any) -> bool:
        """Take one event (its name, and its JSON data decoded, or ``"[DONE]"``); True once
        the reply is whole."""
        raise NotImplementedError

    def data(self) -> dict[str, Any]:
        """The reply in the non-streamed shape; MalformedReply if the stream never finished."""
        raise NotImplementedError


def is_event_stream(response: httpx.Response) -> bool:
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return media == "text/event-stream"


def read_events(
    response: httpx.Response, cap: int, provider: str, assembler: StreamAssembler
) -> dict[str, Any]:
    """Feed a 2xx event stream to ``assembler`` until it has the whole reply.

    The stream ending first or an event whose data is not JSON is a MalformedReply, more than
    ``cap`` bytes (or more than the assembler's limit) a ReplyTooLarge, and reading stops there:
    the caller's ``with`` closes the connection unread; a transport error on the way is raised as httpx's, for the caller to
    classify. Either way the model may have run, so every failure here is ambiguous.
    """
    status = response.status_code
    parser = EventStream()
    size = 0
    for chunk in egress.iter_capped(response, cap):
        size += len(chunk)
        if size > cap:
            raise ReplyTooLarge(
                f"{provider}: streamed reply is larger than {cap} bytes", status=status
            )
        for event, data in parser.feed(chunk):
            if _feed(assembler, event, data, provider, status):
                return assembler.data()
    for event, data in parser.close():
        if _feed(assembler, event, data, provider, status):
            return assembler.data()
    return assembler.data()


def _feed(assembler: StreamAssembler, event: str, data: str, provider: str, status: int) -> bool:
    assembler.fed = True
    if data == "[DONE]":
        return assembler.feed(event, data)
    try:
        decoded = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise MalformedReply(
            f"{provider}: a streamed event is not JSON: {data[:200]!r}", status=status
        ) from exc
    try:
        return assembler.feed(event, decoded)
    except DECODING_ERRORS as exc:
        raise MalformedReply(
            f"{provider}: a streamed event cannot be read: {exc!r:.200}", status=status
        ) from exc


class EventStream:
    """Server-sent events parsed from the bytes of a response as they arrive: each complete
    event as ``(name, data)`` (name ``message`` unless the event says otherwise; ``data``
    lines joined by newlines). Comments and unknown fields are skipped; a line that is not
    UTF-8 is a MalformedReply."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        self._buffer += chunk
        events: list[tuple[str, str]] = []
        start = 0
        while (end := self._buffer.find(b"\n", start)) >= 0:
            event = self._line(bytes(self._buffer[start:end]))
            if event is not None:
                events.append(event)
            start = end + 1
        del self._buffer[:start]
        return events

    def close(self) -> list[tuple[str, str]]:
        """The events still held when the stream ends (a last line with no newline after it,
        an event with no blank line after it)."""
        tail, self._buffer = bytes(self._buffer), bytearray()
        events = [event for event in (self._line(tail), self._line(b"")) if event is not None]
        return events

    def _line(self, raw: bytes) -> tuple[str, str] | None:
        try:
            line = raw.rstrip(b"\r").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedReply(f"a streamed line is not UTF-8: {raw[:100]!r}") from exc
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = (self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None
