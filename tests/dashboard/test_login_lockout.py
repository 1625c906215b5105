"""Wrong passwords must not lock the right person out: the lock is per username and address
together, a username guessed at from many addresses is slowed (429 LOGIN_SLOWED, a bounded
Retry-After), never locked, and a browser that signed in as that person before (its device
cookie) is let in past both."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client

from dashboard import logins

pytestmark = pytest.mark.django_db

RIGHT = "right-horse-battery"


def sign_in(client: Client, path: str, username: str, password: str):
    return client.post(path, {"username": username, "password": password, "next": path})


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def device_cookie_for(username: str, path: str = "/dashboard/login/") -> str:
    """The device cookie a real sign-in hands out (from a fresh address, then signed out)."""
    client = Client(REMOTE_ADDR="10.200.0.1")
    assert sign_in(client, path, username, RIGHT).status_code == 302
    return client.cookies[logins.DEVICE_COOKIE].value


def ten_guesses(username: str, addresses, path: str) -> list[int]:
    return [
        sign_in(Client(REMOTE_ADDR=address), path, username, f"guess-{n}").status_code
        for n, address in enumerate(addresses)
    ]


def pass_the_wait(username: str) -> None:
    """The slow-down counts from the last failure: move that failure back past the longest
    wait (as the clock would)."""
    key = logins.last_failure_key(username)
    cache.set(key, cache.get(key) - settings.GARDEN_LOGIN_SLOWDOWN_MAX_SECONDS - 1, 3600)


@pytest.mark.parametrize("path", ["/dashboard/login/", "/admin/login/"])
def test_guesses_from_ten_addresses_do_not_lock_bob_out(path, settings, django_user_model):
    settings.AXES_FAILURE_LIMIT = 10
    django_user_model.objects.create_superuser(username="bob", password=RIGHT)
    device = device_cookie_for("bob", path)
    answers = ten_guesses("bob", [f"10.66.0.{n}" for n in range(10)], path)
    # Five wrong passwords are answered as such; after them the username is slowed (the
    # slowed guesses are not even checked, so they do not count).
    assert answers == [200] * 5 + [429] * 5

    # With his device cookie, bob signs in at once from his own address.
    with_device = Client(REMOTE_ADDR="192.0.2.10")
    with_device.cookies[logins.DEVICE_COOKIE] = device
    assert sign_in(with_device, path, "bob", RIGHT).status_code == 302
    assert signed_in(with_device)

    # Without one he is slowed (never locked); once the wait has passed, the right password
    # lets him in.
    fresh = Client(REMOTE_ADDR="192.0.2.11")
    slowed = sign_in(fresh, path, "bob", RIGHT)
    assert slowed.status_code == 429 and "LOGIN_SLOWED" in slowed.content.decode()
    assert not signed_in(fresh)
    pass_the_wait("bob")
    assert sign_in(fresh, path, "bob", RIGHT).status_code == 302
    assert signed_in(fresh)


def test_mallorys_failures_at_a_shared_address_do_not_lock_alice_there(settings, django_user_model):
    settings.AXES_FAILURE_LIMIT = 10
    django_user_model.objects.create_user(username="alice", password=RIGHT)
    office = "203.0.113.7"  # everyone in the office behind one NAT
    for n in range(10):
        sign_in(Client(REMOTE_ADDR=office), "/dashboard/login/", "mallory", f"guess-{n}")
    for n in range(10):  # and spraying other usernames from there
        sign_in(Client(REMOTE_ADDR=office), "/dashboard/login/", f"user{n}", "password1")
    alice = Client(REMOTE_ADDR=office)
    assert sign_in(alice, "/dashboard/login/", "alice", RIGHT).status_code == 302
    assert signed_in(alice)


@pytest.mark.parametrize("path", ["/dashboard/login/", "/admin/login/"])
def test_failures_for_one_username_at_one_address_lock_that_pair(path, settings, django_user_model):
    settings.AXES_FAILURE_LIMIT = 3
    settings.GARDEN_LOGIN_SLOWDOWN_AFTER = 10  # the lock, not the slow-down, is under test
    django_user_model.objects.create_superuser(username="carol", password=RIGHT)
    there = Client(REMOTE_ADDR="198.51.100.5")
    assert [sign_in(there, path, "carol", f"guess-{n}").status_code for n in range(3)] == [
        200,
        200,
        429,
    ]
    locked = sign_in(there, path, "carol", RIGHT)
    body = locked.content.decode()
    assert locked.status_code == 429 and "LOGIN_LOCKED" in body
    assert "Django administration" not in body and "<title>" in body and "garden" in body
    assert not signed_in(there)
    # The same username from another address, and another username from this one, sign in.
    elsewhere = Client(REMOTE_ADDR="198.51.100.6")
    assert sign_in(elsewhere, path, "carol", RIGHT).status_code == 302
    django_user_model.objects.create_superuser(username="dave", password=RIGHT)
    assert sign_in(Client(REMOTE_ADDR="198.51.100.5"), path, "dave", RIGHT).status_code == 302


def test_a_device_cookie_lets_its_person_in_past_the_pair_lock(settings, django_user_model):
    settings.AXES_FAILURE_LIMIT = 3
    settings.GARDEN_LOGIN_SLOWDOWN_AFTER = 10
    django_user_model.objects.create_user(username="erin", password=RIGHT)
    device = device_cookie_for("erin")
    home = "198.51.100.9"  # someone on erin's own network guesses at her
    for n in range(3):
        sign_in(Client(REMOTE_ADDR=home), "/dashboard/login/", "erin", f"guess-{n}")
    assert sign_in(Client(REMOTE_ADDR=home), "/dashboard/login/", "erin", RIGHT).status_code == 429
    erin = Client(REMOTE_ADDR=home)
    erin.cookies[logins.DEVICE_COOKIE] = device
    assert sign_in(erin, "/dashboard/login/", "erin", RIGHT).status_code == 302
    # Her success reset the pair's count; the guesses lock it again.
    for n in range(3):
        sign_in(Client(REMOTE_ADDR=home), "/dashboard/login/", "erin", f"guess-{n}")
    # Another person's device cookie is no factor for erin.
    django_user_model.objects.create_user(username="frank", password=RIGHT)
    other = Client(REMOTE_ADDR=home)
    other.cookies[logins.DEVICE_COOKIE] = device_cookie_for("frank")
    assert sign_in(other, "/dashboard/login/", "erin", RIGHT).status_code == 429
    # A forged one neither.
    forged = Client(REMOTE_ADDR=home)
    forged.cookies[logins.DEVICE_COOKIE] = device[:-2] + "xx"
    assert sign_in(forged, "/dashboard/login/", "erin", RIGHT).status_code == 429


def test_a_stolen_device_cookie_is_no_endless_guessing(settings, django_user_model):
    settings.AXES_FAILURE_LIMIT = 3
    settings.GARDEN_LOGIN_SLOWDOWN_AFTER = 100
    django_user_model.objects.create_user(username="gina", password=RIGHT)
    thief = Client(REMOTE_ADDR="198.51.100.20")
    thief.cookies[logins.DEVICE_COOKIE] = device_cookie_for("gina")
    answers = [sign_in(thief, "/dashboard/login/", "gina", f"n{n}").status_code for n in range(6)]
    # Three failures with the cookie, then it stops exempting: three more lock the pair.
    assert answers == [200] * 5 + [429]
    locked = sign_in(thief, "/dashboard/login/", "gina", RIGHT)
    assert locked.status_code == 429 and "LOGIN_LOCKED" in locked.content.decode()


def test_the_slow_down_answers_login_slowed_with_a_bounded_retry_after(settings, django_user_model):
    settings.AXES_FAILURE_LIMIT = 1000
    settings.GARDEN_LOGIN_SLOWDOWN_AFTER = 3
    settings.GARDEN_LOGIN_SLOWDOWN_SECONDS = 4
    settings.GARDEN_LOGIN_SLOWDOWN_MAX_SECONDS = 20
    django_user_model.objects.create_user(username="hal", password=RIGHT)

    def guess(n: int):
        return sign_in(Client(REMOTE_ADDR=f"10.77.0.{n}"), "/dashboard/login/", "hal", "x")

    assert [guess(n).status_code for n in range(3)] == [200] * 3
    waits = []
    for n in range(6):
        slowed = guess(10 + n)
        body = slowed.content.decode()
        assert slowed.status_code == 429 and "LOGIN_SLOWED" in body
        assert "Django administration" not in body and "LOGIN_LOCKED" not in body
        waits.append(int(slowed["Retry-After"]))
        pass_the_wait("hal")
        assert guess(20 + n).status_code == 200  # after the wait a guess is checked again
    assert waits == [4, 8, 16, 20, 20, 20]  # grows with each failure, capped
    # A JSON client gets the error shape.
    slowed = Client(REMOTE_ADDR="10.77.1.1").post(
        "/dashboard/login/", {"username": "hal", "password": "x"}, HTTP_ACCEPT="application/json"
    )
    assert slowed.status_code == 429 and slowed.json()["code"] == "LOGIN_SLOWED"
    assert 0 < int(slowed["Retry-After"]) <= 20
    # Never a lock: past the wait the right password signs in.
    pass_the_wait("hal")
    hal = Client(REMOTE_ADDR="10.77.1.2")
    assert sign_in(hal, "/dashboard/login/", "hal", RIGHT).status_code == 302
