// The run page (/runs/<id>): the run's event stream drawn live. One lane
// per agent, grouped by team (each lane carries data-agent-id); text as it
// streams; tool cards pairing llm.tool_call and llm.tool_result by
// tool_execution_id; retries and fallbacks marked, the text they void
// greyed; the dispatch tree as it grows; approval gates with approve and
// reject buttons; tokens and cost per agent, team and run from llm.usage.
//
// The page is a function of the event log: events are applied in sequence
// order, each once. They are kept in sessionStorage, so a reload redraws
// them and resumes the stream after the last one (?after=); a dropped
// connection resumes the same way (EventSource's Last-Event-ID, or a new
// stream token when the old one has expired).
import { call, download } from './api.js';
import { h, append, clear, fmtCost, fmtTime } from './dom.js';
import { Steering } from './steer.js';

// Every event type the stream carries (docs/events.md, Event stream). EventSource
// delivers named events only to listeners of that name.
export const EVENT_TYPES = [
  'lifecycle.queued', 'lifecycle.started', 'lifecycle.completed', 'lifecycle.failed', 'lifecycle.cancelled', 'lifecycle.paused', 'lifecycle.resumed',
  'system.topology', 'system.warning', 'system.budget', 'system.error', 'system.supervisor_reassigned',
  'dispatch.team', 'dispatch.worker', 'dispatch.team_cancelled', 'dispatch.redirect',
  'llm.stream', 'llm.reasoning', 'llm.tool_call', 'llm.tool_result', 'llm.retry', 'llm.usage', 'llm.fallback', 'llm.artifact',
  'approval.requested', 'approval.resolved',
];
const TERMINAL = new Set(['lifecycle.completed', 'lifecycle.failed', 'lifecycle.cancelled']);
const GLOBAL = ''; // the lane group of agents without a team

// Usage sums tokens and cost; a call without a price makes the sum's cost
// unknown (the priced part is still shown).
class Usage {
  constructor() { this.tokens = 0; this.cost = 0; this.unknown = false; }
  add(d) {
    this.tokens += d.total_tokens || 0;
    if (d.cost_usd === null || d.cost_usd === undefined || d.cost_unknown) this.unknown = true;
    else this.cost += d.cost_usd;
  }
  show(el) {
    el.dataset.tokens = this.tokens;
    el.dataset.costUsd = this.cost;
    el.dataset.costUnknown = this.unknown;
    el.textContent = this.tokens + ' tokens · ' + fmtCost(this.cost, this.unknown);
  }
}

export async function runPage(main, runId) {
  const view = new RunView(main, runId);
  await view.start();
}

class RunView {
  constructor(main, runId) {
    this.runId = runId;
    this.main = main;
    this.last = 0; // the highest sequence applied
    this.gaps = 0;
    this.finished = false;
    this.agents = new Map(); // agent_id → lane state
    this.teams = new Map(); // team name → group state
    this.cards = new Map(); // tool_execution_id → card
    this.approvals = new Map(); // approval_id → card
    this.teamNodes = new Map(); // team name → its latest dispatch node
    this.usage = new Usage();
    this.cache = new EventCache(runId);
    this.build();
  }

  build() {
    this.statusEl = h('span', { class: 'badge', id: 'run-status' }, '…');
    this.connEl = h('span', { class: 'muted', id: 'connection' }, 'connecting');
    this.usageEl = h('span', { id: 'run-usage', class: 'usage' });
    this.usage.show(this.usageEl);
    this.taskEl = h('p', { class: 'task', id: 'run-task' });
    this.cancelBtn = h('button', { type: 'button', class: 'quiet', id: 'cancel-run', onclick: () => this.cancel() }, 'Cancel run');
    this.approvalsEl = h('section', { class: 'panel approvals', id: 'approvals', hidden: true }, h('h2', {}, 'Approvals'));
    this.lanesEl = h('div', { id: 'lanes' });
    this.treeRoot = h('ul', { class: 'tree', id: 'dispatch-tree' });
    this.notesEl = h('ul', { id: 'notes', class: 'notes' });
    this.finalEl = h('section', { class: 'panel', id: 'final', hidden: true });
    append(this.main,
      h('section', { class: 'panel run-head' },
        h('h2', {}, 'Run ', h('code', {}, this.runId), ' ', this.statusEl),
        h('p', { id: 'run-meta', class: 'muted' }), this.taskEl,
        h('p', {}, this.usageEl, ' · ', this.connEl, ' ', this.cancelBtn)),
      this.approvalsEl, this.finalEl,
      h('div', { class: 'run-grid' },
        this.lanesEl,
        h('aside', {}, h('section', { class: 'panel' }, h('h2', {}, 'Dispatch'), this.treeRoot),
          h('section', { class: 'panel' }, h('h2', {}, 'Notes'), this.notesEl))));
  }

  async start() {
    const run = await call('/runs/get', { id: this.runId });
    document.title = 'Run ' + this.runId.slice(0, 8) + ' · op-stack executor';
    this.setStatus(run.status);
    this.taskEl.textContent = run.task;
    append(document.getElementById('run-meta'), 'hierarchy ',
      h('a', { href: '/?h=' + encodeURIComponent(run.hierarchy_id) }, run.hierarchy_name || run.hierarchy_id),
      ' · created ' + fmtTime(run.created_at));
    // Steering (steer.js) follows the run's status and topology.
    this.steer = new Steering(this, run);
    this.main.querySelector('.run-head').after(this.steer.el);
    this.steer.status(run.status);
    // Redraw what this tab had (a reload), then stream what follows.
    for (const ev of this.cache.load()) this.apply(ev, false);
    document.body.dataset.resumedFrom = this.last;
    window.addEventListener('pagehide', () => this.cache.save());
    if (this.finished) {
      this.connEl.textContent = 'ended';
      return;
    }
    this.retryDelay = 500;
    await this.connect();
  }

  // connect opens the stream after the last event applied, with a fresh
  // run-scoped stream token (the API key never goes in a URL).
  async connect() {
    if (this.finished) return;
    let tok;
    try {
      tok = await call('/runs/stream-token', { id: this.runId });
    } catch (err) {
      this.connEl.textContent = 'cannot stream: ' + err.message;
      this.reconnectLater();
      return;
    }
    this.tokenExpires = Date.parse(tok.expires_at);
    // For people and tests: how many tokens this page took, until when the
    // last one may reconnect.
    document.body.dataset.streamTokens = (this.streamTokens = (this.streamTokens || 0) + 1);
    document.body.dataset.tokenExpires = this.tokenExpires;
    const es = new EventSource(tok.stream_url + '&after=' + this.last);
    this.es = es;
    const onEvent = (m) => {
      let ev;
      try {
        ev = JSON.parse(m.data);
      } catch {
        return; // not an event envelope
      }
      this.apply(ev, true);
    };
    for (const t of EVENT_TYPES) es.addEventListener(t, onEvent);
    es.addEventListener('message', onEvent);
    es.onopen = () => {
      this.retryDelay = 500;
      this.connEl.textContent = 'live';
      document.body.dataset.connection = 'live';
    };
    es.onerror = () => {
      if (this.finished) {
        es.close();
        return;
      }
      document.body.dataset.connection = 'reconnecting';
      this.connEl.textContent = 'reconnecting…';
      // EventSource retries by itself, with Last-Event-ID, while the token
      // is good; a refused reconnect closes it, and so do we once the token
      // has expired: a new token and a new stream after the last event.
      if (es.readyState === EventSource.CLOSED || Date.now() > this.tokenExpires - 2000) {
        es.close();
        this.reconnectLater();
      }
    };
  }

  reconnectLater() {
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => this.connect(), this.retryDelay);
    this.retryDelay = Math.min(this.retryDelay * 2, 15000);
  }

  async cancel() {
    this.cancelBtn.disabled = true;
    try {
      await call('/runs/cancel', { id: this.runId });
    } catch (err) {
      this.note(null, 'cancel: ' + err.message, 'error');
      this.cancelBtn.disabled = false;
    }
  }

  setStatus(s) {
    this.statusEl.textContent = s;
    this.statusEl.className = 'badge status-' + s;
    document.body.dataset.runStatus = s;
    this.cancelBtn.hidden = ['completed', 'failed', 'cancelled', 'timed_out'].includes(s);
    if (this.steer) this.steer.status(s);
  }

  // apply draws one event, once, in sequence order.
  apply(ev, live) {
    if (!ev || typeof ev.sequence !== 'number' || ev.sequence <= this.last) return;
    if ((ev.firstSequence || ev.sequence) !== this.last + 1) {
      // Only an event type this page does not listen for makes a gap.
      this.gaps += (ev.firstSequence || ev.sequence) - this.last - 1;
      document.body.dataset.gaps = this.gaps;
    }
    this.last = ev.sequence;
    document.body.dataset.lastSequence = this.last;
    const type = ev.event.category + '.' + ev.event.action;
    const handler = HANDLERS[type];
    if (handler) handler.call(this, ev, ev.data || {}, ev.source || {});
    if (live) this.cache.add(ev);
    if (TERMINAL.has(type)) {
      this.finished = true;
      if (this.es) this.es.close();
      this.connEl.textContent = 'ended';
      document.body.dataset.connection = 'ended';
      this.cache.save();
    }
  }

  // group is a team's lane group (GLOBAL for agents without a team).
  group(team) {
    let g = this.teams.get(team);
    if (!g) {
      const usageEl = h('span', { class: 'usage team-usage' });
      const lanes = h('div', { class: 'lanes' });
      const el = h('section', { class: 'team-group', dataset: { team } },
        h('h3', {}, team === GLOBAL ? 'Global supervisor' : h('span', {}, 'team ', h('b', {}, team)), ' ', usageEl), lanes);
      g = { el, lanes, usage: new Usage(), usageEl };
      g.usage.show(usageEl);
      this.teams.set(team, g);
      this.lanesEl.append(el);
    }
    return g;
  }

  // lane is an agent's lane, made on first sight (from system.topology, or
  // from an event of an agent the topology does not list: a sub-agent).
  lane(id, info = {}) {
    let a = this.agents.get(id);
    if (!a) {
      const team = info.team_name || GLOBAL;
      const usageEl = h('span', { class: 'usage agent-usage' });
      const body = h('div', { class: 'lane-body' });
      const gate = h('span', { class: 'badge gate', hidden: true }, 'waiting for approval');
      const el = h('article', { class: 'lane', dataset: { agentId: id, agentType: info.agent_type || '' } },
        h('header', {}, h('span', { class: 'badge ' + (info.agent_type || '') }, (info.agent_type || 'agent').replace('_', ' ')), ' ',
          h('b', {}, info.agent_name || id), ' ', h('code', { class: 'agent-id' }, id), ' ', gate, h('div', {}, usageEl)),
        body);
      a = { id, el, body, usage: new Usage(), usageEl, gate, open: null, team };
      a.usage.show(usageEl);
      this.agents.set(id, a);
      this.group(team).lanes.append(el);
    }
    return a;
  }

  laneOf(src) {
    return this.lane(src.agent_id, src);
  }

  // text appends streamed text (or reasoning) to the agent's open call,
  // opening one when there is none or the attempt changed.
  text(a, attempt, content, kind) {
    if (!a.open || a.open.attempt !== attempt) {
      const el = h('div', { class: 'call', dataset: { attempt } });
      a.open = { attempt, el, parts: {} };
      a.body.append(el);
    }
    let part = a.open.parts[kind];
    if (!part || part !== a.open.el.lastChild) {
      part = h('span', { class: kind });
      a.open.parts[kind] = part;
      a.open.el.append(part);
    }
    part.append(document.createTextNode(content));
    a.el.classList.add('active');
  }

  // supersede greys the agent's open call: its text was voided by a retry
  // or a fallback.
  supersede(a, why) {
    if (a.open) {
      a.open.el.classList.add('superseded');
      a.open.el.title = why;
      a.open = null;
    }
  }

  note(src, text, kind = 'info') {
    const li = h('li', { class: 'note ' + kind }, src && src.agent_id ? h('code', {}, src.agent_id + ' ') : null, text);
    this.notesEl.append(li);
    return li;
  }

  dispatchNode(parentList, label, data) {
    const li = h('li', { class: 'dispatch', dataset: data }, label, h('ul', {}));
    parentList.append(li);
    return li;
  }

  approvalCard(d, src) {
    const id = d.approval_id;
    if (this.approvals.has(id)) return this.approvals.get(id);
    const isTool = d.kind === 'tool';
    const comment = h('input', { type: 'text', class: 'comment', placeholder: 'comment (required to reject)' });
    const edit = h('textarea', { class: 'edit', rows: 2, 'aria-label': isTool ? 'arguments' : 'instruction' });
    edit.value = isTool ? (d.arguments || '') : (d.instruction || '');
    const original = edit.value;
    const error = h('p', { class: 'error' });
    const approve = h('button', { type: 'button', class: 'approve' }, 'Approve');
    const reject = h('button', { type: 'button', class: 'reject' }, 'Reject');
    const buttons = h('div', { class: 'buttons' }, comment, approve, reject);
    const card = h('div', { class: 'approval pending', dataset: { approvalId: id, agentId: d.agent_id || src.agent_id } },
      h('p', {}, h('b', {}, src.agent_name || d.agent_id), ' ', h('code', {}, d.agent_id || src.agent_id), ' ',
        isTool ? 'wants to call ' : 'waits to start',
        // An MCP tool reads as its server and tool, and why it waits (its
        // server's approval policy, or the agent's approval_tools).
        isTool ? h('code', { class: 'approval-tool' }, d.mcp_server ? 'mcp ' + d.mcp_server + '/' + d.mcp_tool : d.tool) : null,
        isTool && d.reason ? h('span', { class: 'muted approval-reason' }, ' (' + d.reason.replaceAll('_', ' ') + ')') : null,
        d.timeout_at ? h('span', { class: 'muted' }, ' · decided by default (' + d.default_decision + ') at ' + fmtTime(d.timeout_at)) : null),
      h('label', {}, isTool ? 'Arguments ' : 'Instruction ', edit), buttons, error);
    const decide = async (verb) => {
      error.textContent = '';
      const body = { id: this.runId, approval_id: id };
      if (comment.value.trim()) body.comment = comment.value.trim();
      if (verb === 'reject' && !body.comment) {
        error.textContent = 'Say why in the comment to reject.';
        return;
      }
      if (verb === 'approve' && edit.value !== original) {
        if (isTool) {
          try {
            body.arguments = JSON.parse(edit.value);
          } catch {
            error.textContent = 'The arguments must be a JSON object.';
            return;
          }
        } else body.instruction = edit.value;
      }
      approve.disabled = reject.disabled = true;
      try {
        await call('/runs/' + verb, body);
        card.dataset.sent = verb; // the stream's approval.resolved settles it
      } catch (err) {
        error.textContent = err.message;
        approve.disabled = reject.disabled = false;
      }
    };
    approve.addEventListener('click', () => decide('approve'));
    reject.addEventListener('click', () => decide('reject'));
    this.approvals.set(id, card);
    this.approvalsEl.append(card);
    this.approvalsEl.hidden = false;
    return card;
  }
}

// HANDLERS draw each event type; `this` is the RunView.
const HANDLERS = {
  'lifecycle.started'(ev, d) {
    this.setStatus('running');
    if (d.task) this.taskEl.textContent = d.task;
    if (d.offline) this.note(null, 'the offline model answers ' + (d.offline_agents || []).join(', '), 'warning');
    this.treeRoot.append(this.rootNode = h('li', { class: 'dispatch root', dataset: { agentId: ev.source.agent_id } },
      h('code', {}, ev.source.agent_id), ' global supervisor', h('ul', {})));
  },
  'system.topology'(ev, d) {
    if (this.steer) this.steer.topology(d);
    const gs = d.global_supervisor_agent || {};
    this.lane(gs.agent_id, { agent_type: 'global_supervisor', agent_name: gs.name });
    for (const t of d.teams || []) {
      const ts = t.team_supervisor_agent || {};
      this.lane(ts.agent_id, { agent_type: 'team_supervisor', agent_name: ts.name, team_name: t.name });
      for (const w of t.workers || []) this.lane(w.agent_id, { agent_type: 'worker', agent_name: w.name, team_name: t.name });
    }
  },
  'llm.stream'(ev, d, src) {
    this.text(this.laneOf(src), d.attempt, d.content || '', 'text');
  },
  'llm.reasoning'(ev, d, src) {
    this.text(this.laneOf(src), d.attempt, d.content || '', 'reasoning');
  },
  'llm.retry'(ev, d, src) {
    const a = this.laneOf(src);
    if (a.open && a.open.attempt === d.previous_attempt) this.supersede(a, 'voided by attempt ' + d.attempt);
    a.body.append(h('div', { class: 'retry-mark', dataset: { attempt: d.attempt } },
      '↻ retry: attempt ' + d.attempt + ' (attempt ' + d.previous_attempt + "'s text is void)"));
  },
  'llm.fallback'(ev, d, src) {
    const a = this.laneOf(src);
    this.supersede(a, 'voided by a fallback to ' + d.to);
    a.body.append(h('div', { class: 'retry-mark fallback' }, '⇢ fallback ' + d.from + ' → ' + d.to + ' (' + d.why + ')'));
  },
  'llm.usage'(ev, d, src) {
    const a = this.laneOf(src);
    a.open = null; // the call is complete: the next text is another call
    a.usage.add(d);
    a.usage.show(a.usageEl);
    const g = this.group(a.team);
    g.usage.add(d);
    g.usage.show(g.usageEl);
    this.usage.add(d);
    this.usage.show(this.usageEl);
  },
  'llm.tool_call'(ev, d, src) {
    const a = this.laneOf(src);
    a.open = null;
    const id = d.tool_execution_id || d.execution_id;
    if (this.cards.has(id)) return;
    const result = h('pre', { class: 'tool-result' });
    const state = h('span', { class: 'badge' }, 'running');
    // An MCP tool's card names its server and tool ('mcp docs/search'),
    // as the Web UI's activity summary does; a built-in's says 'tool'.
    const mcp = mcpTool(d);
    const card = h('div', { class: 'tool-card running' + (mcp ? ' mcp' : ''), dataset: mcp ? { toolExecutionId: id, tool: d.tool_name, mcpServer: mcp.server } : { toolExecutionId: id, tool: d.tool_name } },
      h('div', { class: 'tool-title' }, h('span', { class: 'muted' }, mcp ? 'mcp ' : 'tool '), h('b', {}, mcp ? mcp.server + '/' + mcp.tool : d.tool_name),
        ' ', state, ' ', h('code', { class: 'muted' }, id)),
      h('pre', { class: 'tool-input' }, typeof d.tool_input === 'string' ? d.tool_input : JSON.stringify(d.tool_input ?? d.arguments)),
      result);
    this.cards.set(id, { card, result, state });
    a.body.append(card);
  },
  'llm.tool_result'(ev, d, src) {
    const id = d.tool_execution_id || d.execution_id;
    if (!this.cards.has(id)) HANDLERS['llm.tool_call'].call(this, ev, { ...d, tool_input: '' }, src);
    const c = this.cards.get(id);
    const failed = d.is_error || d.status === 'failed';
    c.card.classList.remove('running');
    c.card.classList.add(failed ? 'failed' : 'completed');
    c.card.dataset.status = d.status || (failed ? 'failed' : 'completed');
    c.state.textContent = (failed ? 'failed' : 'completed') + (d.duration_ms !== undefined ? ' · ' + d.duration_ms + ' ms' : '') +
      (d.attempt > 1 ? ' · attempt ' + d.attempt : '');
    if (d.attempt > 1) c.card.dataset.attempt = String(d.attempt);
    const r = failed ? (d.error ?? d.result) : d.result;
    c.result.textContent = typeof r === 'string' ? r : JSON.stringify(r);
    this.laneOf(src).open = null;
  },
  'dispatch.team'(ev, d) {
    if (!this.rootNode) HANDLERS['lifecycle.started'].call(this, ev, {});
    const node = this.dispatchNode(this.rootNode.querySelector('ul'),
      [h('span', { class: 'badge team_supervisor' }, 'team'), ' ', h('b', {}, d.team_name), ': ', d.instruction || ''],
      { team: d.team_name, sequence: ev.sequence });
    this.teamNodes.set(d.team_name, node);
  },
  'dispatch.worker'(ev, d, src) {
    let parent = this.teamNodes.get(src.team_name);
    if (!parent) {
      HANDLERS['dispatch.team'].call(this, ev, { team_name: src.team_name, instruction: '' });
      parent = this.teamNodes.get(src.team_name);
    }
    this.dispatchNode(parent.querySelector('ul'),
      [h('span', { class: 'badge worker' }, 'worker'), ' ', h('b', {}, d.worker_name), ' ', h('code', {}, d.worker_agent_id || ''), ': ', d.instruction || ''],
      { agentId: d.worker_agent_id || '', sequence: ev.sequence });
  },
  'dispatch.team_cancelled'(ev, d, src) {
    this.note(src, 'cancelled team ' + d.team_name + (d.reason ? ': ' + d.reason : ''), 'warning');
  },
  'dispatch.redirect'(ev, d, src) {
    this.note(src, 'redirected ' + d.agent_id + ': ' + d.message, 'info');
  },
  'approval.requested'(ev, d, src) {
    this.approvalCard(d, src);
    this.laneOf(src).gate.hidden = false;
    this.setStatus('waiting_approval');
  },
  'approval.resolved'(ev, d, src) {
    const card = this.approvalCard(d, src);
    card.classList.remove('pending');
    card.classList.add('resolved', d.decision);
    card.dataset.decision = d.decision;
    card.querySelector('.buttons').remove();
    card.querySelector('label').remove();
    card.append(h('p', { class: 'decision' }, d.decision + ' by ' + d.decided_by + (d.comment ? ': ' + d.comment : '') +
      (d.edited ? ' (edited: ' + (d.instruction || JSON.stringify(d.arguments)) + ')' : '')));
    this.laneOf(src).gate.hidden = true;
    if (!this.approvalsEl.querySelector('.approval.pending')) this.setStatus('running');
  },
  'llm.artifact'(ev, d, src) {
    // A file the agent produced (docs/results.md, Artifacts): its name,
    // kind and size, downloaded with the key on demand.
    const a = this.laneOf(src);
    const btn = h('button', { type: 'button', class: 'link', onclick: () => download(d.url, d.name).catch((e) => this.note(src, e.message, 'error')) }, d.name);
    a.body.append(h('div', { class: 'artifact', dataset: { artifactId: d.artifact_id } },
      '📎 ', btn, h('span', { class: 'muted' }, ' ' + (d.type || '') + ' · ' + d.size + ' bytes' + (d.tool_name ? ' · from ' + d.tool_name : ''))));
  },
  'system.warning'(ev, d, src) {
    this.note(src, d.message, 'warning');
  },
  'system.budget'(ev, d) {
    this.note(null, 'budget (' + d.scope + (d.team_name ? ' ' + d.team_name : '') + (d.agent_id ? ' ' + d.agent_id : '') +
      '): spent ' + JSON.stringify(d.spent) + ' of ' + JSON.stringify(d.limit) + ', ' + d.on_exceeded, 'warning');
  },
  'system.error'(ev, d, src) {
    this.note(src, d.message, 'error');
  },
  'system.supervisor_reassigned'(ev, d, src) {
    // The team supervisor's failed call is void, as after a fallback.
    const a = this.laneOf(src);
    this.supersede(a, 'voided: routing passed to ' + d.to_model);
    a.body.append(h('div', { class: 'retry-mark fallback' }, '⇢ supervisor reassigned ' + d.from_model + ' → ' + d.to_model + ' (stand-in: ' + d.stand_in_agent_id + ')'));
    this.note(src, d.message, 'warning');
  },
  'lifecycle.queued'() { this.setStatus('queued'); },
  'lifecycle.paused'() { this.setStatus('paused'); },
  'lifecycle.resumed'(ev, d) { this.setStatus(d.status || 'running'); },
  'lifecycle.completed'(ev, d) {
    this.setStatus('completed');
    this.finalEl.hidden = false;
    append(this.finalEl, h('h2', {}, 'Final answer'), h('div', { class: 'final-answer', id: 'final-answer' }, d.final_answer || ''));
  },
  'lifecycle.failed'(ev, d) {
    this.setStatus('failed');
    this.finalEl.hidden = false;
    append(this.finalEl, h('h2', {}, 'Failed'), h('p', { class: 'error' }, d.error || ''));
  },
  'lifecycle.cancelled'(ev, d) {
    this.setStatus('cancelled');
    this.finalEl.hidden = false;
    append(this.finalEl, h('h2', {}, 'Cancelled'), h('p', {}, d.reason || ''));
  },
};

// EventCache keeps the run's events in sessionStorage so that a reload
// redraws them and streams only what follows. Consecutive llm.stream
// pieces of one agent and attempt are merged, which draws the same. When
// the storage is full the cache is dropped, and a reload streams the run
// from its first event instead.
class EventCache {
  constructor(runId) {
    this.key = 'executor.run.' + runId;
    this.events = [];
    this.dirty = false;
    this.disabled = false;
  }

  load() {
    try {
      const v = JSON.parse(sessionStorage.getItem(this.key) || 'null');
      if (v && Array.isArray(v.events)) this.events = v.events;
    } catch {
      this.events = [];
    }
    return this.events.slice();
  }

  add(ev) {
    if (this.disabled) return;
    const prev = this.events[this.events.length - 1];
    const type = ev.event.category + '.' + ev.event.action;
    if (prev && type === 'llm.stream' && prev.event.category === 'llm' && prev.event.action === 'stream' &&
        prev.source.agent_id === ev.source.agent_id && prev.data.attempt === ev.data.attempt) {
      this.events[this.events.length - 1] = {
        ...prev, firstSequence: prev.firstSequence || prev.sequence, sequence: ev.sequence,
        data: { ...prev.data, content: prev.data.content + ev.data.content },
      };
    } else {
      this.events.push(ev);
    }
    this.dirty = true;
    if (!this.timer) this.timer = setTimeout(() => this.save(), 1000);
  }

  save() {
    clearTimeout(this.timer);
    this.timer = null;
    if (!this.dirty || this.disabled) return;
    try {
      sessionStorage.setItem(this.key, JSON.stringify({ events: this.events }));
      this.dirty = false;
    } catch {
      this.disabled = true;
      sessionStorage.removeItem(this.key);
    }
  }
}

// mcpTool is an MCP call's server and tool, from its event's mcp_server
// and the function name the model called ('mcp_<server>__<tool>'); null
// for a built-in tool.
function mcpTool(d) {
  if (!d.mcp_server) return null;
  const prefix = 'mcp_' + d.mcp_server + '__';
  const name = d.tool_name || '';
  return { server: d.mcp_server, tool: name.startsWith(prefix) ? name.slice(prefix.length) : name };
}
