"""A real MCP client (the official Python SDK, `mcp`, pinned by scripts/setup.sh)
against `gadget mcp` (stdio) or `gadget serve` (Streamable HTTP): the
integration tests in host/cli/tests/all/mcp.rs run it and read the JSON it
prints (one object) to check what a client sees.

Usage: client.py stdio GADGET_BINARY PLUGINS_DIR [POLICY]
       client.py http URL [TOKEN]
       client.py call URL TOKEN NAME ARGUMENTS_JSON   (one call; prints its text)
"""

import json
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
import httpx2


def text_of(result):
    return "".join(getattr(block, "text", "") for block in result.content)


async def scenario(session):
    report = {}
    await session.initialize()
    await session.set_logging_level("info")
    tools = (await session.list_tools()).tools
    report["tools"] = {
        t.name: {
            "title": t.title,
            "schema": t.input_schema,
            "annotations": t.annotations.model_dump(exclude_none=True) if t.annotations else None,
        }
        for t in tools
    }
    ok = await session.call_tool("Calculator", {"operation": "add", "a": 15, "b": 23})
    report["add"] = {"text": text_of(ok), "is_error": ok.is_error, "structured": ok.structured_content}
    bad = await session.call_tool("Calculator", {"operation": "add", "a": "x"})
    report["invalid"] = {"text": text_of(bad), "is_error": bad.is_error}
    failed = await session.call_tool("Calculator", {"operation": "divide", "a": 1, "b": 0})
    report["gadget_error"] = {"text": text_of(failed), "is_error": failed.is_error}
    unknown = await session.call_tool("NoSuchGadget", {})
    report["unknown"] = {"text": text_of(unknown), "is_error": unknown.is_error}
    timeout = await session.call_tool("Sleep", {"ms": 10000})
    report["timeout"] = {"text": text_of(timeout), "is_error": timeout.is_error}

    progress = []

    async def on_progress(value, total, message):
        progress.append(message)

    slept = await session.call_tool("Sleep", {"ms": 2200}, progress_callback=on_progress)
    report["progress"] = {"text": text_of(slept), "messages": progress}

    # A cancellation: the call is abandoned by the client after 300 ms;
    # the server must stop it (the next call answers at once).
    started = time.monotonic()
    with anyio.move_on_after(0.3):
        await session.call_tool("Sleep", {"ms": 2900})
    after = await session.call_tool("Calculator", {"operation": "multiply", "a": 6, "b": 7})
    report["cancel"] = {"elapsed": time.monotonic() - started, "after": text_of(after)}
    return report


async def one_call(url, token, name, arguments):
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as client:
        async with streamable_http_client(url, http_client=client) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                result = await session.call_tool(name, json.loads(arguments))
                print(json.dumps({"text": text_of(result), "is_error": result.is_error}))


async def main():
    mode = sys.argv[1]
    if mode == "call":
        await one_call(*sys.argv[2:6])
        return
    if mode == "stdio":
        args = ["--plugins", sys.argv[3]]
        if len(sys.argv) > 4:
            args += ["--config", sys.argv[4]]
        params = StdioServerParameters(command=sys.argv[2], args=args + ["mcp"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                report = await scenario(session)
    else:
        headers = {"Authorization": f"Bearer {sys.argv[3]}"} if len(sys.argv) > 3 else {}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            async with streamable_http_client(sys.argv[2], http_client=client) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write) as session:
                    report = await scenario(session)
    print(json.dumps(report))


anyio.run(main)
