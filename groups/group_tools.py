"""The group tools the coordinator loop interprets itself (group.ask and group.request_help),
and the one context every other tool of a request runs in."""

from garden.providers.types import ToolSpec
from garden.tools import Tool, ToolContext, load_schema, register
from groups.models import Group, GroupRequest


def oversized_limit(cap_chars: int) -> int:
    """A single tool result larger than half the room cap cannot be carried: it would crowd
    out the room (or overflow the model) on the member's next call."""
    return max(1_000, cap_chars // 2)


def tool_context(*, request: GroupRequest, group: Group, agent_id: int) -> ToolContext:
    """Where ``agent_id``'s tool runs for ``request``, whether in its step or once approved:
    from trusted rows only. In an agent's own room it runs outside any group (its memory is the
    agent's private one), as the seed's 1:1 chat does."""
    return ToolContext(
        owner_id=group.owner_id,
        agent_id=agent_id,
        conversation_id=request.conversation_id,
        group_id=None if group.is_solo else group.pk,
        request_id=request.pk,
        output_chars=oversized_limit(group.room_cap_chars),
    )


GROUP_ASK = register(
    Tool(
        spec=ToolSpec(
            name="group.ask",
            description="Ask one member of this group for a contribution. Members answer one at a "
            "time; their answers come back as this call's result. Several asks in one reply are "
            "answered together, in order.",
            parameters=load_schema("group-ask.schema.json"),
        ),
        handler=None,
        loop_handled=True,
    )
)

GROUP_REQUEST_HELP = register(
    Tool(
        spec=ToolSpec(
            name="group.request_help",
            description="Ask the coordinator to schedule another member's help after you. The "
            "member must be in this group and in your delegation allowlist.",
            parameters=load_schema("group-request-help.schema.json"),
        ),
        handler=None,
        loop_handled=True,
    )
)
