"""Which turn is a reply, and the clipping of what a notification says (pure functions)."""

from hypothesis import given
from hypothesis import strategies as st

from notifications.payloads import TELEGRAM_TEXT_CHARS, clip, reply_text, telegram_text

TEXT = {"type": "text", "text": "Spending came to 2,100."}
CALL = {"type": "tool_call", "id": "c1", "name": "group.ask", "arguments": {}}
RESULT = {"type": "tool_result", "call_id": "c1", "content": "@ledger said: …"}
ARTIFACT = {"type": "artifact_ref", "artifact_id": 3, "kind": "text", "title": "Reply"}


def test_a_reply_is_visible_text_with_no_tool_call_or_result():
    assert reply_text([TEXT]) == "Spending came to 2,100."
    assert reply_text([TEXT, ARTIFACT]) == "Spending came to 2,100."
    # The coordinator's ask, and its answer as a tool result, are coordination.
    assert reply_text([{"type": "text", "text": "Asking Ledger."}, CALL]) == ""
    assert reply_text([RESULT]) == ""
    assert reply_text([{"type": "text", "text": "  "}]) == ""
    assert reply_text("not blocks") == ""


@given(st.text(max_size=10_000), st.integers(min_value=1, max_value=5_000))
def test_clipped_text_fits_and_keeps_its_start(text, limit):
    clipped = clip(text, limit)
    assert len(clipped) <= limit
    if len(text) <= limit:
        assert clipped == text
    else:
        assert clipped.endswith("…")
        assert text.startswith(clipped[:-1])


def test_telegrams_text_names_the_agent_and_the_group_and_fits():
    assert telegram_text(agent_name="Ledger", group_name="Household", text="Hi.") == (
        "Ledger in Household:\nHi."
    )
    assert telegram_text(agent_name="Ledger", group_name="", text="Hi.") == "Ledger:\nHi."
    assert len(telegram_text(agent_name="L", group_name="", text="x" * 9_000)) == (
        TELEGRAM_TEXT_CHARS
    )
