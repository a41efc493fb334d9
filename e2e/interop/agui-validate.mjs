// Validates the AG-UI event streams package agui encodes, with the AG-UI
// packages themselves (@ag-ui/core 1.0.0 and @ag-ui/client 1.0.0, as
// package-lock.json pins them): nobody here wrote the checks that matter.
//
//   node agui-validate.mjs FILE.jsonl
//
// FILE has one JSON object per line: {"stream": NAME, "seq": N, "sse": TEXT},
// TEXT being the Server-Sent Events the encoder wrote for the log event
// numbered N on the stream NAME. The stream "full" is a whole run from its
// start; a stream "resume@N" is the same run resumed after sequence N.
//
// For every stream it checks that
//   - @ag-ui/client's own SSE parser reads the frames, and the last frame of
//     each log event carries "id: N";
//   - every event validates against @ag-ui/core's zod schemas (EventSchemas);
//   - every TEXT_MESSAGE, TOOL_CALL, REASONING message and span, STEP and
//     SUBAGENT is opened before it is used and closed before the run ends,
//     by the same subagent;
//   - @ag-ui/client runs it through its whole inbound pipeline (compatibility
//     boundary, enforcement, verifyEvents, apply) without an error or a
//     warning (a warning is an event it stripped or dropped).
// A resumed stream is replayed by an agent that first read "full" up to
// sequence N (the client that lost its connection), and its messages at the
// end must equal those of the agent that read "full" whole: no gap, no
// duplicate. It prints {"messages": [...]} (what "full" leaves the agent
// with) and exits 1 on any failure, listing them on stderr.
import { readFileSync } from "node:fs";
import { from, Subject } from "rxjs";
import { AbstractAgent, parseSSEStream } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";

const failures = [];
const fail = (stream, msg) => failures.push(`${stream}: ${msg}`);

// The client reports what it stripped or dropped, and pipeline failures,
// on the console: any of it fails the check.
let current = "(setup)";
for (const level of ["warn", "error"]) {
  console[level] = (...args) => fail(current, `console.${level}: ${args.map((a) => (a instanceof Error ? a.message : typeof a === "string" ? a : JSON.stringify(a))).join(" ")}`);
}

const file = process.argv[2];
if (!file) {
  process.stderr.write("usage: node agui-validate.mjs FILE.jsonl\n");
  process.exit(2);
}
const streams = new Map(); // name → [{seq, sse}]
for (const line of readFileSync(file, "utf8").split("\n")) {
  if (!line.trim()) continue;
  const { stream, seq, sse } = JSON.parse(line);
  if (!streams.has(stream)) streams.set(stream, []);
  streams.get(stream).push({ seq, sse });
}
if (!streams.has("full")) {
  process.stderr.write(`${file}: no stream "full"\n`);
  process.exit(1);
}

// parse reads frames with the client's SSE parser; each event keeps the
// sequence of the log event it came from.
async function parse(name, frames) {
  const out = [];
  for (const { seq, sse } of frames) {
    const ids = [...sse.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    if (ids.length !== 1 || ids[0] !== seq || !sse.trimEnd().split("\n\n").at(-1).startsWith(`id: ${seq}\n`)) {
      fail(name, `sequence ${seq}: the last frame, and only it, must carry "id: ${seq}": ${JSON.stringify(sse.slice(0, 200))}`);
    }
    // The parser subscribes to its source at once: feed it after
    // subscribing to what it parses.
    const source = new Subject();
    const events = [];
    const done = new Promise((resolve, reject) => parseSSEStream(source).subscribe({ next: (e) => events.push(e), error: reject, complete: resolve }));
    source.next({ type: "data", data: new TextEncoder().encode(sse) });
    source.complete();
    await done;
    if (events.length === 0) fail(name, `sequence ${seq}: no event parsed`);
    for (const e of events) out.push({ seq, event: e });
  }
  return out;
}

function validate(name, events) {
  for (const { seq, event } of events) {
    const r = EventSchemas.safeParse(event);
    if (!r.success) fail(name, `sequence ${seq}: ${event.type} does not validate: ${r.error.message}`);
  }
}

// pairing checks that every opened thing is closed, by its opener, before
// the run ends, and used only while open.
function pairing(name, events) {
  let open = null; // per AG-UI run
  const reset = () => ({ text: new Map(), tool: new Map(), rmsg: new Map(), rspan: new Map(), step: new Map(), sub: new Map() });
  const opener = (map, id, owner, what, seq) => {
    if (map.has(id)) fail(name, `sequence ${seq}: ${what} ${id} opened twice`);
    map.set(id, owner);
  };
  const use = (map, id, owner, what, seq, close) => {
    if (!map.has(id)) return fail(name, `sequence ${seq}: ${what} ${id} used while not open`);
    if (map.get(id) !== owner) fail(name, `sequence ${seq}: ${what} ${id} opened by ${map.get(id)}, used by ${owner}`);
    if (close) map.delete(id);
  };
  for (const { seq, event: e } of events) {
    const owner = e.subagentRunId ?? "(root)";
    if (e.type === "RUN_STARTED") {
      if (open) fail(name, `sequence ${seq}: RUN_STARTED while a run is open`);
      open = reset();
      continue;
    }
    if (!open) {
      fail(name, `sequence ${seq}: ${e.type} outside a run`);
      continue;
    }
    switch (e.type) {
      case "TEXT_MESSAGE_START": opener(open.text, e.messageId, owner, "text message", seq); break;
      case "TEXT_MESSAGE_CONTENT": use(open.text, e.messageId, owner, "text message", seq, false); break;
      case "TEXT_MESSAGE_END": use(open.text, e.messageId, owner, "text message", seq, true); break;
      case "TOOL_CALL_START": opener(open.tool, e.toolCallId, owner, "tool call", seq); break;
      case "TOOL_CALL_ARGS": use(open.tool, e.toolCallId, owner, "tool call", seq, false); break;
      case "TOOL_CALL_END": use(open.tool, e.toolCallId, owner, "tool call", seq, true); break;
      case "REASONING_START": opener(open.rspan, e.messageId, owner, "reasoning span", seq); break;
      case "REASONING_END": use(open.rspan, e.messageId, owner, "reasoning span", seq, true); break;
      case "REASONING_MESSAGE_START": opener(open.rmsg, e.messageId, owner, "reasoning message", seq); break;
      case "REASONING_MESSAGE_CONTENT": use(open.rmsg, e.messageId, owner, "reasoning message", seq, false); break;
      case "REASONING_MESSAGE_END": use(open.rmsg, e.messageId, owner, "reasoning message", seq, true); break;
      case "STEP_STARTED": opener(open.step, `${owner}/${e.stepName}`, owner, "step", seq); break;
      case "STEP_FINISHED": use(open.step, `${owner}/${e.stepName}`, owner, "step", seq, true); break;
      case "SUBAGENT_STARTED":
        if (e.parentSubagentRunId !== undefined && !open.sub.has(e.parentSubagentRunId)) fail(name, `sequence ${seq}: subagent ${e.subagentRunId}'s parent ${e.parentSubagentRunId} is not open`);
        opener(open.sub, e.subagentRunId, e.subagentRunId, "subagent", seq);
        break;
      case "SUBAGENT_FINISHED":
      case "SUBAGENT_ERROR":
        use(open.sub, e.subagentRunId, e.subagentRunId, "subagent", seq, true);
        break;
      case "RUN_FINISHED":
      case "RUN_ERROR":
        for (const [what, map] of Object.entries(open)) {
          if (map.size > 0 && e.type === "RUN_FINISHED") fail(name, `sequence ${seq}: RUN_FINISHED with ${what} still open: ${[...map.keys()].join(", ")}`);
        }
        open = null;
        break;
    }
    if (e.subagentRunId !== undefined && !e.type.startsWith("SUBAGENT_") && !open?.sub.has(e.subagentRunId)) {
      fail(name, `sequence ${seq}: ${e.type} attributed to subagent ${e.subagentRunId}, which is not open`);
    }
  }
}

// ReplayAgent is an @ag-ui/client agent whose run is a recorded stream: the
// client's whole inbound pipeline runs on it, as on HttpAgent's.
class ReplayAgent extends AbstractAgent {
  constructor() {
    super({ threadId: "replay" });
    this.events = [];
  }
  run() {
    return from(this.events);
  }
}

async function replay(agent, name, events) {
  current = name;
  agent.events = events.map((x) => x.event);
  // A resumed connection carries on the same run: the interrupt an earlier
  // connection saw is answered by the server, not by this client.
  agent.pendingInterrupts = [];
  try {
    await agent.runAgent();
  } catch (err) {
    fail(name, `@ag-ui/client refused the stream: ${err.message}`);
  }
}

const parsed = new Map();
for (const [name, frames] of streams) {
  current = name;
  const events = await parse(name, frames);
  validate(name, events);
  pairing(name, events);
  parsed.set(name, events);
}

const full = parsed.get("full");
const whole = new ReplayAgent();
await replay(whole, "full", full);
const want = JSON.stringify(whole.messages);
for (const [name, events] of parsed) {
  const m = /^resume@(\d+)$/.exec(name);
  if (!m) continue;
  const after = Number(m[1]);
  const agent = new ReplayAgent();
  await replay(agent, `${name} (before the cut)`, full.filter((x) => x.seq <= after));
  await replay(agent, name, events);
  if (JSON.stringify(agent.messages) !== want) {
    fail(name, `messages after the resume differ from the whole stream's:\n got  ${JSON.stringify(agent.messages)}\n want ${want}`);
  }
}

process.stdout.write(JSON.stringify({ messages: whole.messages, streams: parsed.size }) + "\n");
if (failures.length > 0) {
  process.stderr.write(failures.join("\n") + "\n");
  process.exit(1);
}
