"""A real MCP client (the official Python SDK, `mcp`, pinned by scripts/setup-tests.sh)
against `gadget mcp` (stdio) or `gadget serve` (Streamable HTTP): the
integration tests in host/cli/tests/all/mcp.rs run it and read the JSON it
prints (one object) to check what a client sees.

Usage: client.py stdio GADGET_BINARY PLUGINS_DIR [POLICY]
       client.py http URL [TOKEN]
       client.py call URL TOKEN NAME ARGUMENTS_JSON   (one call; prints its text)
       client.py ask-stdio GADGET_BINARY PLUGINS_DIR   (ask-human, handshake era)
       client.py ask-http URL TOKEN                    (ask-human, protocol 2026-07-28)
       client.py swatch-stdio GADGET_BINARY PLUGINS_DIR TOOL   (a gadget that asks twice, then returns an image)
       client.py swatch-http URL TOKEN TOOL                    (the same, protocol 2026-07-28)
       client.py catalog-stdio GADGET_BINARY PLUGINS_DIR RESOURCE_URI SWATCH_URI PROMPT  (a palette example's catalog)
       client.py approve-stdio GADGET_BINARY PLUGINS_DIR POLICY  (approvals, handshake era)
       client.py approve-http URL TOKEN                (approvals, protocol 2026-07-28)

The ask modes call AskUser three times: answered ("blue"), declined, and
from a client without elicitation; they print what each call returned and
the questions the person was shown.
"""

import json
import sys
import time

import anyio
import mcp_types
from mcp import Client, ClientSession, MCPError, StdioServerParameters
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


def person(answer, shown):
    """A person at the client: reads the question, answers `answer` (or
    declines when it is None)."""

    async def elicit(context, params):
        shown.append(params.message)
        if answer is None:
            return mcp_types.ElicitResult(action="decline")
        return mcp_types.ElicitResult(action="accept", content={"answer": answer})

    return elicit


def outcome(result):
    return {"text": text_of(result), "is_error": result.is_error}


QUESTION = {"question": "Which colour should the button be?"}


async def ask_stdio(binary, plugins):
    params = StdioServerParameters(command=binary, args=["--plugins", plugins, "mcp"])
    report, shown = {}, []
    for key, callback in [
        ("answered", person("blue", shown)),
        ("declined", person(None, shown)),
        ("no_elicitation", None),
    ]:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, elicitation_callback=callback) as session:
                await session.initialize()
                report[key] = outcome(await session.call_tool("AskUser", QUESTION))
    report["shown"] = shown
    return report


async def ask_http(url, token):
    headers = {"Authorization": f"Bearer {token}"}
    report, shown = {}, []
    for key, callback in [
        ("answered", person("blue", shown)),
        ("declined", person(None, shown)),
        ("no_elicitation", None),
    ]:
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, elicitation_callback=callback) as client:
                try:
                    report[key] = outcome(await client.call_tool("AskUser", QUESTION))
                except MCPError as error:
                    # 2026-07-28: a client that did not declare what the
                    # call needs gets MissingRequiredClientCapability.
                    report[key] = {"error_code": error.code, "data": error.data}
                report["protocol"] = client.session.protocol_version
    report["shown"] = shown
    return report


def painter(shown):
    """A person choosing a swatch: green, then 8 pixels (whatever the second
    question's field is called)."""

    async def elicit(context, params):
        shown.append(params.message)
        fields = list(((params.requested_schema or {}).get("properties") or {}))
        if "colour" in fields:
            return mcp_types.ElicitResult(action="accept", content={"colour": "green"})
        return mcp_types.ElicitResult(action="accept", content={(fields or ["answer"])[0]: "8"})

    return elicit


def parts_of(result):
    """What a client sees of a result of several parts."""
    import base64

    images = []
    for part in result.content:
        if getattr(part, "type", "") == "image":
            data = base64.b64decode(part.data)
            images.append({"mime": part.mime_type, "bytes": len(data), "png": data[:8] == b"\x89PNG\r\n\x1a\n"})
    return {
        "is_error": result.is_error,
        "text": text_of(result),
        "images": images,
        "structured": result.structured_content,
    }


async def swatch_stdio(binary, plugins, tool):
    params = StdioServerParameters(command=binary, args=["--plugins", plugins, "mcp"])
    shown = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=painter(shown)) as session:
            await session.initialize()
            report = parts_of(await session.call_tool(tool, {}))
    report["shown"] = shown
    return report


async def swatch_http(url, token, tool):
    headers = {"Authorization": f"Bearer {token}"}
    shown = []
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, elicitation_callback=painter(shown)) as client:
            report = parts_of(await client.call_tool(tool, {}))
            report["protocol"] = client.session.protocol_version
    report["shown"] = shown
    return report


async def catalog_stdio(binary, plugins, colours_uri, swatch_uri, prompt):
    import base64

    params = StdioServerParameters(command=binary, args=["--plugins", plugins, "mcp"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            resources = await session.list_resources()
            templates = await session.list_resource_templates()
            colours = await session.read_resource(colours_uri)
            swatch = (await session.read_resource(swatch_uri)).contents[0]
            data = base64.b64decode(swatch.blob)
            rendered = await session.get_prompt(prompt, {"colour": "red"})
            completion = await session.complete(
                mcp_types.PromptReference(type="ref/prompt", name=prompt), {"name": "colour", "value": "b"}
            )
    return {
        "resources": [r.uri for r in resources.resources],
        "templates": [t.uri_template for t in templates.resource_templates],
        "colours": json.loads(colours.contents[0].text),
        "swatch": {"mime": swatch.mime_type, "png": data[:8] == b"\x89PNG\r\n\x1a\n"},
        "prompt": {
            "text": rendered.messages[0].content.text,
            "image": rendered.messages[1].content.mime_type,
        },
        "completion": completion.completion.values,
    }


def approver(decision, shown):
    """A person at the client deciding an approval: True, False, or None
    (declines the form)."""

    async def elicit(context, params):
        shown.append(params.message)
        if decision is None:
            return mcp_types.ElicitResult(action="decline")
        return mcp_types.ElicitResult(action="accept", content={"approve": decision})

    return elicit


APPROVALS = [("approved", True), ("declined", None), ("refused", False)]
SUM = {"operation": "add", "a": 15, "b": 23}


async def approve_stdio(binary, plugins, policy):
    args = ["--plugins", plugins, "--config", policy, "mcp"]
    params = StdioServerParameters(command=binary, args=args)
    report, shown = {}, []
    for key, decision in APPROVALS + [("no_elicitation", "none")]:
        callback = None if decision == "none" else approver(decision, shown)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, elicitation_callback=callback) as session:
                await session.initialize()
                report[key] = outcome(await session.call_tool("Calculator", SUM))
    report["shown"] = shown
    return report


async def approve_http(url, token):
    headers = {"Authorization": f"Bearer {token}"}
    report, shown = {}, []
    for key, decision in APPROVALS + [("no_elicitation", "none")]:
        callback = None if decision == "none" else approver(decision, shown)
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, elicitation_callback=callback) as client:
                report[key] = outcome(await client.call_tool("Calculator", SUM))
                report["protocol"] = client.session.protocol_version
    report["shown"] = shown
    return report


async def main():
    mode = sys.argv[1]
    if mode == "approve-stdio":
        print(json.dumps(await approve_stdio(sys.argv[2], sys.argv[3], sys.argv[4])))
        return
    if mode == "approve-http":
        print(json.dumps(await approve_http(sys.argv[2], sys.argv[3])))
        return
    if mode == "catalog-stdio":
        print(json.dumps(await catalog_stdio(*sys.argv[2:7])))
        return
    if mode == "swatch-stdio":
        print(json.dumps(await swatch_stdio(*sys.argv[2:5])))
        return
    if mode == "swatch-http":
        print(json.dumps(await swatch_http(*sys.argv[2:5])))
        return
    if mode == "ask-stdio":
        print(json.dumps(await ask_stdio(sys.argv[2], sys.argv[3])))
        return
    if mode == "ask-http":
        print(json.dumps(await ask_http(sys.argv[2], sys.argv[3])))
        return
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
