"""Agent Father's offline script: what the maker carries out without a model (making an agent
by name, through its platform tool and so after its owner's approval), and, for anything
else, the list of what it understands. It says a change was made only when the tool's
result says so."""

from __future__ import annotations

from typing import Any

MAKER_SCRIPT_ACCOUNT_NAME = "Agent Father's script"

# What the offline maker understands, as it tells its owner.
UNDERSTOOD = (
    "Without a model I understand one request: “make me an agent called <name>” (or “create "
    "an agent named <name>”). I make it on the offline scripted account once you approve. "
    "For anything else — changing or archiving a group, giving an agent tools — move me to a "
    "real model on my page, or use the dashboard's forms."
)

# Rules that answer what a platform tool said; a maker script with its own requests (the
# demo's rename) puts them first too.
MAKER_RESULT_RULES: list[dict[str, Any]] = [
    {
        "after_tool_error": True,
        "reply": "Nothing was changed — it did not go through: {error}",
    },
    {
        "after_tool_result": True,
        "reply": "Done: I made the agent {result.agent.name} (@{result.agent.handle}). It "
        "answers from the offline script until you give it a model on its page.",
    },
    {"after_tool_result": True, "reply": "The tool answered: {result}"},
]

MAKE_AGENT_RULE: dict[str, Any] = {
    "when": "agent called|agent named",
    "capture": {"name": "called|named"},
    "reply": {
        "text": "I'll make the agent {name} (@{name:handle}).",
        "tool_calls": [
            {
                "name": "platform.create_agent",
                "arguments": {
                    "handle": "{name:handle}",
                    "name": "{name}",
                    "instructions": "You are {name}.",
                },
            }
        ],
    },
}

MAKER_SCRIPT: dict[str, Any] = {
    "rules": [*MAKER_RESULT_RULES, MAKE_AGENT_RULE],
    "default": UNDERSTOOD,
}
