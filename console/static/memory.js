// The memory page (/memory): the tenant's long-term memory
// (docs/memory.md). Namespaces (memory/list-namespaces), a search over a
// namespace prefix (memory/search: full text, and by meaning when the
// service has an embedding model), and each item's value, which can be
// edited (memory/put) or deleted (memory/delete); a form adds an item.
import { call } from './api.js';
import { h, append, clear, fmtTime, showError } from './dom.js';

// parsePath reads "users/u-42" as ["users", "u-42"].
function parsePath(text) {
  return text.split('/').map((s) => s.trim()).filter((s) => s !== '');
}

export async function memoryPage(main) {
  const params = new URLSearchParams(location.search);
  const spaces = h('section', { class: 'panel', id: 'memory-namespaces' }, h('h2', {}, 'Namespaces'), h('p', { class: 'muted' }, 'Loading…'));
  const nsInput = h('input', { id: 'memory-namespace', placeholder: 'namespace, e.g. users/u-42 (empty: all)', value: params.get('namespace') || '' });
  const qInput = h('input', { id: 'memory-query', placeholder: 'search text (empty: newest first)', value: params.get('q') || '' });
  const results = h('div', { id: 'memory-results' });
  const search = h('section', { class: 'panel', id: 'memory-search' }, h('h2', {}, 'Items'),
    h('form', { onsubmit: (e) => { e.preventDefault(); runSearch(); } }, nsInput, ' ', qInput, ' ', h('button', { type: 'submit' }, 'Search')),
    results);
  const newNs = h('input', { id: 'memory-new-namespace', placeholder: 'namespace, e.g. users/u-42' });
  const newKey = h('input', { id: 'memory-new-key', placeholder: 'key' });
  const newValue = h('textarea', { id: 'memory-new-value', rows: 3, cols: 60, placeholder: '{"fact": "…"} (any JSON)' });
  const add = h('section', { class: 'panel', id: 'memory-add' }, h('h2', {}, 'Add an item'),
    h('form', { onsubmit: async (e) => {
      e.preventDefault();
      try {
        await call('/memory/put', { namespace: parsePath(newNs.value), key: newKey.value.trim(), value: JSON.parse(newValue.value) });
        newKey.value = ''; newValue.value = '';
        await Promise.all([loadSpaces(), runSearch()]);
      } catch (err) { showError(err); }
    } }, newNs, ' ', newKey, h('br'), newValue, h('br'), h('button', { type: 'submit', id: 'memory-add-button' }, 'Save')));
  append(main, spaces, search, add);

  async function loadSpaces() {
    const data = await call('/memory/list-namespaces', { limit: 1000 });
    clear(spaces);
    append(spaces, h('h2', {}, 'Namespaces ', h('span', { class: 'muted' }, '(' + data.namespaces.length + ')')));
    if (!data.namespaces.length) { append(spaces, h('p', { class: 'muted' }, 'None yet.')); return; }
    append(spaces, h('ul', { class: 'namespaces' }, data.namespaces.map((ns) => h('li', {},
      h('a', { href: '#', dataset: { namespace: ns.join('/') }, onclick: (e) => { e.preventDefault(); nsInput.value = ns.join('/'); runSearch(); } }, h('code', {}, ns.join('/')))))));
  }

  async function runSearch() {
    const body = { namespace: parsePath(nsInput.value), query: qInput.value, limit: 100 };
    const data = await call('/memory/search', body);
    clear(results);
    append(results, h('p', { class: 'muted' }, data.results.length + ' item(s)' + (data.semantic ? ', ranked by meaning and text' : ', ranked by text') + '.'));
    if (!data.results.length) return;
    append(results, h('table', { class: 'list' },
      h('thead', {}, h('tr', {}, ['Namespace', 'Key', 'Value', 'Score', 'Updated', 'Expires', ''].map((x) => h('th', {}, x)))),
      h('tbody', {}, data.results.map((it) => row(it)))));
  }

  function row(it) {
    const value = h('textarea', { class: 'memory-value', rows: 2, cols: 50 });
    value.value = JSON.stringify(it.value, null, 1);
    const save = h('button', { class: 'memory-save', onclick: async () => {
      try {
        await call('/memory/put', { namespace: it.namespace, key: it.key, value: JSON.parse(value.value) });
        await runSearch();
      } catch (err) { showError(err); }
    } }, 'Save');
    const del = h('button', { class: 'memory-delete', onclick: async () => {
      if (!confirm('Delete ' + it.namespace.join('/') + ' ' + it.key + '?')) return;
      try {
        await call('/memory/delete', { namespace: it.namespace, key: it.key });
        await Promise.all([loadSpaces(), runSearch()]);
      } catch (err) { showError(err); }
    } }, 'Delete');
    return h('tr', { dataset: { key: it.key, namespace: it.namespace.join('/') } },
      h('td', {}, h('code', {}, it.namespace.join('/'))),
      h('td', { class: 'key' }, h('code', {}, it.key)),
      h('td', {}, value),
      h('td', { class: 'num' }, it.score.toFixed(3)),
      h('td', {}, fmtTime(it.updated_at)),
      h('td', {}, it.expires_at ? fmtTime(it.expires_at) : ''),
      h('td', {}, save, ' ', del));
  }

  await Promise.all([loadSpaces(), runSearch()]);
}
