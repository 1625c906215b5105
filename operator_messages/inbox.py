"""The chat surface's reader of the inbox: reply copies at its top level, notes in notes/.

Only top-level files are replies, so an out-of-band note never shows as an ordinary reply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .paths import inbox_directory, notes_directory


@dataclass(frozen=True)
class InboxFile:
    name: str
    path: Path
    body: str
    meta: dict[str, str] = field(default_factory=dict)


def list_replies() -> list[InboxFile]:
    """Reply files at the top of the inbox, oldest first (names start with their time)."""
    return _list(inbox_directory())


def list_notes() -> list[InboxFile]:
    """Out-of-band notes, oldest first."""
    return _list(notes_directory())


def _list(directory: Path) -> list[InboxFile]:
    if not directory.is_dir():
        return []
    files = []
    for path in sorted(directory.iterdir()):
        # Dotfiles are writes in progress; directories (notes/) are other surfaces.
        if path.name.startswith(".") or path.suffix != ".md" or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # removed between the listing and the read
        meta, body = split_front_matter(text)
        files.append(InboxFile(name=path.name, path=path, body=body, meta=meta))
    return files


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """``---``-fenced ``key: value`` lines at the top, and the body after them."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 4)
    if end == -1:
        return {}, text
    meta: dict[str, str] = {}
    for line in text[4:end].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = value.strip()
    return meta, text[end + 5 :].lstrip("\n")
