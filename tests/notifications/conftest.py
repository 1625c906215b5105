"""Fixtures of the notifications tests: the local Bot API and a linked chat (the Telegram
tests'), and the groups the loop's tests build."""

from tests.groups.conftest import (
    group_factory,  # noqa: F401  (a fixture)
    writing_group,  # noqa: F401  (a fixture)
)
from tests.telegram.conftest import bot_api, linked  # noqa: F401  (fixtures)
