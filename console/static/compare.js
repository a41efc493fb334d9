// The compare page (/compare?a=<run>&b=<run>): two runs side by side, per
// agent: its answer (its text in the stored log, less what retries and
// fallbacks voided, as the run page's lanes), tokens and cost (the sums of
// its llm.usage events) and time (from its first event to its last). Made
// for a fork beside its origin (the run page links them) and for any two
// runs of one hierarchy. Each cell carries data-tokens, data-cost-usd and
// data-ms; a row whose answers differ has data-same="false".
import { call } from './api.js';
import { h, append, fmtCost, fmtDuration, fmtTime } from './dom.js';

export async function comparePage(main) {
  const params = new URLSearchParams(location.search);
  const a = params.get('a') || '';
  const b = params.get('b') || '';
  const pick = h('form', { method: 'get', action: '/compare', id: 'compare-form', class: 'inline' },
    h('label', {}, 'Run A ', h('input', { type: 'text', name: 'a', value: a, id: 'compare-a', size: 40 })),
    h('label', {}, 'Run B ', h('input', { type: 'text', name: 'b', value: b, id: 'compare-b', size: 40 })),
    h('button', { type: 'submit' }, 'Compare'));
  const out = h('div', { id: 'compare' });
  append(main, h('section', { class: 'panel' }, h('h2', {}, 'Compare runs'), pick), out);
  if (!a || !b) {
    append(out, h('p', { class: 'muted' }, 'Give two run ids (a run page links a fork to its origin and to other runs of its hierarchy).'));
    return;
  }
  const [ra, rb] = await Promise.all([load(a), load(b)]);
  render(out, ra, rb);
}

// load reads a run and its whole stored event log.
async function load(id) {
  const run = await call('/runs/get', { id });
  const events = [];
  let after = 0;
  for (;;) {
    const page = await call('/runs/events', { id, after, limit: 1000 });
    events.push(...(page.events || []));
    if (!page.has_more || !page.events || !page.events.length) break;
    after = page.next_after;
  }
  return { run, agents: perAgent(events) };
}

// perAgent sums one run's log by agent, in the order agents first speak.
function perAgent(events) {
  const agents = new Map();
  const get = (src) => {
    let a = agents.get(src.agent_id);
    if (!a) {
      a = { id: src.agent_id, name: src.agent_name || '', type: src.agent_type || '', team: src.team_name || '',
        calls: [], open: null, tokens: 0, cost: 0, unknown: false, first: null, last: null, models: new Set() };
      agents.set(src.agent_id, a);
    }
    return a;
  };
  for (const ev of events) {
    const src = ev.source || {};
    if (!src.agent_id || src.agent_type === 'operator') continue;
    const type = ev.event.category + '.' + ev.event.action;
    if (!type.startsWith('llm.')) continue;
    const a = get(src);
    const d = ev.data || {};
    const t = Date.parse(ev.timestamp);
    if (!Number.isNaN(t)) {
      if (a.first === null || t < a.first) a.first = t;
      if (a.last === null || t > a.last) a.last = t;
    }
    switch (type) {
      case 'llm.stream':
        if (!a.open || a.open.attempt !== d.attempt) {
          a.open = { attempt: d.attempt, text: '', void: false };
          a.calls.push(a.open);
        }
        a.open.text += d.content || '';
        break;
      case 'llm.retry':
        if (a.open && a.open.attempt === d.previous_attempt) a.open.void = true;
        a.open = null;
        break;
      case 'llm.fallback':
        if (a.open) a.open.void = true;
        a.open = null;
        break;
      case 'llm.usage':
        a.open = null;
        a.tokens += d.total_tokens || 0;
        if (d.cost_usd === null || d.cost_usd === undefined || d.cost_unknown) a.unknown = true;
        else a.cost += d.cost_usd;
        if (d.model) a.models.add(d.model);
        break;
      case 'llm.tool_call':
      case 'llm.tool_result':
        a.open = null;
        break;
      default:
    }
  }
  for (const a of agents.values()) a.answer = a.calls.filter((c) => !c.void).map((c) => c.text).join('');
  return agents;
}

function render(out, A, B) {
  const ra = A.run;
  const rb = B.run;
  const same = ra.hierarchy_id === rb.hierarchy_id;
  const relation = ra.forked_from && ra.forked_from.run_id === rb.id ? 'A is a fork of B (after event ' + ra.forked_from.sequence + ')'
    : rb.forked_from && rb.forked_from.run_id === ra.id ? 'B is a fork of A (after event ' + rb.forked_from.sequence + ')' : '';
  const head = (r, label) => h('th', { dataset: { run: label, runId: r.id } },
    'Run ' + label + ' ', h('a', { href: '/runs/' + encodeURIComponent(r.id) }, h('code', {}, r.id.slice(0, 12))), ' ',
    h('span', { class: 'badge status-' + r.status }, r.status), h('div', { class: 'muted' }, fmtTime(r.created_at)),
    h('div', { class: 'task' }, r.task));
  const runCell = (r, label) => h('td', { dataset: { run: label, tokens: r.usage.total_tokens, costUsd: r.usage.cost_usd } },
    r.usage.total_tokens + ' tokens · ' + fmtCost(r.usage.cost_usd, r.usage.cost_unknown) + ' · ' + fmtDuration(r.started_at, r.completed_at),
    h('div', { class: 'final-answer' }, r.final_answer || r.error || ''));
  const ids = [...A.agents.keys()];
  for (const id of B.agents.keys()) if (!A.agents.has(id)) ids.push(id);
  const cell = (x, label) => {
    if (!x) return h('td', { class: 'muted', dataset: { run: label, absent: 'true' } }, 'did not speak');
    const ms = x.first !== null ? x.last - x.first : 0;
    return h('td', { dataset: { run: label, tokens: x.tokens, costUsd: x.cost, ms } },
      h('div', { class: 'usage' }, x.tokens + ' tokens · ' + fmtCost(x.cost, x.unknown) + ' · ' + (ms / 1000).toFixed(1) + ' s' +
        (x.models.size ? ' · ' + [...x.models].join(', ') : '')),
      h('div', { class: 'answer' }, x.answer));
  };
  const rows = ids.map((id) => {
    const x = A.agents.get(id);
    const y = B.agents.get(id);
    const info = x || y;
    const eq = !!x && !!y && x.answer === y.answer && x.tokens === y.tokens;
    return h('tr', { dataset: { agentId: id, same: String(eq) }, class: eq ? '' : 'differs' },
      h('th', {}, h('span', { class: 'badge ' + info.type }, info.type.replace('_', ' ')), ' ', h('b', {}, info.name || id),
        ' ', h('code', { class: 'agent-id' }, id), info.team ? h('div', { class: 'muted' }, 'team ' + info.team) : null),
      cell(x, 'a'), cell(y, 'b'));
  });
  append(out, h('section', { class: 'panel' },
    relation ? h('p', { id: 'compare-relation' }, relation) : null,
    same ? null : h('p', { class: 'note warning', id: 'compare-other-hierarchy' }, 'These runs are of different hierarchies (' +
      (ra.hierarchy_name || ra.hierarchy_id) + ', ' + (rb.hierarchy_name || rb.hierarchy_id) + ').'),
    h('table', { class: 'list compare', id: 'compare-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Agent'), head(ra, 'a'), head(rb, 'b'))),
      h('tbody', {},
        h('tr', { class: 'run-row', id: 'compare-run-row' }, h('th', {}, 'The run'), runCell(ra, 'a'), runCell(rb, 'b')),
        rows))));
}
