"""``manage.py rundashboard`` as a person runs it: one process serving the dashboard and, on the
embedded default, working the group's requests with its in-process worker."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.processes import interruptible

ROOT = Path(__file__).resolve().parents[2]
SEED = """
from django.contrib.auth import get_user_model
from groups.demo import household_finances
user = get_user_model().objects.create_user(username="demo", password="demo-pass-123")
print(household_finances(user).pk)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def embedded_env(tmp_path) -> dict[str, str]:
    """A fresh SQLite database and broker under ``tmp_path``: the embedded default."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["GARDEN_VAR_DIR"] = str(tmp_path)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120
    )
    return env


def serve(env: dict[str, str], port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "rundashboard", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=interruptible,  # it is stopped with SIGINT
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/dashboard/login/", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.2)  # waits FOR the server to answer, with a deadline
    proc.kill()
    pytest.fail(f"rundashboard did not answer: {proc.communicate()[0]}")


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=40)
    assert proc.returncode == 0, output
    return output


def manage_shell(env: dict[str, str], code: str) -> str:
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout


def sign_in(base: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=10)
    client.get("/dashboard/login/")
    token = client.cookies["csrftoken"]
    response = client.post(
        "/dashboard/login/",
        data={
            "username": "demo",
            "password": "demo-pass-123",
            "csrfmiddlewaretoken": token,
            "next": "/dashboard/",
        },
        headers={"Referer": f"{base}/dashboard/login/"},
    )
    assert response.status_code == 302, response.text
    client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
    return client


@pytest.mark.timeout(120)
def test_rundashboard_serves_and_works_requests_in_one_process(embedded_env):
    group_id = int(manage_shell(embedded_env, SEED).strip().splitlines()[-1])
    port = free_port()
    proc = serve(embedded_env, port)
    try:
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/static/dashboard/room.js").status_code == 200
        client = sign_in(base)
        assert client.get(f"/dashboard/groups/{group_id}/").status_code == 200
        posted = client.post(
            f"/api/groups/{group_id}/messages",
            json={"text": "Review this month's spending and help me decide how much I can save."},
        )
        assert posted.status_code == 202, posted.text
        deadline = time.monotonic() + 30
        texts: list[str] = []
        while time.monotonic() < deadline and not any(
            "Here is where you stand" in t for t in texts
        ):
            time.sleep(0.3)  # polls FOR the reply, with a deadline
            messages = client.get(f"/api/groups/{group_id}/messages").json()["messages"]
            texts = [b.get("text", "") for m in messages for b in m["content"]]
        assert any("Here is where you stand" in t for t in texts), texts
    finally:
        output = stop(proc)
    assert "embedded worker: 4 threads and beat in this process" in output


SLOW = """
from garden.models import ModelAccount
for account in ModelAccount.objects.filter(owner__username="demo"):
    account.options = {**account.options, "delay": 0.7}
    account.save(update_fields=["options"])
"""


@pytest.mark.timeout(180)
def test_a_request_of_a_server_killed_mid_step_is_answered_after_the_restart(embedded_env):
    group_id = int(manage_shell(embedded_env, SEED).strip().splitlines()[-1])
    manage_shell(embedded_env, SLOW)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = serve(embedded_env, port)
    try:
        client = sign_in(base)
        posted = client.post(f"/api/groups/{group_id}/messages", json={"text": "How much?"})
        assert posted.status_code == 202, posted.text
        request_id = posted.json()["request"]["id"]
        deadline = time.monotonic() + 30
        while (
            client.get(f"/api/groups/{group_id}/requests/{request_id}").json()["budget"][
                "working_reserved"
            ]
            < 1
        ):
            assert time.monotonic() < deadline, "the request never made a call"
            time.sleep(0.1)  # polls FOR the reservation, with a deadline
    finally:
        proc.kill()  # mid-step: a call reserved, its reply not yet written
        proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    proc = serve(embedded_env, port)
    try:
        client = sign_in(base)
        deadline = time.monotonic() + 60
        while (state := client.get(f"/api/groups/{group_id}/requests/{request_id}").json())[
            "state"
        ] not in (
            "completed",
            "failed",
            "stopped",
        ):
            assert time.monotonic() < deadline, state
            time.sleep(0.3)  # polls FOR the end, with a deadline
        assert state["state"] == "completed", state
    finally:
        output = stop(proc)
    assert "put back on their way" in output


@pytest.mark.timeout(60)
def test_with_redis_url_it_serves_only(embedded_env):
    # Nothing listens there: serving pages needs no broker, and no worker is started to need one.
    env = {**embedded_env, "REDIS_URL": "redis://127.0.0.1:9/0"}
    port = free_port()
    output = stop(serve(env, port))
    assert "REDIS_URL is set: serving only" in output
    assert "embedded worker" not in output


def sign_in_as_printed(proc: subprocess.Popen, port: int) -> None:
    """Read the first user's password from what the server printed and sign in with it."""
    lines = [proc.stdout.readline() for _ in range(3)]
    first = next((line for line in lines if line.startswith("first user:")), None)
    assert first is not None, f"no first user printed: {lines}"
    password = re.search(r"with the password (\S+) ", first).group(1)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    client.get("/dashboard/login/")
    signed_in = client.post(
        "/dashboard/login/",
        data={
            "username": "admin",
            "password": password,
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
            "next": "/dashboard/",
        },
        headers={"Referer": f"http://127.0.0.1:{port}/dashboard/login/"},
    )
    assert signed_in.status_code == 302, "the printed password signs in"


@pytest.mark.timeout(90)
def test_a_site_with_no_user_prints_how_to_sign_in_once(embedded_env):
    port = free_port()
    proc = serve(embedded_env, port)
    try:
        sign_in_as_printed(proc, port)
    finally:
        stop(proc)
    again = stop(serve(embedded_env, port))
    assert "first user" not in again, "printed once: the site has a user now"


@pytest.mark.timeout(150)
def test_after_the_demo_the_first_run_still_prints_a_password_that_signs_in(embedded_env):
    """The README's order: the demo first (its owner has no password), then the dashboard."""
    demo = subprocess.run(
        ["make", "-s", "demo"],
        cwd=ROOT,
        env=embedded_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    port = free_port()
    proc = serve(embedded_env, port)
    try:
        sign_in_as_printed(proc, port)
    finally:
        stop(proc)
    # The demo runs again on a site whose admin can sign in: nothing more is made or printed.
    subprocess.run(
        [sys.executable, "manage.py", "demo"], cwd=ROOT, env=embedded_env, check=True, timeout=120
    )
    assert "first user" not in stop(serve(embedded_env, port))


def test_a_taken_port_fails_before_anything_is_printed(embedded_env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run(
            ["make", "-s", "run", f"PORT={port}"],
            cwd=ROOT,
            env=embedded_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert run.returncode != 0
    assert f"127.0.0.1:{port} is already in use" in run.stderr
    assert f"PORT={port + 1}" in run.stderr, "it says what to do"
    assert "first user" not in run.stdout + run.stderr
    assert "garden dashboard:" not in run.stdout, "no address of a server that never started"
