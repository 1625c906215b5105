"""A local MCP server over stdio, as an operator would run one (GARDEN_MCP_SERVERS "command"):
the SDK's FastMCP; its one tool says which greeting it was given and what TEAM_NAME is."""

import os

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

app = FastMCP("garden-stdio-test")


@app.tool(
    name="greet", description="Greet someone.", annotations=ToolAnnotations(readOnlyHint=True)
)
def greet(name: str) -> str:
    return f"hello {name} from {os.environ.get('TEAM_NAME', '?')}"


if __name__ == "__main__":
    app.run("stdio")
