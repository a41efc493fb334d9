// A small A2A agent built on the real @a2a-js/sdk server (v1.0, JSON-RPC
// over express), for the A2A client tests (e2e/a2aclient_test.go) and the
// copy-paste example of docs/a2a-client.md. What it does depends on the
// text it is sent:
//   - "HANG": works forever, until the task is cancelled (CancelTask);
//   - "FAIL": ends the task failed; "ASK": asks for input (input-required);
//   - anything else: streams "echo: <first line>" as three artifact chunks
//     after a working status message, then completes.
// Environment: PORT (required); STREAMING=false makes the card say the
// agent does not stream; FAIL_FIRST=<n> answers the first n JSON-RPC
// requests with 503 (a flaky agent); CHUNK_DELAY_MS (default 30) is the
// pause before each chunk. It prints one line per thing the test
// watches: "LISTENING", "EXECUTE <taskId> <contextId>", "CANCEL <taskId>",
// "UNAVAILABLE <n>".
import express from 'express';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { Role, TaskState } from '@a2a-js/sdk';

const port = Number(process.env.PORT);
const streaming = process.env.STREAMING !== 'false';
let failFirst = Number(process.env.FAIL_FIRST || 0);
const chunkDelay = Number(process.env.CHUNK_DELAY_MS || 30);

const card = {
  name: 'echo-agent',
  description: 'Echoes the first line of what it is sent, in chunks.',
  version: '1.0.0',
  supportedInterfaces: [
    { url: `http://127.0.0.1:${port}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
  ],
  provider: undefined,
  capabilities: { streaming, pushNotifications: false, extensions: [] },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'echo', name: 'echo', description: 'echo', tags: ['echo'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
};

const text = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const agentMessage = (taskId, contextId, value) => ({
  messageId: crypto.randomUUID(), contextId, taskId, role: Role.ROLE_AGENT, parts: [text(value)],
  metadata: undefined, extensions: [], referenceTaskIds: [],
});
const status = (taskId, contextId, state, message) => AgentEvent.statusUpdate({
  taskId, contextId, status: { state, message, timestamp: new Date().toISOString() }, metadata: undefined,
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const cancelled = new Set();

class EchoExecutor {
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const input = ctx.userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    console.log(`EXECUTE ${taskId} ${contextId}`);
    if (!ctx.task) {
      bus.publish(AgentEvent.task({
        id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
        artifacts: [], history: [ctx.userMessage], metadata: undefined,
      }));
    }
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_WORKING, agentMessage(taskId, contextId, 'thinking')));
    if (input.includes('HANG')) {
      while (!cancelled.has(taskId)) await sleep(50);
      return; // cancelTask published the canceled status
    }
    if (input.includes('FAIL')) {
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_FAILED, agentMessage(taskId, contextId, 'the echo broke')));
      bus.finished();
      return;
    }
    if (input.includes('ASK')) {
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(taskId, contextId, 'which language?')));
      bus.finished();
      return;
    }
    const answer = `echo: ${input.split('\n')[0]}`;
    const third = Math.ceil(answer.length / 3);
    const chunks = [answer.slice(0, third), answer.slice(third, 2 * third), answer.slice(2 * third)];
    const artifactId = crypto.randomUUID();
    for (let i = 0; i < chunks.length; i++) {
      await sleep(chunkDelay);
      bus.publish(AgentEvent.artifactUpdate({
        taskId, contextId, append: i > 0, lastChunk: i === chunks.length - 1, metadata: undefined,
        artifact: { artifactId, name: 'answer', description: '', parts: [text(chunks[i])], metadata: undefined, extensions: [] },
      }));
    }
    bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED, undefined));
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    console.log(`CANCEL ${taskId}`);
    cancelled.add(taskId);
    bus.publish(status(taskId, '', TaskState.TASK_STATE_CANCELED, undefined));
    bus.finished();
  }
}

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new EchoExecutor());
const app = express();
app.use('/a2a/jsonrpc', (req, res, next) => {
  if (req.method === 'POST' && failFirst > 0) {
    failFirst--;
    console.log(`UNAVAILABLE ${failFirst}`);
    res.status(503).send('try again');
    return;
  }
  next();
});
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: () => handler.getAgentCard() }));
app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
app.listen(port, '127.0.0.1', () => console.log('LISTENING'));
