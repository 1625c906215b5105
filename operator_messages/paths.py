"""Where operator messages live under the runtime root: the inbox, its notes/, run records."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

from garden.runtime import run_directory, runtime_root

RECORDS_FILENAME = "operator-messages.jsonl"
# A run id names a directory, so it must be one plain path segment.
RUN_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def garden_name() -> str:
    return str(settings.GARDEN_NAME)


def inbox_directory() -> Path:
    """The top-level reply surface: transcript-backed delivery copies only."""
    return runtime_root() / "inbox" / garden_name()


def notes_directory() -> Path:
    """Out-of-band notes, kept off the ordinary reply scan."""
    return inbox_directory() / "notes"


def inbox_relative(*parts: str) -> str:
    """A path under the inbox, relative to the runtime root, as records store it."""
    return "/".join(("inbox", garden_name(), *parts))


def is_run_id(value: object) -> bool:
    return isinstance(value, str) and RUN_ID_RE.fullmatch(value) is not None


def records_path(run_id: str) -> Path:
    if not is_run_id(run_id):
        raise ValueError(f"not a run id: {run_id!r}")
    return run_directory(run_id) / RECORDS_FILENAME
