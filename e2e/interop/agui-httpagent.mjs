// Follows one run's AG-UI stream with @ag-ui/client's HttpAgent, as
// docs/ag-ui.md's example does: it answers interrupts with runs/approve,
// and when the connection drops it reconnects with ?after=<the last
// metadata.sequence received>, keeping its messages.
//
//   node agui-httpagent.mjs BASE RUN_ID
//
// BASE is the API's /api/executor/v1 URL; AGUI_API_KEY, when set, is the
// API key it sends. It prints {"messages", "approved",
// "connections", "last"} and exits 1 if a connection fails for any other
// reason than a dropped stream, or if console.warn/error is called (the
// client warns about anything it strips).
import { HttpAgent } from "@ag-ui/client";

const [base, runId] = process.argv.slice(2);
const problems = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => problems.push(`console.${level}: ${args.map((a) => (a instanceof Error ? a.message : String(a))).join(" ")}`);
}

const headers = { Authorization: `Bearer ${process.env.AGUI_API_KEY || "test-key"}` };
let last = 0;
let over = false;
const approved = [];
const agent = new HttpAgent({ url: `${base}/runs/${runId}/stream?format=ag-ui`, headers });
agent.subscribe({
  onEvent: ({ event }) => {
    if (event.metadata?.sequence) last = event.metadata.sequence;
  },
  onRunFinishedEvent: async ({ outcome, interrupts }) => {
    if (outcome === "interrupt") {
      for (const i of interrupts) {
        await fetch(`${base}/runs/approve`, {
          method: "POST",
          headers: { ...headers, "Content-Type": "application/json" },
          body: JSON.stringify({ id: runId, approval_id: i.id }),
        });
        approved.push(i.id);
      }
    } else {
      over = true;
    }
  },
  onRunErrorEvent: () => {
    over = true;
  },
});

let connections = 0;
while (!over && connections < 10) {
  connections++;
  try {
    agent.pendingInterrupts = [];
    await agent.runAgent();
  } catch (err) {
    problems.push(`connection ${connections}: ${err.message}`);
  }
  agent.url = `${base}/runs/${runId}/stream?format=ag-ui&after=${last}`;
}
process.stdout.write(JSON.stringify({ messages: agent.messages, approved, connections, last }) + "\n");
if (problems.length > 0 || !over) {
  process.stderr.write([...problems, over ? "" : "the run never ended"].join("\n") + "\n");
  process.exit(1);
}
