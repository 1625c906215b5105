"""What this host's process table says: whether a process that left files behind still runs."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether ``pid`` runs on this host (one we may not signal still runs)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
