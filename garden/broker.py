"""The embedded default's broker: kombu's filesystem transport, made safe for several
processes producing and consuming one folder at once (the web server, its worker, beat,
``make demo``).

kombu's own transport writes a message straight into the queue folder, where a reader can
find the file created but not yet written, and claims a message by moving it to the system's
temporary folder, a copy (not one atomic rename) when that is another filesystem, so two
readers can both take it. A reader that finds an empty file raises JSONDecodeError, which
stops the worker. Here a message is written beside the queue and renamed into it whole, and a
reader claims one by renaming it into its own folder on the same filesystem: only one rename
succeeds, and nothing reads a message before it is complete. A file that still cannot be
read (written by something else) is set aside in ``bad/`` and logged, never fatal.
"""

from __future__ import annotations

import logging
import os
import uuid
from functools import cached_property
from pathlib import Path
from queue import Empty
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

from garden.processes import alive

log = logging.getLogger(__name__)


# How often a reader looks for messages claimed by a process that has since died.
ORPHAN_CHECK_SECONDS = 30.0


class Channel(filesystem.Channel):
    _orphans_checked = float("-inf")

    @cached_property
    def _spool(self) -> Path:
        """Where messages are written before they are renamed into the queue folder, and
        where a reader's claimed messages wait to be read: beside the queue folder, so every
        move is a rename on one filesystem."""
        root = Path(self.data_folder_in).parent
        for name in ("incoming", "claimed", "bad"):
            (root / name).mkdir(parents=True, exist_ok=True)
        return root

    def _put(self, queue, payload, **kwargs):
        # Zero-padded, so names sort in the order they were written.
        name = f"{round(monotonic() * 1000):015d}_{uuid.uuid4()}.{queue}.msg"
        staged = self._spool / "incoming" / name
        try:
            with open(staged, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
                f.flush()
                os.fsync(f.fileno())
            os.replace(staged, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            staged.unlink(missing_ok=True)
            raise filesystem.ChannelError(f"Cannot add {name!r} to the queue") from exc

    def _get(self, queue):
        spool = self._spool
        if monotonic() - self._orphans_checked > ORPHAN_CHECK_SECONDS:
            self._orphans_checked = monotonic()
            _return_orphans(spool / "claimed", Path(self.data_folder_in))
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            claimed = spool / "claimed" / f"{name}.{os.getpid()}"
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except FileNotFoundError:
                continue  # another reader took it first
            try:
                payload = loads(bytes_to_str(claimed.read_bytes()))
            except (OSError, ValueError):
                log.error("broker: unreadable message %s set aside in bad/", name, exc_info=True)
                os.replace(claimed, spool / "bad" / name)
                continue
            claimed.unlink(missing_ok=True)
            return payload
        raise Empty()


def _return_orphans(claimed: Path, queue: Path) -> None:
    """Messages claimed by a process that is gone (it died between the claim and the read)
    go back to the queue."""
    for path in claimed.iterdir():
        name, _, pid = path.name.rpartition(".")
        if not pid.isdigit() or alive(int(pid)):
            continue
        try:
            os.rename(path, queue / name)
        except FileNotFoundError:
            continue
        log.warning("broker: message %s of a process that is gone returned to the queue", name)


class Transport(filesystem.Transport):
    Channel = Channel
    global_state = filesystem.virtual.BrokerState()
    driver_name = "garden-filesystem"
