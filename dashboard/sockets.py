"""Closing websockets from outside them: every room socket joins a channel group for its
user and one for its browser session, so signing out closes that session's sockets and a
deactivation (or a new password) closes all of the user's, in whichever process holds them."""

from __future__ import annotations

import hashlib

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

# The close code the page reads as "signed out": it goes to the sign-in page, not reconnecting.
SIGNED_OUT = 4401
# What the person may reach changed (they left a workspace): the page reconnects, and each
# socket is let in again only where they still may read (4403 where not).
REACH_CHANGED = 4000


def user_sockets(user_id: int) -> str:
    return f"garden.user.{user_id}"


def session_sockets(session_key: str) -> str:
    # A digest, so the session key (a bearer secret) is never a name in the channel layer.
    return "garden.session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def _close(group: str, code: int = SIGNED_OUT) -> None:
    async_to_sync(get_channel_layer().group_send)(group, {"type": "garden.close", "code": code})


def close_user_sockets(*, user_id: int) -> None:
    """Close every room socket of the user. Not after commit by itself: callers inside a
    transaction defer it (transaction.on_commit)."""
    _close(user_sockets(user_id))


def recheck_user_sockets(*, user_id: int) -> None:
    """Close every room socket of the user with REACH_CHANGED: each reconnects and is checked
    afresh, so a room of a workspace they left stops reaching them at once."""
    _close(user_sockets(user_id), REACH_CHANGED)


def close_session_sockets(*, session_key: str) -> None:
    _close(session_sockets(session_key))
