"""A session's write is refused for its missing CSRF header before any of its body is read:
a ~21 MB multipart upload without the header gets the CSRF refusal, not the answer the
attachment parser gives once it has read the files (here, that the last file is too large)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from garden.models import Artifact, Message
from garden.services.tokens import token_create
from tests.dashboard.helpers import household

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


def upload() -> dict:
    """Three files at the limit and a fourth one byte over it: ~21 MB, which the attachment
    parser reads to its end before it can refuse the last file (ATTACHMENT_TOO_LARGE)."""
    limit = settings.GARDEN_ATTACHMENT_MAX_BYTES
    sizes = [limit, limit, limit, limit + 1]
    return {
        "text": "Here are the statements.",
        "files": [
            SimpleUploadedFile(f"s{i}.txt", b"a" * size, content_type="text/plain")
            for i, size in enumerate(sizes)
        ],
    }


def test_a_large_upload_without_the_csrf_header_is_refused_before_it_is_parsed(owner, api):
    assert settings.GARDEN_ATTACHMENT_MAX_BYTES == 5 * MIB
    group = household(owner)
    path = f"/api/groups/{group.pk}/messages"
    before = (Message.objects.count(), Artifact.objects.count())

    refused = api.client.post(path, upload(), format="multipart")
    assert refused.status_code == 403
    assert refused.json()["code"] == "CSRF_FAILED"
    assert "CSRF token missing" in refused.json()["message"]

    # With the header, the same body is read, and the parser names what it found.
    parsed = api.client.post(path, upload(), format="multipart", HTTP_X_CSRFTOKEN=api.token)
    assert (parsed.status_code, parsed.json()["code"]) == (400, "ATTACHMENT_TOO_LARGE")
    assert (Message.objects.count(), Artifact.objects.count()) == before


def test_a_wrong_csrf_header_is_refused_before_the_body_too(owner, api):
    group = household(owner)
    refused = api.client.post(
        f"/api/groups/{group.pk}/messages",
        upload(),
        format="multipart",
        HTTP_X_CSRFTOKEN="x" * 64,
    )
    assert (refused.status_code, refused.json()["code"]) == (403, "CSRF_FAILED")


def test_a_token_needs_no_csrf_pair_for_an_upload(owner):
    group = household(owner)
    script = APIClient(enforce_csrf_checks=True)
    script.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(owner=owner, name='ci').secret}")
    parsed = script.post(f"/api/groups/{group.pk}/messages", upload(), format="multipart")
    assert (parsed.status_code, parsed.json()["code"]) == (400, "ATTACHMENT_TOO_LARGE")
