// The JavaScript A2A SDK (@a2a-js/sdk 1.3.0) as its README and samples use it, driven by
// tests/agents/test_a2a_js.py against a live Switchboard: the client is made from the public
// Agent Card (ClientFactory.createFromUrl), authenticates with the SDK's
// createAuthenticatingFetchWithRetry (Authorization: Bearer <endpoint token>), and each scenario
// prints what it saw as JSON lines on stdout ({"step": ...}), one as soon as it is seen, so the
// Python side can act as the worker in between. Where the Python side must act before the
// client goes on, the script waits for a line on stdin.
//
//   SWITCHBOARD_URL=... SWITCHBOARD_TOKEN=... node client.mjs <stream|ask|cancel|attempts>

import { createInterface } from 'node:readline';

import { Role, TaskState, taskStateToJSON } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
  withA2AExtensions,
  ServiceParameters,
} from '@a2a-js/sdk/client';

const ATTEMPTS_URI = 'urn:switchboard:a2a:attempts:v1';
const URL_ = process.env.SWITCHBOARD_URL;
const TOKEN = process.env.SWITCHBOARD_TOKEN;
const SCENARIO = process.argv[2] || process.env.SCENARIO;

function say(step, fields = {}) {
  process.stdout.write(JSON.stringify({ step, ...fields }) + '\n');
}

// The Python side writes a line when it has done its part.
const stdin = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function waitForGo(expected) {
  const { value, done } = await stdin.next();
  if (done || value.trim() !== expected) {
    throw new Error(`expected ${JSON.stringify(expected)} on stdin, got ${JSON.stringify(value)}`);
  }
}

// Every request the transport makes, with the headers it sent and the answer's (what the SDK
// says on the wire: A2A-Version, A2A-Extensions, Accept), reported as "wire" lines.
async function recordingFetch(url, init) {
  const sent = Object.fromEntries(new Headers(init?.headers).entries());
  let method = '';
  try {
    method = JSON.parse(init?.body ?? '{}').method ?? '';
  } catch {
    method = '';
  }
  const response = await fetch(url, init);
  delete sent.authorization;
  say('wire', {
    method,
    status: response.status,
    sent,
    contentType: response.headers.get('content-type'),
    extensionsAnswered: response.headers.get('a2a-extensions'),
  });
  return response;
}

const authenticatingFetch = createAuthenticatingFetchWithRetry(recordingFetch, {
  headers: async () => ({ Authorization: `Bearer ${TOKEN}` }),
  shouldRetryWithHeaders: async () => undefined, // a bad token stays refused
});

async function makeClient() {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: authenticatingFetch })],
    })
  );
  // The public card at /.well-known/agent-card.json (the default path).
  return factory.createFromUrl(URL_);
}

function textPart(text) {
  return {
    content: { $case: 'text', value: text },
    metadata: undefined,
    filename: '',
    mediaType: 'text/plain',
  };
}

function request(text, { to, taskId = '', returnImmediately } = {}) {
  return {
    tenant: '',
    metadata: to ? { to } : {},
    message: {
      messageId: `m-${Math.random().toString(36).slice(2)}`,
      role: Role.ROLE_USER,
      parts: [textPart(text)],
      taskId,
      contextId: '',
      extensions: [],
      metadata: {},
      referenceTaskIds: [],
    },
    configuration:
      returnImmediately === undefined
        ? undefined
        : { acceptedOutputModes: [], returnImmediately, historyLength: undefined },
  };
}

function part(p) {
  if (!p?.content) return { empty: true };
  const said = { [p.content.$case]: p.content.value };
  if (p.mediaType) said.mediaType = p.mediaType;
  if (p.metadata && Object.keys(p.metadata).length) said.metadata = p.metadata;
  return said;
}

function status(s) {
  if (!s) return null;
  return {
    state: taskStateToJSON(s.state),
    stateNumber: s.state,
    text: s.message?.parts?.map(part) ?? null,
    role: s.message ? s.message.role : null,
  };
}

function task(t) {
  return {
    id: t.id,
    contextId: t.contextId,
    status: status(t.status),
    artifacts: (t.artifacts ?? []).map((a) => ({
      artifactId: a.artifactId,
      name: a.name,
      parts: a.parts.map(part),
    })),
    history: (t.history ?? []).map((m) => ({ role: m.role, parts: m.parts.map(part) })),
    metadata: t.metadata ?? null,
  };
}

function event(e) {
  const p = e.payload;
  if (!p) return { case: null };
  switch (p.$case) {
    case 'task':
      return { case: 'task', task: task(p.value) };
    case 'statusUpdate':
      return {
        case: 'statusUpdate',
        taskId: p.value.taskId,
        status: status(p.value.status),
        metadata: p.value.metadata ?? null,
      };
    case 'artifactUpdate':
      return {
        case: 'artifactUpdate',
        taskId: p.value.taskId,
        lastChunk: p.value.lastChunk,
        artifact: {
          artifactId: p.value.artifact?.artifactId,
          name: p.value.artifact?.name,
          parts: (p.value.artifact?.parts ?? []).map(part),
        },
      };
    case 'message':
      return { case: 'message', parts: p.value.parts.map(part) };
    default:
      return { case: p.$case };
  }
}

function thrown(err) {
  return {
    name: err?.name ?? String(err),
    message: err?.message ?? String(err),
    code: err?.envelopeCode ?? null,
    isA2AError: err instanceof Error && 'reason' in err,
  };
}

// ---------------------------------------------------------------------------------------
// Scenarios

const scenarios = {
  // The card, the extended card, then a streamed message followed to its end while the
  // Python side claims and completes the todo.
  async stream(client) {
    const card = await client.getAgentCard(); // the extended card (the public one says so)
    say('card', {
      name: card.name,
      streaming: card.capabilities?.streaming ?? null,
      interfaces: card.supportedInterfaces.map((i) => ({
        url: i.url,
        binding: i.protocolBinding,
        version: i.protocolVersion,
      })),
      extensions: (card.capabilities?.extensions ?? []).map((e) => e.uri),
      skills: card.skills.map((s) => s.id),
      protocolVersion: client.protocolVersion,
    });
    const stream = client.sendMessageStream(
      request('Review pull request 12\nThe diff is small.', { to: 'worker' })
    );
    for await (const e of stream) {
      say('event', event(e));
    }
    say('end');
  },

  // A question: the stream ends at input-required; the client answers with the first of the
  // choices the question's data part offers, as a follow-up message naming the task.
  async ask(client) {
    let taskId = '';
    let asked = null;
    for await (const e of client.sendMessageStream(
      request('Deploy to production', { to: 'worker' })
    )) {
      const seen = event(e);
      say('event', seen);
      if (seen.case === 'task') taskId = seen.task.id;
      if (e.payload?.$case === 'statusUpdate') {
        if (e.payload.value.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
          asked = e.payload.value.status;
        }
      }
    }
    say('end');
    if (!asked) throw new Error('the stream ended without input-required');
    const data = asked.message.parts.find((p) => p.content?.$case === 'data');
    const answer = data.content.value.choices[0];
    const answered = await client.sendMessage(
      request(answer, { taskId, returnImmediately: true })
    );
    say('answered', { answer, task: 'messageId' in answered ? null : task(answered) });
  },

  // CancelTask of a task the Python side has claimed, then again (it has ended).
  async cancel(client) {
    const sent = await client.sendMessage(
      request('Long job', { to: 'worker', returnImmediately: true })
    );
    say('sent', { task: task(sent) });
    await waitForGo('claimed');
    const canceled = await client.cancelTask({ tenant: '', id: sent.id, metadata: {} });
    say('canceled', { task: task(canceled) });
    try {
      await client.cancelTask({ tenant: '', id: sent.id, metadata: {} });
      say('canceled_again', { thrown: null });
    } catch (err) {
      say('canceled_again', { thrown: thrown(err) });
    }
  },

  // GetTask plain, then with the attempts extension activated by the A2A-Extensions header
  // (the SDK's withA2AExtensions service parameter).
  async attempts(client) {
    const sent = await client.sendMessage(
      request('Flaky job', { to: 'worker', returnImmediately: true })
    );
    say('sent', { task: task(sent) });
    await waitForGo('worked');
    const plain = await client.getTask({ tenant: '', id: sent.id, historyLength: undefined });
    say('plain', { task: task(plain) });
    const extended = await client.getTask(
      { tenant: '', id: sent.id, historyLength: undefined },
      { serviceParameters: ServiceParameters.create(withA2AExtensions(ATTEMPTS_URI)) }
    );
    say('extended', { task: task(extended) });
  },
};

async function main() {
  if (!URL_ || !TOKEN || !scenarios[SCENARIO]) {
    throw new Error('set SWITCHBOARD_URL, SWITCHBOARD_TOKEN and a scenario: ' + Object.keys(scenarios));
  }
  const client = await makeClient();
  await scenarios[SCENARIO](client);
  say('done');
}

main()
  .then(() => process.exit(0))
  .catch((err) => {
    say('error', { thrown: thrown(err), cause: err?.cause ? thrown(err.cause) : null });
    process.exit(1);
  });
