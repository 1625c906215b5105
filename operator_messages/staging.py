"""Delivery files staged under a temporary name and put in place once their emission commits.

The temporary name, ``.<name>.<run-id>.tmp`` beside the file, is one the inbox scans skip. Its
writer holds an exclusive flock on it from creation until the file is put in place or given
up, so a recovery that can take the lock knows the writer is gone (the kernel drops a dead
process's locks) and may decide the temp's fate from what committed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .paths import RUN_ID_RE
from .storage import fsync_directory, remove_quietly

TEMP_RE = re.compile(rf"\.(?P<name>[^/]+\.md)\.(?P<run_id>{RUN_ID_RE.pattern})\.tmp")


def temp_path(final: Path, run_id: str) -> Path:
    return final.with_name(f".{final.name}.{run_id}.tmp")


class StagedFile:
    """A file written under its temporary name and locked until placed, discarded or released.

    Released without being placed (say the caller's transaction rolled back and dropped the
    callback holding it), the temp stays for a recovery to remove; only the lock goes.
    """

    def __init__(self, final: Path, run_id: str, fd: int) -> None:
        self.final = final
        self.temp = temp_path(final, run_id)
        self._release = weakref.finalize(self, os.close, fd)

    @classmethod
    def write(cls, final: Path, run_id: str, text: str) -> StagedFile:
        """Write ``text`` under the temporary name of ``final``, fsynced with its directory
        entry. Raises OSError, leaving nothing, when it cannot."""
        final.parent.mkdir(parents=True, exist_ok=True)
        temp = temp_path(final, run_id)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            view = memoryview(text.encode("utf-8"))
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            fsync_directory(final.parent)
        except BaseException:
            remove_quietly(temp)
            os.close(fd)
            raise
        return cls(final, run_id, fd)

    def place(self) -> None:
        """Put the file in place (atomically) and let go of it. Raises OSError when it cannot,
        the temp then kept and still held."""
        os.replace(self.temp, self.final)
        fsync_directory(self.final.parent)
        self.release()

    def discard(self) -> None:
        remove_quietly(self.temp)
        self.release()

    def release(self) -> None:
        self._release()


def put_in_place(final: Path, run_id: str) -> bool:
    """Move the staged temp of ``final`` into place (whoever staged it); whether ``final`` is
    there now. Idempotent: a temp another process already moved is found in place."""
    try:
        os.replace(temp_path(final, run_id), final)
    except FileNotFoundError:
        return final.is_file()
    fsync_directory(final.parent)
    return True


@dataclass(frozen=True)
class Staged:
    """A temp found in a directory: where it is, the file it stands for, and its run."""

    temp: Path
    final: Path
    run_id: str


def list_staged(directory: Path, *, run_id: str | None = None) -> list[Staged]:
    """The staged temps directly in ``directory`` (of ``run_id``'s emissions, or of all)."""
    try:
        names = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        match = TEMP_RE.fullmatch(name)
        if match and (run_id is None or match["run_id"] == run_id):
            found.append(Staged(directory / name, directory / match["name"], match["run_id"]))
    return found


@contextlib.contextmanager
def abandoned(temp: Path) -> Iterator[bool]:
    """Whether ``temp`` is still there and its writer gone, holding its lock meanwhile so no
    other recovery decides on it at the same time."""
    try:
        fd = os.open(temp, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False  # its writer is alive, or another recovery has it
            return
        try:
            now = os.stat(temp)
        except FileNotFoundError:
            yield False  # put in place (or removed) while this waited for the lock
            return
        held = os.fstat(fd)
        yield (now.st_ino, now.st_dev) == (held.st_ino, held.st_dev)
    finally:
        os.close(fd)
