"""Operator messages: the gardener's two note classes, tend_survey and recently_concluded.

The public names load on first use, because Django imports this package before models exist.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .emit import emit_recently_concluded, emit_tend_survey
    from .records import read_operator_message_records

__all__ = ["emit_recently_concluded", "emit_tend_survey", "read_operator_message_records"]

_HOMES = {
    "emit_tend_survey": ".emit",
    "emit_recently_concluded": ".emit",
    "read_operator_message_records": ".records",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(import_module(_HOMES[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
