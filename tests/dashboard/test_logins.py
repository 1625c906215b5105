"""Signing in on a shared site: wrong passwords lock a username (and an address) out of both
sign-in pages, the right password included, until the lockout passes or staff lift it; the
password policy refuses common and all-digit passwords."""

from __future__ import annotations

import io
import re
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from axes.utils import reset
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client

from dashboard.management.commands.rundashboard import Command as RunDashboard

pytestmark = pytest.mark.django_db


def sign_in(client: Client, path: str, username: str, password: str):
    return client.post(path, {"username": username, "password": password, "next": path})


@pytest.mark.parametrize("path", ["/dashboard/login/", "/admin/login/"])
def test_forty_wrong_passwords_lock_the_username_out(path, settings, django_user_model):
    settings.AXES_FAILURE_LIMIT = 10
    settings.GARDEN_LOGIN_SLOWDOWN_AFTER = 0  # the pair lock alone (the slow-down: its own tests)
    django_user_model.objects.create_superuser(username="boss", password="right-horse-battery")
    client = Client()
    answers = [sign_in(client, path, "boss", f"guess-{n}").status_code for n in range(40)]
    assert answers[:9] == [200] * 9  # the form again, "wrong password"
    assert answers[9:] == [429] * 31  # locked: the tenth failure locks
    locked = sign_in(client, path, "boss", "right-horse-battery")
    assert locked.status_code == 429 and "LOGIN_LOCKED" in locked.content.decode()
    assert "_auth_user_id" not in client.session
    # The lock is the username at this address: another address signs in.
    elsewhere = Client(REMOTE_ADDR="10.9.8.7")
    assert sign_in(elsewhere, path, "boss", "right-horse-battery").status_code == 302

    reset(username="boss")  # what staff do in the admin, or manage.py axes_reset_username
    reset(ip="127.0.0.1")
    assert sign_in(client, path, "boss", "right-horse-battery").status_code == 302
    assert client.session["_auth_user_id"]


def test_the_lockout_ends_after_its_cool_off(settings, django_user_model):
    settings.AXES_FAILURE_LIMIT = 3
    django_user_model.objects.create_user(username="ann", password="right-horse-battery")
    client = Client()
    for n in range(3):
        sign_in(client, "/dashboard/login/", "ann", f"guess-{n}")
    assert sign_in(client, "/dashboard/login/", "ann", "right-horse-battery").status_code == 429
    # The cool-off counts from the last failure: move every failure past it.
    AccessAttempt.objects.update(
        attempt_time=AccessAttempt.objects.first().attempt_time
        - settings.AXES_COOLOFF_TIME
        - timedelta(seconds=1)
    )
    assert sign_in(client, "/dashboard/login/", "ann", "right-horse-battery").status_code == 302


def test_behind_the_proxy_the_address_is_the_one_the_proxy_saw(settings, django_user_model):
    settings.GARDEN_BEHIND_PROXY = True
    settings.AXES_FAILURE_LIMIT = 3
    django_user_model.objects.create_user(username="bob", password="right-horse-battery")
    proxy = "172.18.0.5"
    attacker = Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="1.2.3.4, 10.0.0.66")
    for n in range(3):
        sign_in(attacker, "/dashboard/login/", f"spray{n}", "password1")
    assert AccessAttempt.objects.filter(ip_address="10.0.0.66").exists()
    # Everyone else behind the same proxy still signs in.
    other = Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="10.0.0.77")
    assert sign_in(other, "/dashboard/login/", "bob", "right-horse-battery").status_code == 302


@pytest.mark.parametrize(
    ("password", "code"),
    [("password123", "password_too_common"), ("8264019375", "password_entirely_numeric")],
)
def test_common_and_all_digit_passwords_are_refused(password, code):
    with pytest.raises(ValidationError) as refused:
        validate_password(password)
    assert code in [e.code for e in refused.value.error_list]


def test_the_first_users_printed_password_passes_the_policy(settings, django_user_model):
    settings.PRODUCTION = False
    command = RunDashboard(stdout=io.StringIO())
    command._first_user()
    printed = command.stdout._out.getvalue()
    password = re.search(r"with the password (\S+) ", printed).group(1)
    admin = django_user_model.objects.get(username="admin")
    validate_password(password, admin)
    assert (
        Client()
        .post("/admin/login/", {"username": "admin", "password": password, "next": "/admin/"})
        .status_code
        == 302
    )
