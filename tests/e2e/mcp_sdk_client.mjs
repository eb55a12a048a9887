// The official MCP TypeScript SDK client against `paddedcell mcp` (tests/e2e/test_mcp_clients.py).
// argv[2]: JSON {command, args, env, marker}. Prints one JSON object with what the client got.
// The SDK's callTool validates structuredContent against each tool's outputSchema.
import { createRequire } from "node:module";
import path from "node:path";

const cache = process.env.PADDEDCELL_MCP_CLIENTS;
if (!cache) throw new Error("PADDEDCELL_MCP_CLIENTS is not set (eval \"$(scripts/mcp-clients-env.sh)\")");
const require = createRequire(path.join(cache, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

const cfg = JSON.parse(process.argv[2]);
const transport = new StdioClientTransport({ command: cfg.command, args: cfg.args, env: cfg.env, stderr: "inherit" });
const client = new Client({ name: "paddedcell-e2e", version: "1.0.0" });
await client.connect(transport);
const out = { server: client.getServerVersion(), instructions: client.getInstructions() };
out.tools = (await client.listTools()).tools;
out.secret = await client.callTool({ name: "pcexec", arguments: { command: 'echo "db=$(pass_mgr get db)"' } });
out.unknown = await client.callTool({ name: "pcexec", arguments: { command: `touch ${cfg.marker}; echo $(pass_mgr get nosuchkey)` } });
out.started = await client.callTool({
  name: "pcexec",
  arguments: { command: "echo begin $(pass_mgr get db); sleep 0.3; echo finish $(pass_mgr get db)", background: true },
});
const sessionId = out.started.structuredContent?.sessionId;
out.polls = [];
for (let i = 0; i < 40; i++) {
  const polled = await client.callTool({ name: "pcprocess", arguments: { action: "poll", sessionId, timeout: 2000 } });
  out.polls.push(polled);
  if (polled.structuredContent?.status !== "running") break;
}
out.log = await client.callTool({ name: "pcprocess", arguments: { action: "log", sessionId } });
out.keys = await client.callTool({ name: "list_keys", arguments: {} });
out.prompt = await client.getPrompt({ name: "paddedcell" });
await client.close();
process.stdout.write(JSON.stringify(out));
