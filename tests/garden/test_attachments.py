"""What may be attached: types recognised by their bytes, text documents by being UTF-8 text,
and names made safe to show; every refusal named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from garden.attachments import TITLE_MAX, Upload, attachment_check, sanitize_title, sniff
from garden.errors import ServiceError
from tests.groups.helpers import pdf_bytes, png_bytes

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01" + b"\x00" * 20
GIF = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
WEBP = b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00/\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00"


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (png_bytes(), "image/png"),
        (JPEG, "image/jpeg"),
        (GIF, "image/gif"),
        (WEBP, "image/webp"),
        (pdf_bytes(), "application/pdf"),
        (b"RIFF\x1a\x00\x00\x00WAVEfmt ", None),
        (b"<svg/>", None),
    ],
)
def test_pictures_and_pdfs_are_known_by_their_bytes(data, media_type):
    assert sniff(data) == media_type


@pytest.mark.parametrize(
    ("name", "data", "kind", "media_type"),
    [
        ("notes.txt", b"plain", "document", "text/plain"),
        ("README", b"no extension", "document", "text/plain"),
        ("plan.MD", "# Plan \u2603".encode(), "document", "text/markdown"),
        ("rent.csv", b"a,b\n1,2\n", "document", "text/csv"),
        ("data.json", b'{"a": [1, 2]}', "document", "application/json"),
        # The bytes decide: a picture named as text is a picture.
        ("notes.txt", GIF, "image", "image/gif"),
        ("scan.png", pdf_bytes(), "document", "application/pdf"),
    ],
)
def test_what_is_accepted(name, data, kind, media_type):
    checked = attachment_check(Upload(name, data))
    assert (checked.kind, checked.mime_type, checked.size) == (kind, media_type, len(data))
    if media_type.startswith("text/") or media_type == "application/json":
        assert checked.text == data.decode()


def test_a_byte_order_mark_is_not_part_of_the_text():
    assert attachment_check(Upload("a.txt", b"\xef\xbb\xbfhello")).text == "hello"


@pytest.mark.parametrize(
    ("name", "data", "code"),
    [
        ("page.html", b"<script>alert(1)</script>", "ATTACHMENT_TYPE_NOT_ALLOWED"),
        ("run.sh", b"rm -rf /", "ATTACHMENT_TYPE_NOT_ALLOWED"),
        ("a.txt", b"\x80\x81", "ATTACHMENT_TYPE_NOT_ALLOWED"),
        ("a.csv", b"a,\x00", "ATTACHMENT_TYPE_NOT_ALLOWED"),
        ("a.json", b"{", "ATTACHMENT_TYPE_NOT_ALLOWED"),
        ("a.txt", b"", "ATTACHMENT_EMPTY"),
    ],
)
def test_what_is_refused(name, data, code):
    with pytest.raises(ServiceError) as refused:
        attachment_check(Upload(name, data))
    assert (refused.value.code, refused.value.field) == (code, "files")


def test_a_file_over_the_limit_is_refused(settings):
    settings.GARDEN_ATTACHMENT_MAX_BYTES = 10
    with pytest.raises(ServiceError) as refused:
        attachment_check(Upload("a.txt", b"x" * 11))
    assert refused.value.code == "ATTACHMENT_TOO_LARGE"


def test_names_lose_their_folders_and_keep_their_extension():
    assert sanitize_title("C:\\Users\\me\\rent.csv") == "rent.csv"
    assert sanitize_title("../../etc/passwd") == "passwd"
    assert sanitize_title("a\x00b\u202e.png") == "ab.png"
    assert sanitize_title("   ") == "attachment"
    long = sanitize_title("x" * 500 + ".pdf")
    assert len(long) == TITLE_MAX and long.endswith(".pdf")


@given(st.text(max_size=400))
def test_a_title_is_always_short_plain_and_present(name):
    title = sanitize_title(name)
    assert 0 < len(title) <= TITLE_MAX
    assert "/" not in title and "\\" not in title
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in title)
    assert title == title.strip()
