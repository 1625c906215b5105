"""Read-only admin of operator messages: staff read records and notes; nobody edits them."""

from __future__ import annotations

import pytest

from operator_messages import emit_tend_survey
from tests.operator_messages.helpers import in_run, start

pytestmark = pytest.mark.django_db

URL = "/admin/operator_messages/operatormessagerun/"


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser(username="staff", password="pw-staff-123")


@pytest.fixture
def noted_run(runtime):
    with in_run("tend") as (_, run, _):
        result = emit_tend_survey("Approval 12 has waited <b>three</b> hours.")
    assert result.ok
    return run, result.record


def test_staff_see_runs_with_records_and_their_notes(client, staff, noted_run):
    run, record = noted_run
    _, quiet_run, _ = start("tend")  # no records: not listed
    client.force_login(staff)

    listing = client.get(URL)
    assert listing.status_code == 200
    page = listing.content.decode()
    assert run.run_id in page and quiet_run.run_id not in page

    detail = client.get(f"{URL}{run.pk}/change/")
    assert detail.status_code == 200
    page = detail.content.decode()
    assert record["delivery_path"] in page and "out_of_band_note" in page
    # The note's text is shown, escaped: file content never becomes markup.
    assert "Approval 12 has waited &lt;b&gt;three&lt;/b&gt; hours." in page
    assert 'name="_save"' not in page  # read-only: no save button


def test_nobody_adds_changes_or_deletes(client, staff, noted_run):
    run, _ = noted_run
    client.force_login(staff)
    assert client.get(f"{URL}add/").status_code == 403
    assert client.post(f"{URL}{run.pk}/change/", {}).status_code == 403
    assert client.post(f"{URL}{run.pk}/delete/", {"post": "yes"}).status_code == 403


def test_non_staff_cannot_reach_it(client, owner, noted_run):
    run, _ = noted_run
    client.force_login(owner)
    response = client.get(f"{URL}{run.pk}/change/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
