"""Two processes emitting into one run at once: every line lands whole, none interleave."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings

from garden.runtime import context_to_env
from operator_messages.inbox import list_notes
from operator_messages.records import read_operator_message_log
from tests.operator_messages.helpers import start

PER_PROCESS = 500

# Runs in a fresh interpreter with the run context in its environment. The no-origin path
# touches no database row, so the child needs no database at all. The start is a barrier: each
# child says "ready" once Django is up and blocks on its stdin until the test says "go" to both.
CHILD = """
import sys
import django
django.setup()
from operator_messages import emit_tend_survey
tag, count = sys.argv[1], int(sys.argv[2])
print("ready", flush=True)
if sys.stdin.readline() != "go\\n":
    sys.exit(f"{tag}: no go")
for i in range(count):
    result = emit_tend_survey(f"{tag} survey {i}")
    if not result.ok:
        sys.exit(f"{tag} {i}: {result.code} {result.message}")
"""


@pytest.mark.django_db
def test_two_processes_append_a_thousand_whole_lines(runtime):
    _, run, ctx = start("tend")
    env = {
        **os.environ,
        **context_to_env(ctx),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "GARDEN_RUNTIME_ROOT": str(runtime),
        "GARDEN_NAME": settings.GARDEN_NAME,
    }
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, tag, str(PER_PROCESS)],
            env=env,
            cwd=settings.BASE_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("first", "second")
    ]
    for child in children:  # both are up before either starts
        assert child.stdout.readline() == "ready\n", child.stderr.read()
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    for child in children:
        _, err = child.communicate(timeout=240)
        assert child.returncode == 0, err

    raw = (runtime / "runs" / run.run_id / "operator-messages.jsonl").read_bytes()
    assert raw.count(b"\n") == 2 * PER_PROCESS and raw.endswith(b"\n")
    log = read_operator_message_log(run.run_id)
    assert log.invalid == []
    assert len(log.records) == 2 * PER_PROCESS
    paths = {record["delivery_path"] for record in log.records}
    assert len(paths) == 2 * PER_PROCESS
    assert all((runtime / path).is_file() for path in paths)
    bodies = {note.body.strip() for note in list_notes()}
    assert bodies == {
        f"{tag} survey {i}" for tag in ("first", "second") for i in range(PER_PROCESS)
    }
