// The hierarchies page (/): the list, one hierarchy as a tree (/?h=<id>),
// and the editor (editor.js) that creates one or edits it (/?h=<id>&edit=1):
// a form and its JSON, with the API's field error shown at the field.
import { call } from './api.js';
import { h, append, clear, fmtTime } from './dom.js';
import { HierarchyEditor, loadCatalog } from './editor.js';

export async function hierarchiesPage(main) {
  const params = new URLSearchParams(location.search);
  const list = h('section', { class: 'panel', id: 'hierarchy-list' }, h('h2', {}, 'Hierarchies'), h('p', { class: 'muted' }, 'Loading…'));
  const tree = h('section', { class: 'panel', id: 'hierarchy-tree', hidden: true });
  const editor = new HierarchyEditor({
    catalog: await loadCatalog(),
    onSaved: async (id) => {
      await renderList(list);
      history.replaceState(null, '', '/?h=' + encodeURIComponent(id) + '&edit=1');
      await renderTree(tree, id, editor);
      await openEditor(editor, id);
    },
  });
  editor.load(null);
  append(main, h('div', { class: 'columns editor-page' }, h('div', {}, list, tree), editor.el));
  await renderList(list);
  if (params.get('h')) {
    await renderTree(tree, params.get('h'), editor);
    if (params.get('edit')) await openEditor(editor, params.get('h'));
  }
}

// openEditor loads a stored hierarchy into the editor.
async function openEditor(editor, id) {
  const hier = await call('/hierarchies/get', { hierarchy_id: id });
  editor.load(hier, id);
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
async function renderTree(panel, id, editor) {
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
    h('p', {}, h('a', { class: 'button', href: '/runs?hierarchy_id=' + encodeURIComponent(hier.hierarchy_id) + '#start' }, 'Start a run'), ' ',
      h('button', { type: 'button', id: 'edit-hierarchy', onclick: async () => {
        history.replaceState(null, '', '/?h=' + encodeURIComponent(hier.hierarchy_id) + '&edit=1');
        await openEditor(editor, hier.hierarchy_id);
      } }, 'Edit')),
    h('ul', { class: 'tree' }, h('li', {}, agent(hier.global_supervisor_agent, 'global_supervisor'), h('ul', {}, teams))));
}
