// Drives Switchboard's /mcp with the TypeScript MCP SDK 1.x, as most TypeScript agents
// ship it, and prints what the SDK hands the agent for each call, one JSON object a line.
// Run by tests/agents/test_mcp_typescript.py: SWITCHBOARD_URL and SWITCHBOARD_TOKEN in the
// environment.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const transport = new StreamableHTTPClientTransport(new URL(`${process.env.SWITCHBOARD_URL}/mcp`), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.SWITCHBOARD_TOKEN}` } },
});
const client = new Client({ name: "switchboard-ts-test", version: "1.0.0" });
await client.connect(transport);

function say(step, value) {
  process.stdout.write(JSON.stringify({ step, ...value }) + "\n");
}

async function call(step, name, args) {
  try {
    const result = await client.callTool({ name, arguments: args });
    const text = result.content?.[0]?.text;
    say(step, {
      isError: result.isError === true,
      text: text ? JSON.parse(text) : null,
      structured: result.structuredContent ?? null,
    });
    return result;
  } catch (error) {
    say(step, { thrown: `${error.name}: ${error.message}`, code: error.code ?? null });
    return null;
  }
}

const { tools } = await client.listTools(); // the SDK now validates against output schemas
say("tools", { names: tools.map((tool) => tool.name).sort() });
const created = await call("create", "create_todo", { title: "from typescript" });
const claimed = await call("claim", "claim_next", { require_fence: true, claimant: "ts/1" });
const seq = claimed?.structuredContent?.attempt_seq;
const token = claimed?.structuredContent?.lease_token;
await call("conflict", "complete", { todo_id: created?.structuredContent?.todo?.id, attempt_seq: seq, lease_token: "wrong-" + token });
await call("not_found", "get_todo", { todo_id: 987654321 });
await call("invalid", "create_todo", { title: 5 });
await call("unknown_field", "create_todo", { title: "x", colour: "red" });
await call("complete", "complete", { todo_id: created?.structuredContent?.todo?.id, attempt_seq: seq, lease_token: token });
await client.close();
