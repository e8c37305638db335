// The official TypeScript MCP SDK's client (pinned in package.json) against
// `gadget mcp` (stdio) or `gadget serve` (Streamable HTTP): the integration
// test in host/cli/tests/all/mcp.rs runs it and reads the JSON it prints.
//
// Usage: node ts_client.mjs stdio GADGET_BINARY PLUGINS_DIR
//        node ts_client.mjs http URL TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, a, b] = process.argv.slice(2);
const transport =
  mode === "stdio"
    ? new StdioClientTransport({ command: a, args: ["--plugins", b, "mcp"], stderr: "ignore" })
    : new StreamableHTTPClientTransport(new URL(a), {
        requestInit: { headers: { Authorization: `Bearer ${b}` } },
      });
const client = new Client({ name: "gadget-host-ts-test", version: "1.0.0" });
// Bounded: a hung server must not hang the test.
const timer = setTimeout(() => {
  console.error("timed out");
  process.exit(2);
}, 30000);
await client.connect(transport);
const { tools } = await client.listTools();
const added = await client.callTool({ name: "Calculator", arguments: { operation: "add", a: 2, b: 3 } });
const refused = await client.callTool({ name: "Calculator", arguments: { operation: "pow" } });
console.log(
  JSON.stringify({
    protocol: transport.protocolVersion ?? null,
    tools: tools.map((t) => t.name),
    calculator_schema: tools.find((t) => t.name === "Calculator")?.inputSchema ?? null,
    added: { text: added.content[0]?.text, is_error: added.isError ?? false },
    refused: { text: refused.content[0]?.text, is_error: refused.isError ?? false },
  }),
);
clearTimeout(timer);
await client.close();
