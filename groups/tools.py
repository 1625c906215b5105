"""The group tools the coordinator loop interprets itself: group.ask and group.request_help."""

from garden.providers.types import ToolSpec
from garden.tools import Tool, load_schema, register

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
