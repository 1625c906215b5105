"""The embedded default under load, with real processes: ``manage.py rundashboard`` (the web
server, its worker and beat in one process, SQLite and the filesystem broker under a fresh
var/) takes owner messages over HTTP for 20 groups, with Stops among them, and is SIGKILLed
and started again halfway. Every request must end completed or stopped, none left behind,
none worked twice (the harness's safety checks), and the server must never log a worker's
"Unrecoverable error".

Run: python bench/embedded_stress.py [--groups 20] [--messages 500] [--stop-every 40]
About two minutes on 2 cores. Nothing here touches the network beyond loopback.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.support import CAPACITY_ENV  # noqa: E402

SEED = """
from django.contrib.auth import get_user_model
from groups.demo import household_finances
for i in range({groups}):
    user = get_user_model().objects.create_user(username=f"owner{{i}}", password="stress-pass-1")
    print("group", household_finances(user).pk)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``rundashboard`` on the embedded default, its output kept in a log file."""

    def __init__(self, env: dict[str, str], port: int, log: Path) -> None:
        self.env, self.port, self.log = env, port, log
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        out = self.log.open("a")
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "rundashboard", f"127.0.0.1:{self.port}"],
            cwd=ROOT,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/dashboard/login/", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.2)
        raise SystemExit(f"rundashboard did not answer; see {self.log}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(60)


def sign_in(base: str, username: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30)
    client.get("/dashboard/login/")
    response = client.post(
        "/dashboard/login/",
        data={
            "username": username,
            "password": "stress-pass-1",
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
            "next": "/dashboard/",
        },
        headers={"Referer": f"{base}/dashboard/login/"},
    )
    if response.status_code != 302:
        raise SystemExit(f"sign-in of {username} failed: {response.status_code}")
    client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
    return client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--stop-every", type=int, default=40, help="a Stop after every N posts")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    var = Path(tempfile.mkdtemp(prefix="garden-stress-"))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(CAPACITY_ENV)
    env.update(
        GARDEN_VAR_DIR=str(var),
        GARDEN_THROTTLE_MESSAGES="100000/min",
        GARDEN_THROTTLE_WRITE="100000/min",
        GARDEN_THROTTLE_READ="100000/min",
        GARDEN_LOG_LEVEL="WARNING",
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    seeded = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SEED.format(groups=args.groups)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    groups = [
        int(line.split()[1]) for line in seeded.stdout.splitlines() if line.startswith("group ")
    ]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = Server(env, port, var / "server.log")
    server.start()
    clients = {g: sign_in(base, f"owner{i}") for i, g in enumerate(groups)}
    print(f"var/ in {var}; {len(groups)} groups; server log {server.log}", flush=True)

    started = time.monotonic()
    posted, stops, refused, restarted = [], 0, 0, False
    for n in range(1, args.messages + 1):
        group = rng.choice(groups)
        try:
            response = clients[group].post(
                f"/api/groups/{group}/messages", json={"text": f"Message {n}: how much?"}
            )
        except httpx.TransportError:
            response = None
        if response is not None and response.status_code == 202:
            posted.append(response.json()["request"]["id"])
        else:
            refused += 1
        if n % args.stop_every == 0:
            victim = rng.choice(groups)
            clients[victim].post(f"/api/groups/{victim}/stop", json={})
            stops += 1
        if not restarted and n >= args.messages // 2:
            server.kill()  # mid-load: steps in flight, tasks queued in the broker's folder
            server.start()
            restarted = True
            clients = {g: sign_in(base, f"owner{i}") for i, g in enumerate(groups)}
    print(
        f"posted {len(posted)} ({refused} refused), {stops} Stops, server SIGKILLed and "
        f"started again after message {args.messages // 2}",
        flush=True,
    )

    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from bench.fault_invariants import _snapshot_violations
    from groups.models import GroupRequest

    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        left = GroupRequest.objects.filter(pk__in=posted).exclude(
            state__in=GroupRequest.FINISHED_STATES
        )
        if not left.exists():
            break
        time.sleep(1)
    elapsed = time.monotonic() - started
    code = server.stop()
    states = dict(
        GroupRequest.objects.filter(pk__in=posted)
        .values_list("state")
        .annotate(n=django.db.models.Count("id"))
    )
    log = server.log.read_text(errors="replace")
    problems = []
    unfinished = GroupRequest.objects.filter(pk__in=posted).exclude(
        state__in=GroupRequest.FINISHED_STATES
    )
    problems += [f"request {r.pk} still {r.state}" for r in unfinished]
    problems += [
        f"request {r.pk} failed: {r.outcome_code}"
        for r in GroupRequest.objects.filter(pk__in=posted, state=GroupRequest.State.FAILED)
    ]
    problems += _snapshot_violations(posted, dict.fromkeys(posted, ""), {})
    if "Unrecoverable error" in log:
        problems.append("a worker stopped with an unrecoverable error (see the server log)")
    if code != 0:
        problems.append(f"the server exited {code} on SIGINT")
    print(f"finished in {elapsed:.0f} s: {states}; the server exited {code}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print(f"{len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
