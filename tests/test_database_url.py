"""tests.support.databases.database_url: a subprocess given it reaches this test's database."""

from __future__ import annotations

import environ
import pytest
from django.db import connection

from tests.support.databases import database_url


@pytest.mark.django_db
def test_the_url_names_this_processs_database(settings):
    parsed = environ.Env.db_url_config(database_url())
    ours = connection.settings_dict
    assert parsed["ENGINE"] == ours["ENGINE"]
    assert parsed["NAME"] == ours["NAME"]
    if ours["ENGINE"] == "django.db.backends.postgresql":
        assert parsed["USER"] == ours["USER"]
        assert parsed["PASSWORD"] == (ours["PASSWORD"] or "")
        assert parsed["HOST"] == (ours["HOST"] or "127.0.0.1")
        assert int(parsed["PORT"]) == int(ours["PORT"] or 5432)


def test_a_password_and_odd_characters_survive_the_round_trip(monkeypatch):
    monkeypatch.setattr(
        connection,
        "settings_dict",
        {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "test_garden",
            "USER": "garden",
            "PASSWORD": "p@ss:w/rd",
            "HOST": "",
            "PORT": "",
        },
    )
    parsed = environ.Env.db_url_config(database_url())
    assert (parsed["USER"], parsed["PASSWORD"], parsed["HOST"], parsed["PORT"]) == (
        "garden",
        "p@ss:w/rd",
        "127.0.0.1",
        5432,
    )
    assert parsed["NAME"] == "test_garden"
