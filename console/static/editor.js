// The hierarchy editor: a form over the body of hierarchies/create (and
// update), and the same body as JSON beside it, kept in sync both ways.
// The form edits the fields it knows and keeps every other one (llm_config,
// a2a, …) as the JSON has it. Validation is the API's: the body is sent as
// it is, and a refusal's `field` is shown at that field, in the form (the
// input with that data-field, or the nearest enclosing part) and in the
// JSON (its line).
import { call } from './api.js';
import { h, append, clear } from './dom.js';
import { locateField } from './jsonpath.js';

// Fields hierarchies/get answers that are not part of the body one sends.
const READ_ONLY = ['hierarchy_id', 'tenant_id', 'created_at', 'updated_at', 'execution_order'];

// catalog loads what the form offers: the built-in tools (tools/list), the
// tenant's MCP servers' tools and the sub-agents. A list the key may not
// read is empty, not an error: the JSON still takes any key.
export async function loadCatalog() {
  const quiet = (p) => p.catch(() => null);
  const [tools, mcp, subs] = await Promise.all([
    quiet(call('/tools/list', {})), quiet(call('/mcp-servers/list', {})), quiet(call('/subagents/list', { page: 1, page_size: 100 }))]);
  const keys = (tools ? tools.items : []).map((t) => ({ key: t.key, title: t.description }));
  for (const s of mcp ? mcp.items : []) {
    keys.push({ key: 'mcp:' + s.name + '/*', title: 'every tool of MCP server ' + s.name });
    for (const t of s.allowed_tools || []) keys.push({ key: 'mcp:' + s.name + '/' + t, title: 'MCP server ' + s.name });
  }
  return { tools: keys, subAgents: (subs ? subs.items : []).map((s) => s.name) };
}

export class HierarchyEditor {
  // opts: { catalog, onSaved(hierarchyId, created) }.
  constructor(opts) {
    this.catalog = opts.catalog;
    this.onSaved = opts.onSaved;
    this.hierarchyId = '';
    this.body = {};
    this.titleEl = h('h2', {});
    this.noteEl = h('p', { id: 'editor-note', class: 'muted' });
    this.formEl = h('div', { id: 'hierarchy-form', class: 'hform' });
    this.json = h('textarea', { id: 'hierarchy-json', rows: 30, spellcheck: 'false', 'aria-label': 'Hierarchy JSON' });
    this.jsonState = h('p', { id: 'json-state', class: 'muted' });
    this.errors = h('div', { id: 'create-errors' });
    this.result = h('p', { id: 'create-result', role: 'status' });
    this.button = h('button', { type: 'submit', id: 'create-hierarchy' }, 'Create');
    this.json.addEventListener('input', () => this.fromJSON());
    const form = h('form', { id: 'create-form' },
      h('div', { class: 'editor-cols' },
        h('div', { class: 'editor-form' }, this.formEl),
        h('div', { class: 'editor-json' }, h('h3', {}, 'JSON'), this.json, this.jsonState)),
      this.button, ' ', h('button', { type: 'button', class: 'quiet', id: 'editor-new', onclick: () => this.load(null) }, 'New'),
      this.result, this.errors);
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.save();
    });
    this.el = h('section', { class: 'panel', id: 'create-panel' }, this.titleEl, this.noteEl,
      h('p', { class: 'muted' }, 'The body of hierarchies/create (see docs/hierarchies.md, "The hierarchy body"); the form and the JSON are the same body.'), form);
  }

  // load shows a body: a stored hierarchy (edit), or a new one.
  load(body, hierarchyId = '') {
    this.hierarchyId = hierarchyId;
    this.body = body ? structuredClone(body) : structuredClone(EXAMPLE);
    for (const k of READ_ONLY) delete this.body[k];
    this.titleEl.textContent = hierarchyId ? 'Edit hierarchy ' + (this.body.name || '') : 'Create a hierarchy';
    this.button.textContent = hierarchyId ? 'Save' : 'Create';
    this.el.dataset.mode = hierarchyId ? 'edit' : 'create';
    this.el.dataset.hierarchyId = hierarchyId;
    this.noteEl.textContent = '';
    clear(this.errors);
    this.result.textContent = '';
    this.render();
    this.toJSON();
    if (hierarchyId) this.runsNote();
  }

  // runsNote says what editing means for the hierarchy's runs: each keeps
  // the snapshot it started with.
  async runsNote() {
    const id = this.hierarchyId;
    try {
      const runs = await call('/runs/list', { hierarchy_id: id, page: 1, page_size: 1 });
      if (id !== this.hierarchyId) return;
      this.noteEl.dataset.runs = runs.total;
      this.noteEl.textContent = runs.total
        ? runs.total + ' run(s) ran this hierarchy. Saving changes it for new runs only: each run keeps the snapshot it started with, and its page shows the agents it had.'
        : 'No run has used this hierarchy yet.';
    } catch {
      // runs:read may be missing; the editor works without the note.
    }
  }

  toJSON() {
    this.json.value = JSON.stringify(this.body, null, 2);
    this.jsonState.textContent = '';
    this.json.classList.remove('invalid');
  }

  // fromJSON takes the JSON's body into the form when it parses.
  fromJSON() {
    clear(this.errors);
    let v;
    try {
      v = JSON.parse(this.json.value);
    } catch (err) {
      this.jsonState.textContent = 'Not JSON yet (' + err.message + '): the form shows the last body that was.';
      this.json.classList.add('invalid');
      return;
    }
    if (!v || typeof v !== 'object' || Array.isArray(v)) {
      this.jsonState.textContent = 'The body must be a JSON object.';
      return;
    }
    this.jsonState.textContent = '';
    this.json.classList.remove('invalid');
    this.body = v;
    this.render();
  }

  // changed is called after the form changed the body.
  changed(rerender) {
    clear(this.errors);
    pruneBudget(this.body);
    if (rerender) this.render();
    this.toJSON();
  }

  async save() {
    clear(this.errors);
    this.clearFieldMarks();
    this.result.textContent = '';
    let body;
    try {
      body = JSON.parse(this.json.value);
    } catch (err) {
      append(this.errors, h('p', { class: 'field-error', dataset: { field: '' } }, 'Not JSON: ' + err.message));
      return;
    }
    // The JSON is what is sent (it may have been set without an input
    // event); the form follows it.
    this.body = body;
    this.render();
    this.button.disabled = true;
    try {
      let id = this.hierarchyId;
      const created = !id;
      if (id) await call('/hierarchies/update', { ...body, hierarchy_id: id });
      else id = (await call('/hierarchies/create', body)).hierarchy_id;
      this.hierarchyId = id;
      this.el.dataset.hierarchyId = id;
      // onSaved reloads the stored hierarchy into the editor (which clears
      // the result line): the answer is shown after it.
      await this.onSaved(id, created);
      this.result.textContent = (created ? 'Created ' : 'Saved ') + id;
    } catch (err) {
      this.showFieldError(err);
    } finally {
      this.button.disabled = false;
    }
  }

  clearFieldMarks() {
    for (const el of this.formEl.querySelectorAll('.invalid')) el.classList.remove('invalid');
    for (const el of this.formEl.querySelectorAll('.input-error')) el.remove();
  }

  // showFieldError shows the API's error at its field: in the form (the
  // input for it, or the nearest enclosing part the form has) and in the
  // JSON, whose lines around the field are listed with the message.
  showFieldError(err) {
    const field = err.field || '';
    const message = field && err.message.startsWith(field + ': ') ? err.message.slice(field.length + 2) : err.message;
    append(this.errors, h('p', { class: 'error', id: 'create-error' }, field ? h('code', {}, field) : null, field ? ': ' : '', message));
    if (!field) return;
    const target = this.fieldElement(field);
    if (target) {
      // A field folded away is unfolded to be seen.
      for (let d = target.closest('details'); d; d = d.parentElement && d.parentElement.closest('details')) d.open = true;
      target.classList.add('invalid');
      const where = target.closest('label') || target;
      where.after(h('p', { class: 'input-error error', dataset: { field, shownAt: target.dataset.field } }, h('code', {}, field), ': ', message));
      target.scrollIntoView({ block: 'center' });
    }
    const at = locateField(this.json.value, field);
    if (!at) return;
    const lines = this.json.value.split('\n');
    const items = lines.map((l, n) => {
      const li = h('li', { value: n + 1 }, h('code', {}, l || ' '));
      if (n + 1 === at.line) {
        li.className = 'error-line';
        append(li, h('div', { class: 'field-error', dataset: { field } }, '↑ ', h('code', {}, field), ': ', message));
      }
      return li;
    });
    const from = Math.max(0, at.line - 4);
    append(this.errors, h('ol', { class: 'json-lines', start: from + 1 }, items.slice(from, at.line + 3)));
    if (!target) {
      this.json.focus();
      this.json.setSelectionRange(at.start, at.end);
    }
  }

  // fieldElement is the form's element for an API field path, or for the
  // nearest enclosing path it has (teams[1].workers[0].llm_config.model
  // → teams[1].workers[0]).
  fieldElement(field) {
    let f = field;
    while (f) {
      const el = [...this.formEl.querySelectorAll('[data-field]')].find((e) => e.dataset.field === f);
      if (el) return el;
      const cut = Math.max(f.lastIndexOf('.'), f.lastIndexOf('['));
      f = cut > 0 ? f.slice(0, cut) : '';
    }
    return null;
  }

  // render draws the form from this.body.
  render() {
    const b = this.body;
    clear(this.formEl);
    this.clearFieldMarks();
    const teams = Array.isArray(b.teams) ? b.teams : [];
    append(this.formEl,
      h('fieldset', { class: 'hier-settings', dataset: { field: '' } }, h('legend', {}, 'Hierarchy'),
        this.text(b, 'name', 'name', 'Name'),
        this.text(b, 'description', 'description', 'Description'),
        this.select(b, 'execution_mode', 'execution_mode', 'Execution mode', ['', 'sequential', 'parallel'], true),
        this.check(b, 'enable_context_sharing', 'enable_context_sharing', 'Later teams see earlier teams\u2019 outputs'),
        this.num(b, 'max_iterations', 'max_iterations', 'Supervisor steps (max_iterations)'),
        this.num(b, 'max_parallel_teams', 'max_parallel_teams', 'Teams at once (max_parallel_teams)'),
        this.num(b, 'max_execution_time', 'max_execution_time', 'Time limit, s (max_execution_time)'),
        this.budget(b, ['budget'], 'budget', 'Default budget of its runs', true)),
      h('fieldset', { class: 'agent-box', dataset: { field: 'global_supervisor_agent' } }, h('legend', {}, 'Global supervisor'),
        this.agent(obj(b, 'global_supervisor_agent'), 'global_supervisor_agent', 'global')),
      h('div', { id: 'editor-teams' }, teams.map((t, i) => this.team(t, i, teams))),
      h('button', { type: 'button', dataset: { action: 'add-team' }, onclick: () => {
        teams.push(newTeam(teams.length + 1));
        b.teams = teams;
        this.changed(true);
      } }, '+ Add team'));
  }

  team(t, i, teams) {
    const path = 'teams[' + i + ']';
    const workers = Array.isArray(t.workers) ? t.workers : (t.workers = []);
    const deps = (this.body.dependencies && this.body.dependencies[t.name]) || [];
    const others = teams.filter((o) => o !== t && o.name);
    const depBoxes = others.map((o) => {
      const box = h('input', { type: 'checkbox', checked: deps.includes(o.name) || (o.id && deps.includes(o.id)), dataset: { dependsOn: o.name } });
      box.addEventListener('change', () => {
        const d = obj(this.body, 'dependencies');
        let list = (d[t.name] || []).filter((x) => x !== o.name && x !== o.id);
        if (box.checked) list.push(o.name);
        if (list.length) d[t.name] = list;
        else delete d[t.name];
        if (!Object.keys(d).length) delete this.body.dependencies;
        this.changed(false);
      });
      return h('label', { class: 'inline' }, box, ' ', o.name);
    });
    const move = (to) => {
      teams.splice(i, 1);
      teams.splice(to, 0, t);
      this.changed(true);
    };
    return h('fieldset', { class: 'team-box', dataset: { field: path, teamIndex: i } },
      h('legend', {}, 'Team ', h('b', {}, t.name || '(no name)'),
        h('span', { class: 'tools-row' },
          h('button', { type: 'button', class: 'quiet', dataset: { action: 'team-up' }, disabled: i === 0, onclick: () => move(i - 1) }, '↑'),
          h('button', { type: 'button', class: 'quiet', dataset: { action: 'team-down' }, disabled: i === teams.length - 1, onclick: () => move(i + 1) }, '↓'),
          h('button', { type: 'button', class: 'quiet', dataset: { action: 'remove-team' }, onclick: () => {
            teams.splice(i, 1);
            renameTeam(this.body, t.name, null);
            this.changed(true);
          } }, 'Remove team'))),
      this.text(t, 'name', path + '.name', 'Name', (old, now) => renameTeam(this.body, old, now)),
      this.check(t, 'prevent_duplicate', path + '.prevent_duplicate', 'Never dispatch a worker twice (prevent_duplicate)'),
      this.check(t, 'share_context', path + '.share_context', 'Workers see earlier workers\u2019 outputs (share_context)'),
      h('div', { class: 'deps', dataset: { field: 'dependencies.' + (t.name || '') } }, 'Depends on: ',
        depBoxes.length ? depBoxes : h('span', { class: 'muted' }, 'no other team')),
      t.name ? this.budget(this.body, ['budget', 'teams', t.name], 'budget.teams.' + t.name, 'Team budget') : null,
      h('fieldset', { class: 'agent-box', dataset: { field: path + '.team_supervisor_agent' } }, h('legend', {}, 'Team supervisor'),
        this.agent(obj(t, 'team_supervisor_agent'), path + '.team_supervisor_agent', 'supervisor')),
      h('div', { class: 'workers' }, workers.map((w, j) => this.worker(w, j, workers, path))),
      h('button', { type: 'button', dataset: { action: 'add-worker' }, onclick: () => {
        workers.push(newWorker(workers.length + 1));
        this.changed(true);
      } }, '+ Add worker'));
  }

  worker(w, j, workers, teamPath) {
    const path = teamPath + '.workers[' + j + ']';
    const move = (to) => {
      workers.splice(j, 1);
      workers.splice(to, 0, w);
      this.changed(true);
    };
    return h('fieldset', { class: 'agent-box worker-box', dataset: { field: path, workerIndex: j } },
      h('legend', {}, 'Worker ', h('b', {}, w.name || '(no name)'),
        h('span', { class: 'tools-row' },
          h('button', { type: 'button', class: 'quiet', dataset: { action: 'worker-up' }, disabled: j === 0, onclick: () => move(j - 1) }, '↑'),
          h('button', { type: 'button', class: 'quiet', dataset: { action: 'worker-down' }, disabled: j === workers.length - 1, onclick: () => move(j + 1) }, '↓'),
          h('button', { type: 'button', class: 'quiet', dataset: { action: 'remove-worker' }, onclick: () => {
            workers.splice(j, 1);
            this.changed(true);
          } }, 'Remove worker'))),
      this.agent(w, path, 'worker'));
  }

  // agent is the fields of one agent; kind is global, supervisor or worker.
  agent(a, path, kind) {
    const p = (f) => path + '.' + f;
    const out = [
      this.text(a, 'agent_id', p('agent_id'), 'agent_id', (old, now) => renameAgent(this.body, old, now)),
    ];
    if (kind === 'worker') out.push(this.text(a, 'name', p('name'), 'Name'), this.text(a, 'role', p('role'), 'Role'));
    out.push(
      this.area(a, 'system_prompt', p('system_prompt'), 'Prompt (system_prompt)'),
      this.text(a, 'model', p('model'), 'Model (empty: the default)'));
    // Settings most agents leave alone fold away (open when one is set).
    const more = [this.num(a, 'temperature', p('temperature'), 'Temperature', 'any'),
      this.num(a, 'max_tokens', p('max_tokens'), 'Max tokens per call')];
    if (kind === 'worker') more.push(this.num(a, 'max_iterations', p('max_iterations'), 'Tool rounds per turn (max_iterations)'));
    if (kind !== 'global') {
      more.push(this.num(a, 'approval_timeout', p('approval_timeout'), 'Approval timeout, s'),
        this.select(a, 'approval_default', p('approval_default'), 'At the timeout', ['', 'reject', 'approve']));
    }
    if (a.agent_id) more.push(this.budget(this.body, ['budget', 'agents', a.agent_id], 'budget.agents.' + a.agent_id, 'Agent budget'));
    const budgets = this.body.budget && this.body.budget.agents;
    const set = ['temperature', 'max_tokens', 'max_iterations', 'approval_timeout', 'approval_default'].some((k) => a[k] !== undefined) ||
      !!(budgets && a.agent_id && budgets[a.agent_id]);
    if (kind === 'worker') {
      out.push(this.multi(a, 'tools', p('tools'), 'Tools', this.catalog.tools, 'No built-in tool is offered; type keys in the JSON.', true));
      const tools = (a.tools || []).map((k) => ({ key: k }));
      if (tools.length) out.push(this.multi(a, 'approval_tools', p('approval_tools'), 'Calls that wait for approval (approval_tools)', tools, ''));
      out.push(this.multi(a, 'sub_agents', p('sub_agents'), 'Sub-agents it may delegate to', this.catalog.subAgents.map((n) => ({ key: n })), 'No sub-agent defined (subagents/create).'));
    }
    if (kind !== 'global') out.push(this.check(a, 'requires_approval', p('requires_approval'), 'Its turn waits for approval (requires_approval)'));
    out.push(h('details', { class: 'more', open: set }, h('summary', {}, 'Call settings, approval timeout, budget'), more));
    return out;
  }

  // Inputs. Each writes its field on input (an empty one removes the
  // field, so the JSON holds only what was set) and updates the JSON.
  text(o, key, field, label, onRename) {
    const input = h('input', { type: 'text', value: o[key] ?? '', dataset: { field }, spellcheck: 'false' });
    let before = o[key] ?? '';
    input.addEventListener('input', () => {
      if (input.value === '') delete o[key];
      else o[key] = input.value;
      this.changed(false);
    });
    input.addEventListener('change', () => {
      if (onRename && before !== input.value) {
        onRename(before, input.value);
        before = input.value;
        this.changed(true);
      }
    });
    return h('label', {}, label + ' ', input);
  }

  area(o, key, field, label) {
    const input = h('textarea', { rows: 2, dataset: { field } });
    input.value = o[key] ?? '';
    input.addEventListener('input', () => {
      if (input.value === '') delete o[key];
      else o[key] = input.value;
      this.changed(false);
    });
    return h('label', {}, label + ' ', input);
  }

  num(o, key, field, label, step) {
    const input = h('input', { type: 'number', value: o[key] ?? '', dataset: { field }, step: step || '1' });
    input.addEventListener('input', () => {
      const v = input.value === '' ? NaN : Number(input.value);
      if (Number.isNaN(v)) delete o[key];
      else o[key] = v;
      this.changed(false);
    });
    return h('label', { class: 'num' }, label + ' ', input);
  }

  check(o, key, field, label) {
    const input = h('input', { type: 'checkbox', checked: !!o[key], dataset: { field } });
    input.addEventListener('change', () => {
      if (input.checked) o[key] = true;
      else delete o[key];
      this.changed(false);
    });
    return h('label', { class: 'inline' }, input, ' ', label);
  }

  select(o, key, field, label, values, blankIsDefault) {
    const input = h('select', { dataset: { field } },
      values.map((v) => h('option', { value: v, selected: (o[key] ?? '') === v }, v || (blankIsDefault ? '(default)' : '(none)'))));
    input.addEventListener('change', () => {
      if (input.value === '') delete o[key];
      else o[key] = input.value;
      this.changed(false);
    });
    return h('label', {}, label + ' ', input);
  }

  // multi is a list of checkboxes for a list field; keys the JSON has
  // that the offer lacks are shown too, checked.
  multi(o, key, field, label, offer, none, rerender) {
    const have = Array.isArray(o[key]) ? o[key] : [];
    const all = [...offer];
    for (const k of have) if (!all.some((x) => x.key === k)) all.push({ key: k });
    const boxes = all.map((x) => {
      const box = h('input', { type: 'checkbox', checked: have.includes(x.key), dataset: { key: x.key } });
      box.addEventListener('change', () => {
        const now = (Array.isArray(o[key]) ? o[key] : []).filter((k) => k !== x.key);
        if (box.checked) now.push(x.key);
        if (now.length) o[key] = now;
        else delete o[key];
        if (key === 'tools' && Array.isArray(o.approval_tools)) {
          // A gated tool must be one of the agent's tools.
          o.approval_tools = o.approval_tools.filter((k) => now.includes(k));
          if (!o.approval_tools.length) delete o.approval_tools;
        }
        this.changed(!!rerender);
      });
      return h('label', { class: 'inline', title: x.title || '' }, box, ' ', h('code', {}, x.key));
    });
    return h('div', { class: 'multi', dataset: { field } }, h('span', {}, label + ': '), boxes.length ? boxes : h('span', { class: 'muted' }, none));
  }

  // budget edits the limits at path (an object made on first use).
  budget(root, path, field, label, withPolicy) {
    const at = () => path.reduce((o, k) => obj(o, k), root);
    const cur = path.reduce((o, k) => (o && typeof o[k] === 'object' ? o[k] : null), root) || {};
    const input = (key, step) => {
      const el = h('input', { type: 'number', min: '0', step, value: cur[key] ?? '', dataset: { field: field + '.' + key } });
      el.addEventListener('input', () => {
        const v = el.value === '' ? NaN : Number(el.value);
        const o = at();
        if (Number.isNaN(v) || v === 0) delete o[key];
        else o[key] = v;
        this.changed(false);
      });
      return el;
    };
    const parts = [h('span', {}, label + ': '), h('label', { class: 'num' }, 'tokens ', input('max_tokens', '1')),
      h('label', { class: 'num' }, 'US$ ', input('max_cost_usd', 'any'))];
    if (withPolicy) {
      const sel = h('select', { dataset: { field: field + '.on_exceeded' } },
        ['', 'finish', 'fail'].map((v) => h('option', { value: v, selected: (cur.on_exceeded ?? '') === v }, v || '(finish)')));
      sel.addEventListener('change', () => {
        const o = at();
        if (sel.value) o.on_exceeded = sel.value;
        else delete o.on_exceeded;
        this.changed(false);
      });
      parts.push(h('label', {}, 'when spent ', sel));
    }
    return h('div', { class: 'budget', dataset: { field } }, parts);
  }
}

// obj returns o[k], made an object when it is not one.
function obj(o, k) {
  if (!o[k] || typeof o[k] !== 'object' || Array.isArray(o[k])) o[k] = {};
  return o[k];
}

// pruneBudget removes budget parts left without a limit (the API refuses
// a budget that sets none).
function pruneBudget(b) {
  const empty = (o) => !o || (!o.max_tokens && !o.max_cost_usd);
  const bud = b.budget;
  if (!bud || typeof bud !== 'object') return;
  for (const k of ['teams', 'agents']) {
    if (!bud[k] || typeof bud[k] !== 'object') continue;
    for (const [n, v] of Object.entries(bud[k])) if (empty(v)) delete bud[k][n];
    if (!Object.keys(bud[k]).length) delete bud[k];
  }
  if (empty(bud) && !bud.teams && !bud.agents) delete b.budget;
}

// renameTeam keeps dependencies and team budgets pointing at a team whose
// name changed (now null: removed).
function renameTeam(b, old, now) {
  if (!old) return;
  const deps = b.dependencies;
  if (deps && typeof deps === 'object') {
    if (deps[old]) {
      if (now) deps[now] = deps[old];
      delete deps[old];
    }
    for (const [k, list] of Object.entries(deps)) {
      if (!Array.isArray(list)) continue;
      deps[k] = list.flatMap((x) => (x === old ? (now ? [now] : []) : [x]));
      if (!deps[k].length) delete deps[k];
    }
    if (!Object.keys(deps).length) delete b.dependencies;
  }
  const teams = b.budget && b.budget.teams;
  if (teams && teams[old]) {
    if (now) teams[now] = teams[old];
    delete teams[old];
  }
}

// renameAgent keeps an agent's budget with it when its agent_id changes.
function renameAgent(b, old, now) {
  const agents = b.budget && b.budget.agents;
  if (old && agents && agents[old]) {
    if (now) agents[now] = agents[old];
    delete agents[old];
  }
}

function newTeam(n) {
  return { name: 'team ' + n, team_supervisor_agent: { system_prompt: 'You lead team ' + n + '.' }, workers: [newWorker(1)] };
}

function newWorker(n) {
  return { name: 'worker ' + n, role: '', system_prompt: '' };
}

export const EXAMPLE = {
  name: 'research',
  global_supervisor_agent: { agent_id: 'gs-research', system_prompt: 'You are the chief scientist.' },
  enable_context_sharing: true,
  teams: [{
    name: 'theory',
    team_supervisor_agent: { agent_id: 'ts-theory', system_prompt: 'You lead the theory group.' },
    prevent_duplicate: true,
    workers: [
      { agent_id: 'w-theorist', name: 'theorist', role: 'researcher', system_prompt: 'You are a theorist.' },
      { agent_id: 'w-critic', name: 'critic', role: 'reviewer', system_prompt: 'You review arguments.' },
    ],
  }],
};
