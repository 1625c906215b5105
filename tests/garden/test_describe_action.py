"""A tool call in words, as approval cards, Telegram and activity lines say it."""

import pytest

from garden.tools import describe_action


@pytest.mark.parametrize(
    ("name", "arguments", "said"),
    [
        ("file.write", {"title": "plan.md", "content": "x"}, "write plan.md"),
        ("file.write", {"content": "x"}, "write a document"),
        ("file.write", {"title": "{content}"}, "write {content}"),
        ("http.fetch", {"url": "https://example.org/"}, "fetch https://example.org/"),
        ("memory.remember", {"text": "x"}, "remember a note"),
        ("file.read", {"artifact": 12}, "read artifact 12"),
        ("platform.update_group", {"group": 3}, "change a group"),
        ("no.such_tool", {}, "use no.such_tool"),
        ("file.write", None, "write a document"),
    ],
)
def test_describe_action(name, arguments, said):
    assert describe_action(name, arguments) == said
