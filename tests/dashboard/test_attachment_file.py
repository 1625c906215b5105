"""The file view: an attached file as it was stored, for its owner only, under headers that
keep a browser from running or sniffing it; and the room's composer and Canvas for files."""

from __future__ import annotations

import pytest
from django.test import Client

from garden.attachments import Upload
from garden.models import Artifact
from groups.services.requests import request_create
from tests.dashboard.helpers import artifact, household
from tests.groups.helpers import CSV_BYTES, pdf_bytes, png_bytes

pytestmark = pytest.mark.django_db

PNG = png_bytes()
PDF = pdf_bytes()


@pytest.fixture
def attached(owner):
    group = household(owner)
    request_create(
        group=group,
        text="Here are the numbers.",
        attachments=[
            Upload("chart.png", PNG),
            Upload("lease.pdf", PDF),
            Upload("rent <march>.csv", CSV_BYTES),
        ],
    )
    picture, lease, sheet = Artifact.objects.filter(conversation__group=group).order_by("id")
    return group, picture, lease, sheet


def url(artifact) -> str:
    return f"/dashboard/artifacts/{artifact.pk}/file"


def test_a_picture_is_served_inline_with_its_type_and_no_sniffing(signed_in, attached):
    _, picture, _, _ = attached
    response = signed_in.get(url(picture))
    assert response.status_code == 200
    assert response.content == PNG
    assert response["Content-Type"] == "image/png"
    assert response["Content-Disposition"] == 'inline; filename="chart.png"'
    assert response["X-Content-Type-Options"] == "nosniff"
    policy = response["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "sandbox" in policy and "script-src" not in policy
    assert "private" in response["Cache-Control"]


def test_anything_else_is_a_download(signed_in, attached):
    _, _, lease, sheet = attached
    response = signed_in.get(url(lease))
    assert response.content == PDF and response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == 'attachment; filename="lease.pdf"'
    response = signed_in.get(url(sheet))
    assert response.content == CSV_BYTES
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith("attachment; filename=")
    assert response["Content-Security-Policy"].startswith("default-src 'none'")


def test_another_owners_file_is_404_and_so_is_an_agents_document(
    attached, stranger, signed_in, owner
):
    _, picture, _, _ = attached
    other = Client()
    other.force_login(stranger)
    assert other.get(url(picture)).status_code == 404
    made = artifact(attached[0], agent=None, title="Notes", content="made by a member")
    assert signed_in.get(url(made)).status_code == 404
    assert signed_in.get("/dashboard/artifacts/99999999999999999999/file").status_code == 404


def test_anonymous_people_are_sent_to_sign_in(client, attached):
    response = client.get(url(attached[1]))
    assert response.status_code == 302 and "/dashboard/login/" in response["Location"]


def test_the_canvas_lists_attachments_as_attached_by_the_owner(signed_in, attached):
    group, picture, _, _ = attached
    page = signed_in.get(f"/dashboard/groups/{group.pk}/canvas").content.decode()
    assert "chart.png" in page and "lease.pdf" in page and "rent &lt;march&gt;.csv" in page
    assert page.count("attached by you") >= 3
    assert f'data-file="{url(picture)}"' in page
    assert "January,1400" in page  # a text document shows its text


def test_the_room_offers_an_attach_button_with_a_real_file_input(signed_in, attached):
    page = signed_in.get(f"/dashboard/groups/{attached[0].pk}/").content.decode()
    assert 'id="composer-files" name="files" type="file" multiple' in page
    assert '<label for="composer-files" class="button attach-button">Attach</label>' in page
    assert "image/png" in page and ".csv" in page


def test_the_canvas_carries_the_start_of_a_long_document_not_all_of_it(signed_in, owner):
    group = household(owner)
    long_text = "Spending line.\n" * 10_000  # 150,000 characters
    made = artifact(group, agent=group.coordinator, title="Ledger export", content=long_text)
    page = signed_in.get(f"/dashboard/groups/{group.pk}/canvas")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'data-chars="{len(long_text)}"' in html and made.title in html
    assert len(html) < 40_000
