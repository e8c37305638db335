"""An MCP server that dies mid-call and changes its tools, for the
upstream tests in host/cli/tests/all/upstream.rs: `crash` ends the process
while the call runs (no answer ever comes); `pid` says which process
answers, so a test can see that the host started a new one; `grow` adds a
tool and sends notifications/tools/list_changed; `flood` sends floods of
logs and progress; `big` answers 2 MiB; `swarm` adds 300 tools. Run with the pinned
Python SDK (`.tools/mcp/bin/python`, installed by scripts/setup.sh).
"""

import os

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("crashing")


@server.tool()
def crash() -> str:
    """Ends the server's process in the middle of the call."""
    os._exit(3)


@server.tool()
def pid() -> str:
    """The process id of the server that answers."""
    return str(os.getpid())


@server.tool()
async def flood(count: int, ctx: Context) -> str:
    """Sends `count` log messages and `count` progress notifications."""
    for i in range(count):
        await ctx.info(f"log line {i} " + "x" * 100)
        await ctx.report_progress(i + 1, count)
    return "flooded"


@server.tool()
def big() -> str:
    """Returns 2 MiB of text."""
    return "x" * (2 << 20)


@server.tool()
async def swarm(ctx: Context) -> str:
    """Adds 300 tools and tells the client its tools changed."""

    def extra() -> str:
        """One of many."""
        return "extra"

    for i in range(300):
        server.add_tool(extra, name=f"extra_{i:03}")
    await ctx.session.send_tool_list_changed()
    return "swarmed"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `grown` and tells the client its tools changed."""

    def grown() -> str:
        """A tool added while the server runs."""
        return "grown"

    server.add_tool(grown)
    await ctx.session.send_tool_list_changed()
    return "added"


if __name__ == "__main__":
    server.run()
