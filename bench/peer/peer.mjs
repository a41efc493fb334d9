// The peer of `executor bench` (issue 28): LangGraph.js 1.x with its
// PostgreSQL checkpointer, running the executor's reference hierarchy (a
// global supervisor; team "research" with a searcher and an analyst, which
// ends its turn without asking once both have worked; team "writing" with a
// writer; a final answer: 11 LLM calls, one after another) on the fake
// model of `executor bench --model-only`, and reporting the same figures
// the same way: run wall, model time on the run's critical path (from the
// fake's records, GET /v1/bench/calls), overhead per LLM call, efficiency.
//
//   node peer.mjs --model-url http://127.0.0.1:PORT/v1 --pg postgres://… [--runs 12] [--warmup 2] [--concurrency 1] [--json]
import { parseArgs } from "node:util";
import { randomUUID } from "node:crypto";
import { ChatOpenAI } from "@langchain/openai";
import { StateGraph, Annotation, START, END } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";

const { values: args } = parseArgs({
  options: {
    "model-url": { type: "string" },
    pg: { type: "string", default: process.env.BENCH_PEER_DATABASE_URL ?? "" },
    runs: { type: "string", default: "12" },
    warmup: { type: "string", default: "2" },
    concurrency: { type: "string", default: "1" },
    json: { type: "boolean", default: false },
  },
});
if (!args["model-url"] || !args.pg) {
  console.error("usage: node peer.mjs --model-url URL --pg POSTGRES_URL [--runs N] [--warmup N] [--concurrency C] [--json]");
  process.exit(2);
}
const modelURL = args["model-url"].replace(/\/$/, "");
const model = new ChatOpenAI({ model: "bench-fake", apiKey: "unused", streaming: true, configuration: { baseURL: modelURL }, maxRetries: 0 });

const teams = { research: ["searcher", "analyst"], writing: ["writer"] };
const preventDuplicate = { research: true, writing: false };

// The executor's routing block, which the fake model decides from.
const routing = (options, completed) =>
  "```json\n" + JSON.stringify({ options, completed, allow_finish: completed.length > 0 }) + "\n```";

// call asks the model (streaming) and returns the answer's text and the
// fake's call ids found in its stamps ("@call.index.µs ").
async function call(system, user, calls) {
  let text = "";
  for await (const chunk of await model.stream([["system", system], ["user", user]])) {
    text += typeof chunk.content === "string" ? chunk.content : "";
  }
  for (const m of text.matchAll(/@(\d+)\.\d+\.\d+ /g)) calls.add(Number(m[1]));
  return text;
}

const State = Annotation.Root({
  task: Annotation(),
  doneTeams: Annotation({ reducer: (_, b) => b, default: () => [] }),
  team: Annotation({ reducer: (_, b) => b, default: () => "" }),
  doneWorkers: Annotation({ reducer: (_, b) => b, default: () => [] }),
  worker: Annotation({ reducer: (_, b) => b, default: () => "" }),
  outputs: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  answer: Annotation({ reducer: (_, b) => b, default: () => "" }),
});

// build compiles the graph once; each run passes its set of call ids in
// its config (configurable.calls).
function build(checkpointer) {
  const g = new StateGraph(State)
    .addNode("global_supervisor", async (s, cfg) => {
      const calls = cfg.configurable.calls;
      const d = JSON.parse(await call("You lead the benchmark's teams.", `Task: ${s.task}\n\n${routing(Object.keys(teams), s.doneTeams)}`, calls));
      return { team: d.action === "dispatch" ? d.target : "", doneWorkers: [] };
    })
    .addNode("team_supervisor", async (s, cfg) => {
      const calls = cfg.configurable.calls;
      const workers = teams[s.team];
      if (preventDuplicate[s.team] && workers.every((w) => s.doneWorkers.includes(w))) {
        return { worker: "", doneTeams: [...s.doneTeams, s.team] };
      }
      const d = JSON.parse(await call(`You lead team ${s.team}.`, `Task: ${s.task}\n\n${routing(workers, s.doneWorkers)}`, calls));
      if (d.action === "dispatch") return { worker: d.target };
      return { worker: "", doneTeams: [...s.doneTeams, s.team] };
    })
    .addNode("run_worker", async (s, cfg) => {
      const calls = cfg.configurable.calls;
      const out = await call(`You are the ${s.worker} of team ${s.team}.`, `Task: ${s.task}\n\nContext: ${s.outputs.join("\n").slice(0, 2000)}`, calls);
      return { outputs: [out], doneWorkers: [...s.doneWorkers, s.worker] };
    })
    .addNode("final_answer", async (s, cfg) => ({ answer: await call("You lead the benchmark's teams.", `Task: ${s.task}\n\nResults:\n${s.outputs.join("\n")}`, cfg.configurable.calls) }))
    .addEdge(START, "global_supervisor")
    .addConditionalEdges("global_supervisor", (s) => (s.team ? "team_supervisor" : "final_answer"), ["team_supervisor", "final_answer"])
    .addConditionalEdges("team_supervisor", (s) => (s.worker ? "run_worker" : "global_supervisor"), ["run_worker", "global_supervisor"])
    .addEdge("run_worker", "team_supervisor")
    .addEdge("final_answer", END);
  return g.compile({ checkpointer });
}

async function records(ids) {
  const res = await fetch(`${modelURL}/bench/calls?ids=${[...ids].join(",")}`);
  return res.json();
}

// covered is the time some interval covers (µs), as loadgen.Covered.
function covered(spans) {
  spans = spans.filter(([a, b]) => b > a).sort((x, y) => x[0] - y[0]);
  let total = 0, cur = null;
  for (const [a, b] of spans) {
    if (!cur) cur = [a, b];
    else if (a > cur[1]) { total += cur[1] - cur[0]; cur = [a, b]; }
    else if (b > cur[1]) cur[1] = b;
  }
  if (cur) total += cur[1] - cur[0];
  return total;
}

async function run(graph, task) {
  const calls = new Set();
  const start = performance.now();
  const out = await graph.invoke({ task }, { configurable: { thread_id: randomUUID(), calls }, recursionLimit: 100 });
  const wallMS = performance.now() - start;
  if (!out.answer) throw new Error("run ended without an answer");
  const recs = await records(calls);
  const modelMS = covered(recs.map((r) => [r.received_us, r.finished_us])) / 1000;
  return { wallMS, modelMS, calls: calls.size };
}

function summary(xs) {
  if (xs.length === 0) return { n: 0 };
  const s = [...xs].sort((a, b) => a - b);
  const rank = (p) => s[Math.min(s.length, Math.max(1, Math.ceil(p * s.length))) - 1];
  return { n: s.length, min: s[0], p50: rank(0.5), p90: rank(0.9), p99: rank(0.99), max: s[s.length - 1], mean: s.reduce((a, b) => a + b, 0) / s.length };
}

const checkpointer = PostgresSaver.fromConnString(args.pg);
await checkpointer.setup();
const graph = build(checkpointer);
for (let i = 0; i < Number(args.warmup); i++) await run(graph, `peer warmup ${i}`);
const n = Number(args.runs), c = Number(args.concurrency);
const results = [];
let next = 0;
const t0 = performance.now();
await Promise.all(Array.from({ length: c }, async () => {
  while (next < n) {
    const i = next++;
    results.push(await run(graph, `peer run ${i}`));
  }
}));
const wallS = (performance.now() - t0) / 1000;
await checkpointer.end();
const report = {
  peer: "langgraph.js 1.x + PostgresSaver",
  runs: n, concurrency: c, warmup: Number(args.warmup), wall_s: wallS, runs_per_second: n / wallS,
  llm_calls_per_run: results.reduce((a, r) => a + r.calls, 0) / results.length,
  run_wall_ms: summary(results.map((r) => r.wallMS)),
  model_time_ms: summary(results.map((r) => r.modelMS)),
  overhead_per_call_ms: summary(results.map((r) => (r.wallMS - r.modelMS) / r.calls)),
  efficiency: summary(results.map((r) => r.modelMS / r.wallMS)),
};
if (args.json) {
  console.log(JSON.stringify(report, null, 2));
} else {
  const f = (s) => `p50 ${s.p50?.toFixed(1)}  min ${s.min?.toFixed(1)}  max ${s.max?.toFixed(1)}`;
  console.log(`peer (${report.peer}): ${n} runs at concurrency ${c} (+${report.warmup} warm-up), ${report.llm_calls_per_run} LLM calls per run`);
  console.log(`run wall ms:              ${f(report.run_wall_ms)}`);
  console.log(`overhead per LLM call ms: ${f(report.overhead_per_call_ms)}`);
  console.log(`efficiency p50 ${report.efficiency.p50.toFixed(3)}, ${report.runs_per_second.toFixed(2)} runs/s`);
}
