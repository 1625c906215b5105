"""What an owner may attach to a message: the file types garden accepts, recognised by their
contents (never by the client's content type or the file name's word alone), the limits, and
the name a file is shown under. Pure: no database; the rows are written by
``garden.services.attachments``."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from django.conf import settings

from garden.errors import ServiceError

# Images by their magic bytes: (prefix, media type). WebP is checked apart (RIFF....WEBP).
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
PDF = "application/pdf"
# Text documents by the name's extension, once the bytes are known to be UTF-8 text.
TEXT_TYPES = {
    "": "text/plain",
    "txt": "text/plain",
    "text": "text/plain",
    "md": "text/markdown",
    "markdown": "text/markdown",
    "csv": "text/csv",
    "json": "application/json",
}
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# What an adapter may carry to a model as a content part: pictures and PDFs. A text document
# is read with file.read instead.
INLINE_TYPES = IMAGE_TYPES | {PDF}
# The file input's accept list (a hint to the browser; the server decides by the contents).
ACCEPT = ".png,.jpg,.jpeg,.gif,.webp,.pdf,.txt,.md,.markdown,.csv,.json," + ",".join(
    sorted({*IMAGE_TYPES, PDF, "text/plain", "text/markdown", "text/csv", "application/json"})
)
TITLE_MAX = 200
FIELD = "files"

_SPACES = re.compile(r"\s+")
# Control, format (bidi overrides that would show "gnp.exe" as "exe.png"), surrogate and
# separator characters have no place in a name shown to people.
_UNSHOWN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


@dataclass(frozen=True)
class Upload:
    """One file as received: the name the client gave and its bytes."""

    name: str
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class Attachment:
    """An upload that passed every check: what it is, the name it is shown under, its bytes
    and, for a text document, its text."""

    title: str
    kind: Literal["image", "document"]
    mime_type: str
    data: bytes = field(repr=False)
    text: str = field(default="", repr=False)

    @property
    def size(self) -> int:
        return len(self.data)


def sanitize_title(name: str) -> str:
    """The file name without its folders, control characters or runs of spaces, at most
    TITLE_MAX characters (the extension kept when it is cut); "attachment" when nothing is
    left."""
    name = unicodedata.normalize("NFC", name or "")
    name = re.split(r"[\\/]", name)[-1]
    name = "".join(c for c in name if unicodedata.category(c) not in _UNSHOWN)
    name = _SPACES.sub(" ", name).strip().strip(".").strip() or "attachment"
    if len(name) > TITLE_MAX:
        stem, dot, ext = name.rpartition(".")
        ext = ext[:20] if dot and stem else ""
        name = (name[: TITLE_MAX - len(ext) - 1].rstrip() + "." + ext) if ext else name[:TITLE_MAX]
    return name


def _extension(title: str) -> str:
    stem, dot, ext = title.rpartition(".")
    return ext.lower() if dot and stem else ""


def sniff(data: bytes) -> str | None:
    """The media type of an image or a PDF from its first bytes, or None."""
    for magic, media_type in _IMAGE_MAGIC:
        if data.startswith(magic):
            return media_type
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return PDF
    return None


def _not_allowed(title: str, why: str) -> ServiceError:
    return ServiceError(
        "ATTACHMENT_TYPE_NOT_ALLOWED",
        f"{title}: {why} Attach pictures (PNG, JPEG, GIF, WebP), PDFs or text documents "
        "(plain text, Markdown, CSV, JSON).",
        field=FIELD,
    )


def too_large(title: str) -> ServiceError:
    limit = settings.GARDEN_ATTACHMENT_MAX_BYTES
    return ServiceError(
        "ATTACHMENT_TOO_LARGE",
        f"{title} is larger than {limit:,} bytes, the limit for one file.",
        field=FIELD,
    )


def too_many() -> ServiceError:
    most = settings.GARDEN_MAX_ATTACHMENTS
    return ServiceError(
        "TOO_MANY_ATTACHMENTS", f"At most {most} files may be attached to one message.", field=FIELD
    )


def attachment_check(upload: Upload) -> Attachment:
    """``upload`` as an Attachment, or the named refusal (ServiceError on ``files``)."""
    title = sanitize_title(upload.name)
    data = upload.data
    if len(data) > settings.GARDEN_ATTACHMENT_MAX_BYTES:
        raise too_large(title)
    if not data:
        raise ServiceError("ATTACHMENT_EMPTY", f"{title} is empty.", field=FIELD)
    media_type = sniff(data)
    if media_type is not None:
        kind = "image" if media_type in IMAGE_TYPES else "document"
        return Attachment(title=title, kind=kind, mime_type=media_type, data=data)
    extension = _extension(title)
    if extension not in TEXT_TYPES:
        raise _not_allowed(title, "this kind of file cannot be attached.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _not_allowed(title, "it is neither a picture, a PDF nor UTF-8 text.") from None
    if "\x00" in text:
        raise _not_allowed(title, "text documents may not contain NUL characters.")
    text = text.removeprefix("\ufeff")
    media_type = TEXT_TYPES[extension]
    if media_type == "application/json":
        try:
            json.loads(text)
        except (ValueError, RecursionError):  # nesting past the parser's depth is not JSON here
            raise _not_allowed(title, "it is named .json but is not valid JSON.") from None
    return Attachment(title=title, kind="document", mime_type=media_type, data=data, text=text)


def attachments_check(uploads: Sequence[Upload]) -> list[Attachment]:
    """Every upload checked, the count first (TOO_MANY_ATTACHMENTS); the first refusal wins."""
    if len(uploads) > settings.GARDEN_MAX_ATTACHMENTS:
        raise too_many()
    return [attachment_check(u) for u in uploads]
