// Drives a hierarchy's A2A agent with the real @a2a-js/sdk client (issue
// 25, item 3; e2e/a2aserver_test.go runs it and checks the outcomes
// against the API). Environment: BASE (the service's address), KEY (an API
// key), HIERARCHY and GATED (hierarchy ids; GATED's worker needs
// approval), OTHER_KEY (another tenant's key). Prints one JSON object.
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const { BASE, KEY, HIERARCHY, GATED, OTHER_KEY } = process.env;

function authFetch(key) {
  return (url, init = {}) => {
    const headers = new Headers(init.headers || {});
    headers.set('Authorization', `Bearer ${key}`);
    return fetch(url, { ...init, headers });
  };
}

async function clientFor(key, hierarchy) {
  const fetchImpl = authFetch(key);
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  }));
  // The trailing slash: the card path resolves against the agent's URL.
  return factory.createFromUrl(`${BASE}/a2a/${hierarchy}/`);
}

let n = 0;
function message(text, extra = {}) {
  return {
    message: {
      messageId: `m-${Date.now()}-${n++}`, role: Role.ROLE_USER,
      parts: [{ content: { $case: 'text', value: text } }],
      contextId: '', taskId: '', metadata: undefined, extensions: [], referenceTaskIds: [], ...extra,
    },
  };
}

const stateName = (s) => TaskState[s] ?? String(s);
const text = (parts) => (parts || []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

function taskView(t) {
  return {
    id: t.id, contextId: t.contextId, state: stateName(t.status?.state),
    statusText: text(t.status?.message?.parts),
    artifacts: (t.artifacts || []).map((a) => ({ id: a.artifactId, text: text(a.parts) })),
  };
}

function eventView(ev) {
  const p = ev.payload;
  switch (p?.$case) {
    case 'task': return { kind: 'task', id: p.value.id, state: stateName(p.value.status?.state) };
    case 'statusUpdate': return { kind: 'status', id: p.value.taskId, state: stateName(p.value.status?.state), seq: p.value.metadata?.sequence, text: text(p.value.status?.message?.parts) };
    case 'artifactUpdate': return {
      kind: 'artifact', id: p.value.taskId, artifactId: p.value.artifact?.artifactId, append: !!p.value.append,
      lastChunk: !!p.value.lastChunk, text: text(p.value.artifact?.parts), agentId: p.value.artifact?.metadata?.agent_id, seq: p.value.metadata?.sequence,
    };
    default: return { kind: p?.$case ?? 'unknown' };
  }
}

async function errorOf(fn) {
  try {
    await fn();
    return null;
  } catch (e) {
    return String(e?.message ?? e);
  }
}

const out = {};
const c = await clientFor(KEY, HIERARCHY);
const card = await c.getAgentCard();
out.card = {
  name: card.name, description: card.description, skills: card.skills.map((s) => s.id),
  interfaces: card.supportedInterfaces.map((i) => ({ url: i.url, binding: i.protocolBinding, version: i.protocolVersion })),
  streaming: card.capabilities?.streaming, push: !!card.capabilities?.pushNotifications,
  schemes: Object.keys(card.securitySchemes || {}),
};

// A blocking send: the run's end.
const first = await c.sendMessage(message('FIRST TASK'));
out.first = taskView(first.payload?.value ?? first);

// A streamed send.
const streamed = [];
for await (const ev of c.sendMessageStream(message('STREAMED TASK'))) streamed.push(eventView(ev));
out.streamed = streamed;

// A follow-up in the first task's context.
const second = await c.sendMessage(message('SECOND TASK', { contextId: out.first.contextId }));
out.second = taskView(second.payload?.value ?? second);

out.got = taskView(await c.getTask({ id: out.first.id, tenant: '', historyLength: undefined }));
const listed = await c.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 50, pageToken: '', includeArtifacts: false });
out.listed = listed.tasks.map((t) => ({ id: t.id, contextId: t.contextId, state: stateName(t.status?.state) }));
const thread = await c.listTasks({ tenant: '', contextId: out.first.contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 50, pageToken: '', includeArtifacts: true });
out.thread = thread.tasks.map((t) => t.id);

// A slow run: read its stream until an answer chunk, drop it, resubscribe
// after that event's sequence, then cancel the task.
const abort = new AbortController();
const before = [];
let slowId = '';
let resumeAfter = 0;
try {
  for await (const ev of c.sendMessageStream(message('SLOW TASK'), { signal: abort.signal })) {
    const v = eventView(ev);
    before.push(v);
    slowId = slowId || v.id;
    if (v.kind === 'artifact' && v.seq) {
      resumeAfter = v.seq;
      abort.abort();
    }
  }
} catch (e) {
  if (!abort.signal.aborted) throw e;
}
out.slowBefore = before;
out.slowResumeAfter = resumeAfter;
const after = [];
let cancelled = null;
for await (const ev of c.resubscribeTask({ id: slowId, tenant: '' }, { serviceParameters: { 'Last-Event-ID': String(resumeAfter) } })) {
  const v = eventView(ev);
  after.push(v);
  if (!cancelled && v.kind === 'artifact') cancelled = taskView(await c.cancelTask({ id: slowId, tenant: '', metadata: undefined }));
}
out.slowAfter = after;
out.cancelled = cancelled;
out.cancelAgain = await errorOf(() => c.cancelTask({ id: slowId, tenant: '', metadata: undefined }));

// An approval: input-required, answered on the task.
const g = await clientFor(KEY, GATED);
const gated = taskView(await g.sendMessage(message('GATED TASK')).then((r) => r.payload?.value ?? r));
out.gated = gated;
const approved = await g.sendMessage(message('approve go ahead', { taskId: gated.id, contextId: gated.contextId }));
out.approved = taskView(approved.payload?.value ?? approved);

// An approval answered with a streamed message: the stream picks up at
// the answer and runs to the end.
const gated2 = taskView(await g.sendMessage(message('GATED TWO TASK')).then((r) => r.payload?.value ?? r));
out.gated2 = gated2;
out.approvedStream = [];
for await (const ev of g.sendMessageStream(message('yes', { taskId: gated2.id, contextId: gated2.contextId }))) out.approvedStream.push(eventView(ev));

// Push notifications are refused.
out.push = await errorOf(() => c.createTaskPushNotificationConfig({ tenant: '', taskId: out.first.id, id: 'p1', url: 'http://127.0.0.1:9/hook', token: '', authentication: undefined }));

// Another tenant sees nothing.
out.otherCard = await errorOf(() => clientFor(OTHER_KEY, HIERARCHY));
const o = await new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch(OTHER_KEY) })],
})).createFromAgentCard(card);
out.otherGet = await errorOf(() => o.getTask({ id: out.first.id, tenant: '' }));
out.otherList = (await o.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 50, pageToken: '', includeArtifacts: false })).tasks.length;
out.otherSend = await errorOf(() => o.sendMessage(message('OTHER TASK')));

console.log(JSON.stringify(out));
