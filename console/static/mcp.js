// The MCP servers page (/mcp-servers): the tenant's servers, read-only
// (mcp-servers/list): how each is reached, where its credentials come
// from (names only: the API never answers a secret), the tools agents may
// use, the timeout and the approval policy. Servers are added and changed
// with the API or `executor mcp-servers` (docs/mcp.md).
import { call } from './api.js';
import { h, append, clear, fmtTime } from './dom.js';

export async function mcpServersPage(main) {
  const panel = h('section', { class: 'panel', id: 'mcp-server-list' }, h('h2', {}, 'MCP servers'), h('p', { class: 'muted' }, 'Loading…'));
  append(main, panel);
  const data = await call('/mcp-servers/list', {});
  clear(panel);
  append(panel, h('h2', {}, 'MCP servers ', h('span', { class: 'muted' }, '(' + data.total + ')')),
    h('p', { class: 'muted' }, 'Agents list a server\'s tools as ', h('code', {}, 'mcp:<server>/<tool>'), ' or ', h('code', {}, 'mcp:<server>/*'),
      '. Add and change servers with the API or ', h('code', {}, 'executor mcp-servers'), '.'));
  if (!data.items.length) {
    append(panel, h('p', { class: 'muted' }, 'None yet.'));
    return;
  }
  const rows = data.items.map((m) => h('tr', { dataset: { mcpServer: m.name, mcpServerId: m.id } },
    h('td', {}, h('b', {}, m.name), h('br'), h('code', { class: 'muted' }, m.id)),
    h('td', { class: 'endpoint' }, m.url ? h('code', {}, m.url) : [h('span', { class: 'badge' }, 'stdio'), ' ', h('code', {}, (m.command || []).join(' '))]),
    h('td', { class: 'credentials' }, credentials(m)),
    h('td', { class: 'tools' }, m.allowed_tools.length ? m.allowed_tools.map((t) => h('code', {}, t)).flatMap((c, i) => (i ? [' ', c] : [c])) : h('span', { class: 'muted' }, 'all')),
    h('td', { class: 'num' }, (m.timeout_seconds || 60) + ' s'),
    h('td', {}, m.approval),
    h('td', {}, fmtTime(m.updated_at))));
  append(panel, h('table', { class: 'list' },
    h('thead', {}, h('tr', {}, ['Server', 'Endpoint', 'Credentials', 'Allowed tools', 'Timeout', 'Approval', 'Updated'].map((x) => h('th', {}, x)))),
    h('tbody', {}, rows)));
}

// credentials says where a server's credentials come from, never what
// they are: the API answers the names of the inline secrets only.
function credentials(m) {
  const out = [];
  for (const name of m.secrets_set || []) out.push(h('span', { class: 'badge' }, name + ' (stored)'));
  if (m.bearer_token_env) out.push(h('span', { class: 'badge' }, 'authorization from $' + m.bearer_token_env));
  for (const [header, env] of Object.entries(m.header_env || {})) out.push(h('span', { class: 'badge' }, header + ' from $' + env));
  return out.length ? out.flatMap((c, i) => (i ? [' ', c] : [c])) : h('span', { class: 'muted' }, 'none');
}
