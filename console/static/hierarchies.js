// The hierarchies page (/): the list, creation from JSON with the API's
// field error shown at the field, and one hierarchy as a tree (/?h=<id>).
import { call } from './api.js';
import { h, append, clear, fmtTime } from './dom.js';
import { locateField } from './jsonpath.js';

const EXAMPLE = {
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

export async function hierarchiesPage(main) {
  const params = new URLSearchParams(location.search);
  const list = h('section', { class: 'panel', id: 'hierarchy-list' }, h('h2', {}, 'Hierarchies'), h('p', { class: 'muted' }, 'Loading…'));
  const tree = h('section', { class: 'panel', id: 'hierarchy-tree', hidden: true });
  append(main, h('div', { class: 'columns' }, h('div', {}, list, tree), createPanel(async (id) => {
    await renderList(list);
    history.replaceState(null, '', '/?h=' + encodeURIComponent(id));
    await renderTree(tree, id);
  })));
  await renderList(list);
  if (params.get('h')) await renderTree(tree, params.get('h'));
}

async function renderList(panel) {
  const data = await call('/hierarchies/list', { page: 1, page_size: 100 });
  clear(panel);
  append(panel, h('h2', {}, 'Hierarchies ', h('span', { class: 'muted' }, '(' + data.total + ')')));
  if (!data.items.length) {
    append(panel, h('p', { class: 'muted' }, 'None yet: create one from JSON.'));
    return;
  }
  const rows = data.items.map((it) => h('tr', { dataset: { hierarchyId: it.hierarchy_id } },
    h('td', {}, h('a', { href: '/?h=' + encodeURIComponent(it.hierarchy_id) }, it.name)),
    h('td', {}, h('code', {}, it.hierarchy_id)),
    h('td', {}, it.execution_mode),
    h('td', {}, fmtTime(it.created_at)),
    h('td', {}, h('a', { href: '/runs?hierarchy_id=' + encodeURIComponent(it.hierarchy_id) }, 'runs'))));
  append(panel, h('table', { class: 'list' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'hierarchy_id'), h('th', {}, 'Mode'), h('th', {}, 'Created'), h('th', {}, ''))),
    h('tbody', {}, rows)));
}

// renderTree shows a hierarchy as a tree with every agent_id.
async function renderTree(panel, id) {
  panel.hidden = false;
  clear(panel);
  let hier;
  try {
    hier = await call('/hierarchies/get', { hierarchy_id: id });
  } catch (err) {
    append(panel, h('p', { class: 'error' }, err.message));
    return;
  }
  const agent = (a, kind, extra) => h('span', { class: 'agent', dataset: { agentId: a.agent_id } },
    h('span', { class: 'badge ' + kind }, kind.replace('_', ' ')), ' ',
    h('b', {}, a.name || kind.replace('_', ' ')), ' ', h('code', { class: 'agent-id' }, a.agent_id),
    a.role ? h('span', { class: 'muted' }, ' · ' + a.role) : null,
    a.model ? h('span', { class: 'muted' }, ' · ' + a.model) : null,
    a.tools && a.tools.length ? h('span', { class: 'muted' }, ' · tools: ' + a.tools.join(', ')) : null,
    a.requires_approval ? h('span', { class: 'badge gate' }, 'approval') : null, extra);
  const teams = (hier.teams || []).map((t) => h('li', { class: 'team', dataset: { team: t.name } },
    h('span', { class: 'team-name' }, 'team ', h('b', {}, t.name), t.id ? h('code', { class: 'muted' }, ' ' + t.id) : null),
    h('ul', {}, h('li', {}, agent(t.team_supervisor_agent, 'team_supervisor'),
      h('ul', {}, (t.workers || []).map((w) => h('li', {}, agent(w, 'worker'))))))));
  append(panel,
    h('h2', {}, hier.name, ' ', h('code', { class: 'muted' }, hier.hierarchy_id)),
    hier.description ? h('p', {}, hier.description) : null,
    h('p', {}, h('a', { class: 'button', href: '/runs?hierarchy_id=' + encodeURIComponent(hier.hierarchy_id) + '#start' }, 'Start a run')),
    h('ul', { class: 'tree' }, h('li', {}, agent(hier.global_supervisor_agent, 'global_supervisor'), h('ul', {}, teams))));
}

// createPanel is the form that creates a hierarchy from JSON. A refusal
// is shown next to the line of the field the API names.
function createPanel(onCreated) {
  const text = h('textarea', { id: 'hierarchy-json', rows: 24, spellcheck: 'false', 'aria-label': 'Hierarchy JSON' });
  text.value = JSON.stringify(EXAMPLE, null, 2);
  const errors = h('div', { id: 'create-errors' });
  const result = h('p', { id: 'create-result', role: 'status' });
  const button = h('button', { type: 'submit', id: 'create-hierarchy' }, 'Create');
  text.addEventListener('input', () => clear(errors));
  const form = h('form', { id: 'create-form' }, text, button, result, errors);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clear(errors);
    result.textContent = '';
    let body;
    try {
      body = JSON.parse(text.value);
    } catch (err) {
      append(errors, h('p', { class: 'field-error', dataset: { field: '' } }, 'Not JSON: ' + err.message));
      return;
    }
    button.disabled = true;
    try {
      const out = await call('/hierarchies/create', body);
      result.textContent = 'Created ' + out.hierarchy_id;
      await onCreated(out.hierarchy_id);
    } catch (err) {
      showFieldError(text, errors, err);
    } finally {
      button.disabled = false;
    }
  });
  return h('section', { class: 'panel', id: 'create-panel' }, h('h2', {}, 'Create a hierarchy'),
    h('p', { class: 'muted' }, 'The body of hierarchies/create (see docs/hierarchies.md, "The hierarchy body").'), form);
}

// showFieldError lists the JSON's lines with the error under the line of
// the field (or of the nearest enclosing one the text has) and selects
// that field in the editor.
function showFieldError(textarea, box, err) {
  const field = err.field || '';
  const where = field ? locateField(textarea.value, field) : null;
  // The API's message starts with the field's name; it is shown apart.
  const message = field && err.message.startsWith(field + ': ') ? err.message.slice(field.length + 2) : err.message;
  append(box, h('p', { class: 'error', id: 'create-error' }, field ? h('code', {}, field) : null, field ? ': ' : '', message));
  if (!where) return;
  const lines = textarea.value.split('\n');
  const items = lines.map((l, n) => {
    const li = h('li', { value: n + 1 }, h('code', {}, l || ' '));
    if (n + 1 === where.line) {
      li.className = 'error-line';
      append(li, h('div', { class: 'field-error', dataset: { field } }, '↑ ', h('code', {}, field), ': ', message));
    }
    return li;
  });
  const from = Math.max(0, where.line - 4);
  append(box, h('ol', { class: 'json-lines', start: from + 1 }, items.slice(from, where.line + 3)));
  textarea.focus();
  textarea.setSelectionRange(where.start, where.end);
}
