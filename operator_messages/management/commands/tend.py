"""``manage.py tend``: run the gardener's tend once and print where its note went."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from operator_messages.gardener import tend


class Command(BaseCommand):
    help = "Run the gardener's tend survey once and print the note's path."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--always-note",
            action="store_true",
            help="Leave a note even when nothing needs attention.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        result = tend(note_when_quiet=options["always_note"])
        if result.note_path:
            self.stdout.write(result.note_path)
        else:
            self.stdout.write(f"no note: nothing needs attention (run {result.run_id})")
