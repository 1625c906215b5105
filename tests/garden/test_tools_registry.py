"""The tool registry fills once per process, safely from many worker threads at once."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RACE = """
import os, threading, django
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
django.setup()
from garden.tools import get_tool
barrier, seen = threading.Barrier(8), []
def look():
    barrier.wait()
    seen.append(get_tool("group.ask") is not None and get_tool("file.write") is not None)
threads = [threading.Thread(target=look) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(sum(seen))
"""


def test_eight_threads_of_a_fresh_process_all_see_the_built_in_tools(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", RACE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"GARDEN_VAR_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "8"
