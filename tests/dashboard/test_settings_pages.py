"""The settings pages without a browser: an agent's page and the model accounts page show the
owner's rows only, and never a key."""

from __future__ import annotations

import pytest

from garden.models import Agent
from garden.services.accounts import model_account_create

pytestmark = pytest.mark.django_db

SECRET = "sk-page-secret-value"


def test_the_accounts_page_lists_only_ones_own_and_never_a_key(signed_in, owner, stranger):
    model_account_create(owner=owner, name="Mine", provider="openai", model="m", api_key=SECRET)
    model_account_create(owner=stranger, name="Theirs", provider="openai", model="m")
    page = signed_in.get("/dashboard/accounts/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Mine" in html and "your key (stored encrypted)" in html
    assert "Theirs" not in html
    assert SECRET not in html


def test_an_agents_page_offers_its_owners_accounts_and_tools(signed_in, owner, stranger):
    model_account_create(owner=stranger, name="Theirs", provider="openai", model="m")
    concierge = Agent.objects.get(owner=owner, handle="concierge")
    html = signed_in.get(f"/dashboard/agents/{concierge.pk}/").content.decode()
    assert 'name="instructions"' in html and 'value="file.write"' in html
    assert "Theirs" not in html
    # The loop's own tools and the maker's are not offered to a member.
    assert 'value="group.ask"' not in html and 'value="platform.update_group"' not in html
    theirs = Agent.objects.get(owner=stranger, handle="concierge")
    assert signed_in.get(f"/dashboard/agents/{theirs.pk}/").status_code == 404


def test_agent_fathers_page_offers_the_makers_tools(signed_in, owner):
    father = Agent.objects.get(owner=owner, handle="father")
    html = signed_in.get(f"/dashboard/agents/{father.pk}/").content.decode()
    assert 'value="platform.update_group"' in html
    assert "Remove Agent Father" not in html
