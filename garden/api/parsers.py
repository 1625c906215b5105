"""The API's parsers: JSON everywhere, checked so that bad input is a 400 and never reaches the
database (which would answer with a 500); and, on the one route that takes files (an owner's
message with attachments), multipart form data held to the attachment limits while it is read.

Refused with a named error, before any view runs: a body larger than
GARDEN_API_MAX_BODY_BYTES (413), text that is not UTF-8, nesting deeper than
GARDEN_API_MAX_JSON_DEPTH (which would exhaust the parser's recursion), NaN and infinities,
integers beyond 64 bits, and strings or keys holding NUL or a lone surrogate (PostgreSQL
refuses both, in text and in jsonb).

Multipart (AttachmentsParser) is refused by name too: a body larger than every allowed file
together (413 PAYLOAD_TOO_LARGE, before any of it is read), more files than
GARDEN_MAX_ATTACHMENTS (TOO_MANY_ATTACHMENTS) and a file larger than
GARDEN_ATTACHMENT_MAX_BYTES (ATTACHMENT_TOO_LARGE) as soon as the file's bytes pass the limit,
so an oversized upload is never held whole; form fields are checked like JSON strings.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.files.uploadhandler import FileUploadHandler
from django.http.multipartparser import MultiPartParser as DjangoMultiPartParser
from django.http.multipartparser import MultiPartParserError
from rest_framework import status
from rest_framework.parsers import BaseParser, DataAndFiles

from garden.api.errors import ApiError
from garden.attachments import sanitize_title, too_large, too_many
from garden.errors import ServiceError

_FORBIDDEN_CHARS = re.compile("[\x00\ud800-\udfff]")
_INT_LIMIT = 2**63 - 1


def _refuse(code: str, message: str, *, status_code: int = status.HTTP_400_BAD_REQUEST) -> ApiError:
    return ApiError(code, message, status_code=status_code)


def _reject_constant(name: str) -> Any:
    raise _refuse("INVALID_NUMBER", f"{name} is not a number JSON may carry here.")


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _refuse("INVALID_NUMBER", f"{text[:40]} is too large for a number.")
    return value


def _int(text: str) -> int:
    if len(text) > 20 or abs(int(text)) > _INT_LIMIT:
        raise _refuse("INVALID_NUMBER", f"{text[:40]} is too large for a number.")
    return int(text)


def _where(path: list[Any]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "body"


def check_value(data: Any, *, max_depth: int) -> None:
    """Walk ``data`` (without recursion) and refuse what the database or a handler cannot take."""
    stack: list[tuple[Any, int, list[Any]]] = [(data, 1, [])]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, str):
            if _FORBIDDEN_CHARS.search(value):
                raise _refuse(
                    "INVALID_CHARACTER",
                    f"{_where(path)}: text may not contain NUL or unpaired surrogate characters.",
                )
        elif isinstance(value, (dict, list)):
            if depth > max_depth:
                raise _refuse("TOO_DEEP", f"The JSON is nested deeper than {max_depth} levels.")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and _FORBIDDEN_CHARS.search(key):
                    raise _refuse(
                        "INVALID_CHARACTER",
                        f"{_where(path)}: a key may not contain NUL "
                        "or unpaired surrogate characters.",
                    )
                stack.append((item, depth + 1, [*path, key]))


class SafeJSONParser(BaseParser):
    media_type = "application/json"

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: dict[str, Any] | None = None,
    ) -> Any:
        limit = settings.GARDEN_API_MAX_BODY_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise _refuse(
                "PAYLOAD_TOO_LARGE",
                f"The body is larger than {limit:,} bytes.",
                status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _refuse("INVALID_JSON", "The body is not UTF-8 text.") from exc
        try:
            data = json.loads(
                text, parse_constant=_reject_constant, parse_float=_float, parse_int=_int
            )
        except RecursionError as exc:
            raise _refuse("TOO_DEEP", "The JSON is nested too deeply.") from exc
        except ValueError as exc:
            raise _refuse("INVALID_JSON", f"The body is not valid JSON: {exc}") from exc
        check_value(data, max_depth=settings.GARDEN_API_MAX_JSON_DEPTH)
        return data


def _api_error(refusal: ServiceError) -> ApiError:
    """The attachment rules' own refusal, raised where only an APIException may be (a parser
    runs inside DRF's authentication for a session's CSRF check)."""
    return ApiError(refusal.code, refusal.message, field=refusal.field)


def attachments_body_limit() -> int:
    """The largest multipart body worth reading: every file at its limit, and the text."""
    return (
        settings.GARDEN_MAX_ATTACHMENTS * settings.GARDEN_ATTACHMENT_MAX_BYTES
        + settings.GARDEN_API_MAX_BODY_BYTES
    )


class AttachmentLimits(FileUploadHandler):
    """First in the chain of upload handlers: refuses by name as soon as a limit is passed,
    before the handlers behind it (memory, then a temporary file) keep any more bytes."""

    def __init__(self, request: Any = None) -> None:
        super().__init__(request)
        self.files = 0

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        limit = attachments_body_limit()
        if content_length > limit:
            raise _refuse(
                "PAYLOAD_TOO_LARGE",
                f"The body is larger than {limit:,} bytes.",
                status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )

    def new_file(self, field_name, file_name, *args, **kwargs):
        super().new_file(field_name, file_name, *args, **kwargs)
        self.files += 1
        if self.files > settings.GARDEN_MAX_ATTACHMENTS:
            raise _api_error(too_many())

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > settings.GARDEN_ATTACHMENT_MAX_BYTES:
            raise _api_error(too_large(sanitize_title(self.file_name or "")))
        return raw_data

    def file_complete(self, file_size: int) -> None:
        # The handlers behind this one make the file.
        return None


class AttachmentsParser(BaseParser):
    """multipart/form-data for a message with attachments; only views that take files add it."""

    media_type = "multipart/form-data"

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: dict[str, Any] | None = None,
    ) -> DataAndFiles:
        request = (parser_context or {})["request"]
        meta = request.META.copy()
        meta["CONTENT_TYPE"] = media_type
        handlers = [AttachmentLimits(request), *request.upload_handlers]
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            data, files = DjangoMultiPartParser(meta, stream, handlers, encoding).parse()
        except MultiPartParserError as exc:
            raise _refuse("INVALID_MULTIPART", f"The form data cannot be read: {exc}") from exc
        except TooManyFilesSent as exc:
            raise _api_error(too_many()) from exc
        except (RequestDataTooBig, TooManyFieldsSent) as exc:
            raise _refuse(
                "PAYLOAD_TOO_LARGE",
                "The form's fields are too many or too large.",
                status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            ) from exc
        check_value(
            {key: data.getlist(key) for key in data},
            max_depth=settings.GARDEN_API_MAX_JSON_DEPTH,
        )
        return DataAndFiles(data, files)
