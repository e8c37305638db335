"""An MCP server that dies mid-call, for the upstream tests in
host/cli/tests/all/upstream.rs: `crash` ends the process while the call
runs (no answer ever comes); `pid` says which process answers, so a test
can see that the host started a new one. Run with the pinned Python SDK
(`.tools/mcp/bin/python`, installed by scripts/setup.sh).
"""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("crashing")


@server.tool()
def crash() -> str:
    """Ends the server's process in the middle of the call."""
    os._exit(3)


@server.tool()
def pid() -> str:
    """The process id of the server that answers."""
    return str(os.getpid())


if __name__ == "__main__":
    server.run()
