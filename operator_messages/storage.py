"""Durable file writes: record lines are appended whole or not at all (whole delivery files are
staging's)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Callable
from pathlib import Path


def append_line(path: Path, line: bytes, *, unless: Callable[[bytes], bool] | None = None) -> bool:
    """Append one newline-terminated line to ``path`` in a single write, then fsync; whether
    it was appended. With ``unless``, the line is not appended when ``unless(the file's bytes)``
    holds, checked under the same lock as the append so no other writer slips in between.

    O_APPEND makes each write land at the end; the exclusive flock keeps writers in other
    processes from interleaving even where a single write would not be atomic, and lets a
    failed write be cut back off the file without racing anyone.
    """
    if not line.endswith(b"\n") or b"\n" in line[:-1]:
        raise ValueError("a record is exactly one line")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if unless is not None and unless(os.pread(fd, size, 0)):
            return False
        # A crash mid-line elsewhere must not glue that fragment onto this record.
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(errno.EIO, f"short write: {written} of {len(line)} bytes")
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)  # also releases the flock
    return True


def check_appendable(path: Path) -> None:
    """Raise OSError unless a line could be appended to ``path`` now (its directory made, the
    file opened for appending); writes nothing to the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644))


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_quietly(path: Path) -> None:
    with contextlib.suppress(
        FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError
    ):
        path.unlink()
