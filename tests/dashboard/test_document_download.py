"""A document's download (/dashboard/artifacts/<id>/download): any artifact of the owner's as a
file to save — under its title (with the extension its media type gives), its media type, as an
attachment that nothing runs — and a 404 for anyone else's."""

from __future__ import annotations

import pytest
from django.test import Client

from garden.attachments import Upload
from garden.models import Agent, Artifact
from garden.tools import run_tool
from groups.services.requests import request_create
from tests.dashboard.helpers import artifact, household
from tests.dashboard.test_browser_canvas_charts import CHART
from tests.groups.helpers import pdf_bytes
from tests.support.tools import in_group

pytestmark = pytest.mark.django_db

PLAN = "# Savings plan\n\nPut **800** aside each month.\n"


def url(artifact) -> str:
    return f"/dashboard/artifacts/{artifact.pk}/download"


@pytest.fixture
def group(owner):
    return household(owner)


def ledger(owner) -> Agent:
    return Agent.objects.get(owner=owner, handle="ledger")


def test_a_markdown_document_downloads_as_markdown_under_its_title(signed_in, owner, group):
    doc = artifact(group, agent=ledger(owner), title="Savings plan", content=PLAN)
    Artifact.objects.filter(pk=doc.pk).update(mime_type="text/markdown")
    response = signed_in.get(url(doc))
    assert response.status_code == 200
    assert response.content == PLAN.encode()
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="Savings plan.md"'
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response["Content-Security-Policy"]


def test_a_md_title_saved_as_plain_text_is_markdown_and_other_text_keeps_its_type(
    signed_in, owner, group
):
    named = artifact(group, agent=ledger(owner), title="plan.md", content=PLAN)
    response = signed_in.get(url(named))
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="plan.md"'
    note = artifact(group, agent=ledger(owner), title="Note", content="Plain words, ünïcode.")
    response = signed_in.get(url(note))
    assert response.content == "Plain words, ünïcode.".encode()
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="Note.txt"'


def test_a_chart_downloads_as_its_json_and_an_attached_file_as_it_was_stored(
    signed_in, owner, group
):
    assert not run_tool(in_group(group, ledger(owner)), "chart.create", CHART).is_error
    chart = Artifact.objects.get(kind="chart")
    response = signed_in.get(url(chart))
    assert response["Content-Type"] == "application/vnd.garden.chart+json; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="Spending by month.json"'
    assert b'"Spending by month"' in response.content

    request_create(group=group, text="The lease.", attachments=[Upload("lease.pdf", pdf_bytes())])
    lease = Artifact.objects.get(title="lease.pdf")
    response = signed_in.get(url(lease))
    assert response.content == pdf_bytes()
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == 'attachment; filename="lease.pdf"'


def test_anyone_elses_document_or_none_is_a_404(owner, stranger, group):
    doc = artifact(group, agent=ledger(owner), title="Savings plan", content=PLAN)
    other = Client()
    other.force_login(stranger)
    assert other.get(url(doc)).status_code == 404
    assert other.get("/dashboard/artifacts/999999999/download").status_code == 404
    # Signed out: the sign-in page, not the document.
    response = Client().get(url(doc))
    assert response.status_code == 302 and "/login/" in response["Location"]
