// Drives Switchboard's /mcp with the MCP tasks extension's TypeScript client
// (@modelcontextprotocol/ext-tasks 0.2.2 on @modelcontextprotocol/client 2.x, protocol
// 2026-07-28), and prints what it saw, one JSON object a line ({"step": ..., ...}).
// Run by tests/agents/test_mcp_tasks_typescript.py:
//   SWITCHBOARD_URL, SWITCHBOARD_TOKEN in the environment; argv[2] the scenario
//   (complete | question | cancel), the task's result read with the package's own codec;
//   argv[3] the todo's title; argv[4] (question) the choice the elicitation handler accepts.
//   The cancel scenario cancels once a line arrives on stdin (the worker has claimed it).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  DispatchError,
  createApplicationInputHandler,
  createTaskSessionFromClient,
  resultFromTaskOutcome,
} from "@modelcontextprotocol/ext-tasks/client";

const [scenario, title, pick] = process.argv.slice(2);
const url = new URL(`${process.env.SWITCHBOARD_URL}/mcp`);
const auth = { Authorization: `Bearer ${process.env.SWITCHBOARD_TOKEN}` };
const clientInfo = { name: "switchboard-ext-tasks-test", version: "1.0.0" };
const clientCapabilities = { elicitation: { form: {} } };

function say(step, value = {}) {
  process.stdout.write(JSON.stringify({ step, ...value }) + "\n");
}

// A 2026-07-28 connection: server/discover, no initialize, no session.
const client = new Client(clientInfo, {
  capabilities: clientCapabilities,
  versionNegotiation: { mode: { pin: "2026-07-28" } },
});
await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: auth } }));
const protocolVersion = client.getNegotiatedProtocolVersion();
say("connected", {
  era: client.getProtocolEra(),
  protocolVersion,
  extensions: client.getServerCapabilities()?.extensions ?? null,
});

// The host's raw request path the package requires for V2 task traffic (tools/call and
// tasks/*: the SDK's own codecs reject resultType "task"): one JSON-RPC POST per request,
// the package's framed _meta in the body, the headers 2026-07-28 Streamable HTTP asks for.
let nextId = 1;
const sent = [];
async function rawDispatch(request, options = {}) {
  const id = `ext-tasks-${nextId++}`;
  const extra = { ...(options.context?.headers ?? {}) };
  const named = Object.keys(extra).find((k) => k.toLowerCase() === "mcp-name");
  const name = named ? extra[named] : request.method === "tools/call" ? request.params?.name : undefined;
  if (named) delete extra[named];
  const headers = {
    ...extra,
    ...auth,
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": request.params?._meta?.["io.modelcontextprotocol/protocolVersion"] ?? protocolVersion,
    "Mcp-Method": request.method,
    ...(name === undefined ? {} : { "Mcp-Name": name }),
  };
  const seen = { method: request.method, mcpName: name ?? null, meta: request.params?._meta ?? null };
  sent.push(seen);
  let response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers,
      body: JSON.stringify({ jsonrpc: "2.0", id, ...request }),
      signal: options.signal,
    });
  } catch (error) {
    if (options.signal?.aborted) throw error;
    throw new DispatchError(`POST ${request.method} failed: ${error}`, true, { cause: error });
  }
  const text = await response.text();
  let message;
  if ((response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    for (const line of text.split("\n")) {
      if (!line.startsWith("data:")) continue;
      const data = JSON.parse(line.slice(5));
      if (data.id === id) message = data;
    }
  } else {
    try {
      message = JSON.parse(text);
    } catch {
      message = undefined;
    }
  }
  seen.http = response.status;
  seen.answer = message?.error ?? message?.result ?? text.slice(0, 200);
  if (message?.error) return { kind: "error", error: message.error };
  if (message && "result" in message) return { kind: "result", result: message.result };
  throw new DispatchError(`${request.method}: HTTP ${response.status} ${text.slice(0, 200)}`);
}

const errors = [];
const session = createTaskSessionFromClient(client, {
  endpointId: "switchboard-test",
  rawDispatch,
  v2RequestFraming: { protocolVersion, clientInfo, clientCapabilities },
  onError: (error) => errors.push(String(error)),
  onInputRequest: createApplicationInputHandler({
    elicitation: async (request, context) => {
      const schema = request.params.requestedSchema;
      say("asked", {
        message: request.params.message,
        mode: request.params.mode ?? null,
        schema,
        inputId: context.inputId ?? null,
        taskId: context.taskId ?? null,
        delivery: context.delivery,
      });
      return { action: "accept", content: { answer: pick } };
    },
    sampling: async () => {
      throw new Error("no sampling here");
    },
    roots: async () => ({ roots: [] }),
  }),
});
say("session", { capabilities: session.capabilities });

function view(task) {
  return task === undefined
    ? null
    : { taskId: task.taskId, status: task.status, statusMessage: task.statusMessage ?? null };
}

try {
  const execution = await session.callTool("create_todo", { to: "worker", title });
  say("created", {
    kind: execution.kind,
    taskId: execution.handle?.taskId ?? null,
  });
  if (scenario === "cancel") {
    await nextLine(); // the worker has claimed it: the test says so on stdin
    await execution.cancel();
    const controller = session.task(execution.handle.taskId);
    const snapshot = await controller.snapshot();
    say("cancelled", { snapshot: view(snapshot), raw: snapshot.raw });
  } else {
    const { outcome, lastTask } = await execution.settle();
    const said = { status: outcome.status, lastTask: view(lastTask) };
    if (outcome.status === "completed") said.result = resultFromTaskOutcome(outcome);
    if (outcome.status === "failed") {
      said.error = String(outcome.error);
      said.causes = causes(outcome.error);
    }
    say("settled", said);
  }
} catch (error) {
  say("thrown", { error: `${error?.name}: ${error?.message}`, cause: String(error?.cause ?? "") });
} finally {
  say("wire", { sent, errors });
  await session.close();
  await client.close();
}

function nextLine() {
  return new Promise((resolve) => {
    process.stdin.once("data", () => {
      process.stdin.pause();
      resolve();
    });
  });
}

function causes(error) {
  // The error's cause chain, as the test reads it (a schema failure names its issues).
  const chain = [];
  for (let e = error?.cause; e !== undefined && chain.length < 5; e = e?.cause)
    chain.push(e?.issues ? { issues: e.issues } : String(e));
  return chain;
}
