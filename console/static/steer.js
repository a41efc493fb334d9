// Steering on the run page: pause and resume, cancel a team's turn,
// redirect an agent; once the run has ended, fork it from a fork point
// (with the changes runs/fork allows), start a follow-up on its thread, and
// compare it with its origin or another run of its hierarchy. Every action
// calls the API route of docs/steering.md, docs/time-travel.md or
// docs/runs.md and shows its answer, or the API's error, in the action log
// (#steer-log: one line per action, data-action and data-ok).
import { call } from './api.js';
import { h, append, clear } from './dom.js';

const ENDED = new Set(['completed', 'failed', 'cancelled', 'timed_out']);

export class Steering {
  constructor(view, run) {
    this.view = view;
    this.run = run;
    this.runId = view.runId;
    this.teams = [];
    this.agents = [];
    this.log = h('ul', { id: 'steer-log', class: 'notes' });
    this.live = h('div', { id: 'steer-live' });
    this.after = h('div', { id: 'steer-after', hidden: true });
    this.el = h('section', { class: 'panel', id: 'steering' }, h('h2', {}, 'Steer'), this.live, this.after, this.log);
    this.buildLive();
    this.buildAfter();
    this.relations();
  }

  // report adds the answer of one action to the log.
  report(action, ok, text, link) {
    const li = h('li', { class: 'note ' + (ok ? 'info' : 'error'), dataset: { action, ok: String(ok) } },
      h('b', {}, action), ': ', text, link ? [' ', link] : null);
    this.log.prepend(li);
    return li;
  }

  // act runs one API call for an action, disabling its button meanwhile.
  async act(action, button, path, body, done) {
    button.disabled = true;
    try {
      const out = await call(path, body);
      done(out);
    } catch (err) {
      // The API's message starts with the field it names, when it names one.
      const msg = err.field && !err.message.startsWith(err.field + ':') ? err.field + ': ' + err.message : err.message;
      this.report(action, false, (err.code ? err.code + ' ' : '') + msg);
    } finally {
      button.disabled = false;
    }
  }

  buildLive() {
    this.pauseBtn = h('button', { type: 'button', id: 'pause-run' }, 'Pause');
    this.resumeBtn = h('button', { type: 'button', id: 'resume-run' }, 'Resume');
    this.pauseBtn.addEventListener('click', () => this.act('pause', this.pauseBtn, '/runs/pause', { id: this.runId },
      (out) => this.report('pause', true, 'status ' + (out && out.status ? out.status : 'paused'))));
    this.resumeBtn.addEventListener('click', () => this.act('resume', this.resumeBtn, '/runs/resume', { id: this.runId },
      (out) => this.report('resume', true, 'status ' + (out && out.status ? out.status : 'running'))));

    this.teamSel = h('select', { id: 'cancel-team-name', 'aria-label': 'team' });
    const reason = h('input', { type: 'text', id: 'cancel-team-reason', placeholder: 'reason (optional)' });
    const cancelTeam = h('button', { type: 'button', id: 'cancel-team' }, 'Cancel team');
    cancelTeam.addEventListener('click', () => {
      const body = { id: this.runId, team_name: this.teamSel.value };
      if (reason.value.trim()) body.reason = reason.value.trim();
      this.act('cancel-team', cancelTeam, '/runs/teams/cancel', body,
        () => this.report('cancel-team', true, 'team ' + body.team_name + ' cancelled; the run goes on without it'));
    });

    this.agentSel = h('select', { id: 'redirect-agent', 'aria-label': 'agent' });
    const message = h('input', { type: 'text', id: 'redirect-message', placeholder: 'guidance for its next step' });
    const redirect = h('button', { type: 'button', id: 'redirect' }, 'Redirect');
    redirect.addEventListener('click', () => {
      const body = { id: this.runId, agent_id: this.agentSel.value, message: message.value };
      this.act('redirect', redirect, '/runs/redirect', body, () => {
        this.report('redirect', true, body.agent_id + ' gets the guidance at its next step');
        message.value = '';
      });
    });
    append(this.live,
      h('p', { class: 'inline' }, this.pauseBtn, ' ', this.resumeBtn),
      h('p', { class: 'inline' }, h('label', {}, 'Team ', this.teamSel), ' ', reason, ' ', cancelTeam),
      h('p', { class: 'inline' }, h('label', {}, 'Agent ', this.agentSel), ' ', message, ' ', redirect));
  }

  buildAfter() {
    // Fork: a point, and the changes runs/fork takes.
    this.pointSel = h('select', { id: 'fork-point', 'aria-label': 'fork point' });
    this.forkTeamInstr = h('textarea', { id: 'fork-team-instruction', rows: 2, placeholder: 'instruction of the team turn the fork starts with (optional)' });
    this.forkAgent = h('select', { id: 'fork-agent', 'aria-label': 'agent to change' });
    this.forkPrompt = h('textarea', { id: 'fork-agent-prompt', rows: 2, placeholder: 'its new system prompt (optional)' });
    this.forkModel = h('input', { type: 'text', id: 'fork-agent-model', placeholder: 'its model (optional)' });
    this.forkNextTeam = h('select', { id: 'fork-next-team', 'aria-label': 'next team' });
    this.forkNextWorker = h('input', { type: 'text', id: 'fork-next-worker', placeholder: 'next worker, by name or agent_id (optional)' });
    this.forkMaxTokens = h('input', { type: 'number', min: '1', id: 'fork-max-tokens', placeholder: 'tokens' });
    this.forkMaxCost = h('input', { type: 'number', min: '0', step: 'any', id: 'fork-max-cost', placeholder: 'US$' });
    const fork = h('button', { type: 'button', id: 'fork-run' }, 'Fork');
    fork.addEventListener('click', () => {
      const opt = this.pointSel.selectedOptions[0];
      if (!opt) {
        this.report('fork', false, 'no fork point chosen');
        return;
      }
      const changes = {};
      const team = this.forkNextTeam.value || opt.dataset.team;
      if (this.forkTeamInstr.value.trim()) changes.team_instructions = { [team]: this.forkTeamInstr.value.trim() };
      if (this.forkAgent.value && (this.forkPrompt.value.trim() || this.forkModel.value.trim())) {
        const a = { agent_id: this.forkAgent.value };
        if (this.forkPrompt.value.trim()) a.system_prompt = this.forkPrompt.value.trim();
        if (this.forkModel.value.trim()) a.model = this.forkModel.value.trim();
        changes.agents = [a];
      }
      if (this.forkNextTeam.value) changes.next_team = this.forkNextTeam.value;
      if (this.forkNextWorker.value.trim()) changes.next_worker = this.forkNextWorker.value.trim();
      // A budget replaces the original's execution_config whole (as
      // runs/start's): parallelism is carried over from the original.
      if (this.forkMaxTokens.value || this.forkMaxCost.value) {
        const budget = {};
        if (this.forkMaxTokens.value) budget.max_tokens = Number(this.forkMaxTokens.value);
        if (this.forkMaxCost.value) budget.max_cost_usd = Number(this.forkMaxCost.value);
        changes.execution_config = { budget };
        const ec = this.run.execution_config;
        if (ec && ec.max_parallel_teams) changes.execution_config.max_parallel_teams = ec.max_parallel_teams;
      }
      const body = { id: this.runId, after_sequence: Number(this.pointSel.value) };
      if (Object.keys(changes).length) body.changes = changes;
      this.act('fork', fork, '/runs/fork', body, (out) => {
        const li = this.report('fork', true, 'fork ' + out.id + ' from event ' + out.fork_point.sequence + ' (' + out.fork_point.kind + '), ',
          [h('a', { href: '/runs/' + encodeURIComponent(out.id), class: 'fork-link' }, 'open it'), ' · ',
            h('a', { href: compareURL(out.id, this.runId), class: 'compare-link' }, 'compare with this run')]);
        li.dataset.runId = out.id;
        this.loadCompare();
      });
    });

    // Follow-up: a new run on the thread (previous_run_id).
    const task = h('textarea', { id: 'follow-up-task', rows: 2, placeholder: 'the follow-up task' });
    const follow = h('button', { type: 'button', id: 'follow-up' }, 'Start follow-up');
    follow.addEventListener('click', () => {
      const body = { hierarchy_id: this.run.hierarchy_id, task: task.value, previous_run_id: this.runId };
      this.act('follow-up', follow, '/runs/start', body, (out) => {
        const li = this.report('follow-up', true, 'run ' + out.id + ' on thread ' + out.thread_id + ', ',
          h('a', { href: '/runs/' + encodeURIComponent(out.id), class: 'follow-up-link' }, 'open it'));
        li.dataset.runId = out.id;
        this.loadCompare();
      });
    });

    // Compare with another run of the hierarchy.
    this.compareSel = h('select', { id: 'compare-with', 'aria-label': 'run to compare with' });
    const compare = h('button', { type: 'button', id: 'compare-run' }, 'Compare');
    compare.addEventListener('click', () => {
      if (this.compareSel.value) location.assign(compareURL(this.runId, this.compareSel.value));
    });

    append(this.after,
      h('fieldset', { id: 'fork-form' }, h('legend', {}, 'Fork (time travel)'),
        h('p', { id: 'fork-points-state', class: 'muted' }, 'Loading the fork points…'),
        h('label', {}, 'After ', this.pointSel),
        h('label', {}, 'Team instruction ', this.forkTeamInstr),
        h('label', {}, 'Change agent ', this.forkAgent), this.forkPrompt, this.forkModel,
        h('label', {}, 'Next team (team-finished points) ', this.forkNextTeam), this.forkNextWorker,
        h('p', { class: 'inline' }, 'Budget of the fork (replaces the run\u2019s): ', this.forkMaxTokens, ' ', this.forkMaxCost), fork),
      h('fieldset', {}, h('legend', {}, 'Follow-up on the thread'), task, follow),
      h('fieldset', {}, h('legend', {}, 'Compare'), h('label', {}, 'With ', this.compareSel), ' ', compare));
  }

  // relations shows where the run comes from (a fork's origin, a
  // follow-up's previous run) with a compare link.
  relations() {
    const r = this.run;
    const bits = [];
    if (r.forked_from && r.forked_from.run_id) {
      bits.push(h('span', { id: 'forked-from' }, 'forked from ', h('a', { href: '/runs/' + encodeURIComponent(r.forked_from.run_id) }, r.forked_from.run_id),
        ' after event ' + r.forked_from.sequence + ' · ', h('a', { href: compareURL(this.runId, r.forked_from.run_id), id: 'compare-origin' }, 'compare with its origin')));
    }
    if (r.previous_run_id) {
      bits.push(h('span', { id: 'previous-run' }, (bits.length ? ' · ' : '') + 'follow-up of ',
        h('a', { href: '/runs/' + encodeURIComponent(r.previous_run_id) }, r.previous_run_id)));
    }
    if (r.thread_id && r.thread_id !== this.runId) bits.push(h('span', {}, ' · thread ', h('code', {}, r.thread_id)));
    if (bits.length) this.el.insertBefore(h('p', { class: 'muted', id: 'run-relations' }, bits), this.live);
  }

  // topology takes the run's agents and teams (its hierarchy snapshot) for
  // the selects, and says when the stored hierarchy has changed since.
  topology(d) {
    this.snapshot = d;
    const gs = d.global_supervisor_agent || {};
    this.teams = (d.teams || []).map((t) => t.name);
    this.agents = [gs.agent_id];
    for (const t of d.teams || []) {
      this.agents.push((t.team_supervisor_agent || {}).agent_id);
      for (const w of t.workers || []) this.agents.push(w.agent_id);
    }
    this.agents = this.agents.filter(Boolean);
    const opts = (sel, values, blank) => {
      clear(sel);
      if (blank !== undefined) sel.append(h('option', { value: '' }, blank));
      for (const v of values) sel.append(h('option', { value: v }, v));
    };
    opts(this.teamSel, this.teams);
    opts(this.agentSel, this.agents);
    opts(this.forkAgent, this.agents, '(none)');
    opts(this.forkNextTeam, this.teams, '(as the run decides)');
    this.compareSnapshot();
  }

  // compareSnapshot shows the agents this run had when the hierarchy was
  // edited after it started: the page draws the run's snapshot, not the
  // hierarchy as it is now.
  async compareSnapshot() {
    let now;
    try {
      now = await call('/hierarchies/get', { hierarchy_id: this.run.hierarchy_id });
    } catch {
      return; // deleted, or not readable with this key: nothing to compare
    }
    const ids = (x) => {
      const out = [(x.global_supervisor_agent || {}).agent_id];
      for (const t of x.teams || []) {
        out.push('team:' + t.name, (t.team_supervisor_agent || {}).agent_id);
        for (const w of t.workers || []) out.push(w.agent_id);
      }
      return out.join(' ');
    };
    if (ids(now) === ids(this.snapshot)) return;
    const old = document.getElementById('snapshot-note');
    if (old) old.remove();
    this.el.prepend(h('p', { class: 'note warning', id: 'snapshot-note' },
      'The hierarchy has been edited since this run started: this page shows the run\u2019s own snapshot (teams ',
      this.teams.join(', '), '), not the hierarchy as it is now.'));
  }

  // status shows the actions that fit the run's status.
  status(s) {
    const ended = ENDED.has(s);
    this.live.hidden = ended;
    this.pauseBtn.hidden = s === 'paused';
    this.resumeBtn.hidden = s !== 'paused';
    if (ended && this.after.hidden) {
      this.after.hidden = false;
      this.loadAfter();
    }
  }

  async loadAfter() {
    const state = document.getElementById('fork-points-state');
    try {
      const fp = await call('/runs/fork-points', { id: this.runId });
      clear(this.pointSel);
      for (const p of fp.points || []) {
        this.pointSel.append(h('option', { value: p.sequence, dataset: { kind: p.kind, team: p.team_name } },
          '#' + p.sequence + ' ' + p.kind + ' · turn ' + p.turn + ' · ' + p.team_name + (p.worker_name ? ' / ' + p.worker_name : '')));
      }
      state.textContent = (fp.points || []).length + ' fork point(s)';
      this.el.dataset.forkPoints = (fp.points || []).length;
    } catch (err) {
      state.textContent = 'fork points: ' + err.message;
    }
    await this.loadCompare();
  }

  // loadCompare lists the hierarchy's other runs to compare this one with.
  async loadCompare() {
    try {
      const runs = await call('/runs/list', { hierarchy_id: this.run.hierarchy_id, page: 1, page_size: 50 });
      clear(this.compareSel);
      for (const r of runs.items) {
        if (r.id === this.runId) continue;
        const rel = r.forked_from && r.forked_from.run_id === this.runId ? ' · its fork' : r.id === (this.run.forked_from || {}).run_id ? ' · its origin' : '';
        this.compareSel.append(h('option', { value: r.id }, r.id.slice(0, 12) + ' · ' + r.status + rel + ' · ' + r.task.slice(0, 40)));
      }
      if (!this.compareSel.options.length) this.compareSel.append(h('option', { value: '' }, '(no other run of this hierarchy)'));
    } catch {
      // runs:read is what this page already needs; nothing else to say.
    }
  }
}

export function compareURL(a, b) {
  return '/compare?a=' + encodeURIComponent(a) + '&b=' + encodeURIComponent(b);
}
