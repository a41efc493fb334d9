// The runs page (/runs): the list with status, hierarchy, tokens, cost
// and time, filtered by the URL's status and hierarchy_id (so a filtered
// view can be reloaded and shared), and the form that starts a run.
import { call } from './api.js';
import { h, append, clear, fmtCost, fmtTime, fmtDuration } from './dom.js';

export const STATUSES = ['queued', 'pending', 'running', 'paused', 'waiting_approval', 'completed', 'failed', 'cancelled', 'timed_out'];
const REFRESH_MS = 5000;

export async function runsPage(main) {
  const params = new URLSearchParams(location.search);
  const hierarchies = (await call('/hierarchies/list', { page: 1, page_size: 100 })).items;
  const names = new Map(hierarchies.map((x) => [x.hierarchy_id, x.name]));
  const options = (selected, blank) => [h('option', { value: '' }, blank),
    ...hierarchies.map((x) => h('option', { value: x.hierarchy_id, selected: x.hierarchy_id === selected }, x.name + ' (' + x.hierarchy_id.slice(0, 8) + ')'))];

  // Filters are a GET form on /runs: submitting it puts them in the URL.
  const status = h('select', { name: 'status', id: 'filter-status' }, h('option', { value: '' }, 'any status'),
    STATUSES.map((s) => h('option', { value: s, selected: s === params.get('status') }, s)));
  const hier = h('select', { name: 'hierarchy_id', id: 'filter-hierarchy' }, options(params.get('hierarchy_id') || '', 'any hierarchy'));
  const filters = h('form', { method: 'get', action: '/runs', id: 'run-filters', class: 'inline' },
    h('label', {}, 'Status ', status), h('label', {}, 'Hierarchy ', hier));
  for (const s of [status, hier]) s.addEventListener('change', () => filters.requestSubmit());

  const table = h('div', { id: 'run-list' }, h('p', { class: 'muted' }, 'Loading…'));
  const page = Math.max(1, parseInt(params.get('page') || '1', 10) || 1);
  const list = h('section', { class: 'panel' }, h('h2', {}, 'Runs'), filters, table);
  append(main, h('div', { class: 'columns' }, list, startForm(options(params.get('hierarchy_id') || '', 'choose a hierarchy'))));

  const filter = { page, page_size: 50 };
  if (params.get('status')) filter.status = params.get('status');
  if (params.get('hierarchy_id')) filter.hierarchy_id = params.get('hierarchy_id');
  // A schedule's runs (linked from /schedules): kept across the filters.
  if (params.get('schedule_id')) {
    filter.schedule_id = params.get('schedule_id');
    append(filters, h('input', { type: 'hidden', name: 'schedule_id', value: filter.schedule_id }));
  }
  const refresh = async () => {
    try {
      renderRuns(table, await call('/runs/list', filter), names, params);
    } catch (err) {
      clear(table);
      append(table, h('p', { class: 'error' }, err.message));
    }
    setTimeout(refresh, REFRESH_MS);
  };
  await refresh();
}

function renderRuns(box, data, names, params) {
  clear(box);
  if (!data.items.length) {
    append(box, h('p', { class: 'muted' }, 'No run matches.'));
    return;
  }
  const rows = data.items.map((r) => h('tr', { dataset: { runId: r.id, status: r.status } },
    h('td', {}, h('a', { href: '/runs/' + encodeURIComponent(r.id) }, h('code', {}, r.id.slice(0, 12)))),
    h('td', {}, h('span', { class: 'badge status-' + r.status }, r.status)),
    h('td', {}, r.hierarchy_name || names.get(r.hierarchy_id) || r.hierarchy_id),
    h('td', { class: 'task' }, r.task.length > 80 ? r.task.slice(0, 80) + '…' : r.task),
    h('td', { class: 'num', dataset: { tokens: r.usage.total_tokens } }, String(r.usage.total_tokens)),
    h('td', { class: 'num', dataset: { costUsd: r.usage.cost_usd } }, fmtCost(r.usage.cost_usd, r.usage.cost_unknown)),
    h('td', {}, fmtTime(r.created_at)),
    h('td', { class: 'num' }, fmtDuration(r.started_at, r.completed_at))));
  append(box, h('table', { class: 'list' },
    h('thead', {}, h('tr', {}, ['Run', 'Status', 'Hierarchy', 'Task', 'Tokens', 'Cost', 'Created', 'Time'].map((t) => h('th', {}, t)))),
    h('tbody', {}, rows)));
  const pages = Math.ceil(data.total / data.page_size);
  if (pages > 1) {
    const link = (n, label) => {
      const p = new URLSearchParams(params);
      p.set('page', n);
      return h('a', { href: '/runs?' + p }, label);
    };
    append(box, h('p', { class: 'pager' }, data.page > 1 ? link(data.page - 1, '← newer') : null,
      ' page ' + data.page + ' of ' + pages + ' ', data.page < pages ? link(data.page + 1, 'older →') : null));
  }
}

function startForm(hierarchyOptions) {
  const hier = h('select', { id: 'start-hierarchy', required: true }, hierarchyOptions);
  const task = h('textarea', { id: 'start-task', rows: 4, required: true, placeholder: 'The task, e.g. Explain quantum tunnelling' });
  const error = h('p', { class: 'error', id: 'start-error' });
  const button = h('button', { type: 'submit', id: 'start-run' }, 'Start');
  const form = h('form', { id: 'start-form' }, h('label', {}, 'Hierarchy ', hier), h('label', {}, 'Task ', task), button, error);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.textContent = '';
    button.disabled = true;
    try {
      const run = await call('/runs/start', { hierarchy_id: hier.value, task: task.value });
      location.assign('/runs/' + encodeURIComponent(run.id));
    } catch (err) {
      error.textContent = (err.field ? err.field + ': ' : '') + err.message;
      button.disabled = false;
    }
  });
  return h('section', { class: 'panel', id: 'start' }, h('h2', {}, 'Start a run'), form);
}
